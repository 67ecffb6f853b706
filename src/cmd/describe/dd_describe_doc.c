/*
 * The AsyncAPI 3.0 document of one route: its channels (each topic or
 * pattern, and its dead-letter topic with the headers dedupd writes), the
 * message's payload (what the key, lane key, shard key and request hash
 * read, or the Avro writer schema), and the operation's x-idempotency:
 * the contract between a producer and this consumer. Every sentence in it
 * comes from a table dedupd already documents itself with (the settings'
 * descriptions, the dead-letter reasons and headers) or from the parsed
 * key templates, never from their text, so the document cannot drift from
 * what dedupd does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_describe_int.h"
#include "dd_dlq.h"
#include "dd_hash.h"
#include "dd_jpath.h"
#include "dd_json.h"
#include "dd_key.h"
#include "dd_reasons.h"
#include "dd_validate.h"

/* What a field of the payload is read for. */
#define DD_ROLE_KEY 1
#define DD_ROLE_LANE 2
#define DD_ROLE_SHARD 4
#define DD_ROLE_HASH 8

static const char *const dd_describe_roles[] = {"key", "laneKey", "shardKey", "requestHash"};

/* The states of a key in the dedup table, and what a producer sees of a
 * copy that arrives in each (docs/GUARANTEES.md). */
static const struct {
    const char *name;
    int external; /* only in external mode */
    const char *meaning;
    const char *copy;
} dd_describe_states[] = {
    {"applied", 0,
     "The message's effect happened once; the row keeps its request hash and "
     "the handler's response.",
     "A copy with the same request hash is a replay: skipped, its offset committed. A copy "
     "with another hash is a conflict: dead-lettered with reason conflict; the stored row is "
     "never overwritten."},
    {"failed", 0,
     "The handler rejected the message (or its retries ran out): nothing was "
     "applied; the row keeps the error.",
     "With dedup.retry_failed, a copy with the same request hash is applied again; with "
     "another hash it is a conflict. Without it, every copy is dead-lettered."},
    {"processing", 1,
     "External mode: a consumer holds the key under a lease while it calls "
     "the downstream with the key and its fencing token.",
     "A copy waits for the key's claim: once the lease runs out another consumer takes it "
     "over with a larger token and asks the downstream what happened before acting again."},
};

/* Seconds in the largest unit that divides them: "7d", "36h", "90s". */
static void dd_describe_duration(int64_t s, char *out, size_t out_size)
{
    static const struct {
        int64_t secs;
        const char *unit;
    } units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (s > 0 && s % units[i].secs == 0) {
            snprintf(out, out_size, "%lld%s", (long long)(s / units[i].secs), units[i].unit);
            return;
        }
    snprintf(out, out_size, "%llds", (long long)s);
}

static const char *dd_describe_setting(const char *path)
{
    for (int i = 0; dd_conf_setting_path(i); i++)
        if (strcmp(dd_conf_setting_path(i), path) == 0) return dd_conf_setting_desc(i, 0);
    return "";
}

/* Sets node's "type" to type. */
static void dd_describe_type(cJSON *node, const char *type)
{
    if (cJSON_GetObjectItem(node, "type"))
        cJSON_ReplaceItemInObject(node, "type", cJSON_CreateString(type));
    else
        cJSON_AddStringToObject(node, "type", type);
}

/* The schema node below parent for one step, made on first use. */
static cJSON *dd_describe_step(cJSON *parent, const dd_jpath_step_t *st, int required)
{
    cJSON *props, *child, *req;
    char name[256];

    if (!st->name) {
        cJSON *min = cJSON_GetObjectItem(parent, "minItems");
        dd_describe_type(parent, "array");
        if (!min)
            cJSON_AddNumberToObject(parent, "minItems", st->index + 1);
        else if (min->valuedouble < st->index + 1)
            cJSON_SetNumberValue(min, st->index + 1);
        if (!(child = cJSON_GetObjectItem(parent, "items")))
            child = cJSON_AddObjectToObject(parent, "items");
        return child;
    }
    snprintf(name, sizeof(name), "%.*s", (int)st->name_len, st->name);
    dd_describe_type(parent, "object");
    if (!(props = cJSON_GetObjectItem(parent, "properties")))
        props = cJSON_AddObjectToObject(parent, "properties");
    if (!(child = cJSON_GetObjectItem(props, name))) child = cJSON_AddObjectToObject(props, name);
    if (!required) return child;
    if (!(req = cJSON_GetObjectItem(parent, "required")))
        req = cJSON_AddArrayToObject(parent, "required");
    for (cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (strcmp(r->valuestring, name) == 0) return child;
    cJSON_AddItemToArray(req, cJSON_CreateString(name));
    return child;
}

/* Marks the field at path in schema with role (and, for the key's fields,
 * the types a key accepts: docs/KEYS.md 5). */
static void dd_describe_field(cJSON *schema, const dd_jpath_t *path, int role)
{
    cJSON *node = schema, *roles, *types;

    for (int s = 0; s < path->step_cnt; s++)
        node = dd_describe_step(node, &path->steps[s], role & DD_ROLE_KEY);
    if (!cJSON_GetObjectItem(node, "type") && (role & DD_ROLE_KEY)) {
        types = cJSON_AddArrayToObject(node, "type");
        cJSON_AddItemToArray(types, cJSON_CreateString("string"));
        cJSON_AddItemToArray(types, cJSON_CreateString("number"));
        cJSON_AddItemToArray(types, cJSON_CreateString("boolean"));
    }
    if (!(roles = cJSON_GetObjectItem(node, "x-dedupd-roles")))
        roles = cJSON_AddArrayToObject(node, "x-dedupd-roles");
    for (size_t b = 0; b < sizeof(dd_describe_roles) / sizeof(dd_describe_roles[0]); b++) {
        int have = 0;
        if (!(role & (1 << b))) continue;
        for (cJSON *r = roles->child; r; r = r->next)
            have |= strcmp(r->valuestring, dd_describe_roles[b]) == 0;
        if (!have) cJSON_AddItemToArray(roles, cJSON_CreateString(dd_describe_roles[b]));
    }
}

/* An example value at path in the example payload: the field's name and 1
 * (an array element: "item-1"), so the example key shows each field. */
static void dd_describe_example_set(cJSON *root, const dd_jpath_t *path)
{
    cJSON *node = root, *next;
    char name[256], value[300];

    for (int s = 0; s < path->step_cnt; s++) {
        const dd_jpath_step_t *st = &path->steps[s];
        int last = s == path->step_cnt - 1;
        if (st->name) {
            snprintf(name, sizeof(name), "%.*s", (int)st->name_len, st->name);
            snprintf(value, sizeof(value), "%s-1", name);
            if (!cJSON_IsObject(node)) return;
            if (!(next = cJSON_GetObjectItem(node, name))) {
                next = last
                           ? cJSON_CreateString(value)
                           : (path->steps[s + 1].name ? cJSON_CreateObject() : cJSON_CreateArray());
                cJSON_AddItemToObject(node, name, next);
            }
        } else {
            if (!cJSON_IsArray(node)) return;
            while (cJSON_GetArraySize(node) <= st->index)
                cJSON_AddItemToArray(node, last ? cJSON_CreateString("item-1")
                                                : (path->steps[s + 1].name ? cJSON_CreateObject()
                                                                           : cJSON_CreateArray()));
            next = cJSON_GetArrayItem(node, st->index);
        }
        node = next;
    }
}

/* The example: a payload holding the fields of the key and the request
 * hash, its key and request hash as dedupd computes them. */
static void dd_describe_example(cJSON *key, const dd_key_tmpl_t *tmpl, const dd_hash_spec_t *hash,
                                const dd_conf_dedup_t *d)
{
    const dd_jpath_t *first = dd_key_tmpl_path(tmpl, 0);
    cJSON *payload = first->steps[0].name ? cJSON_CreateObject() : cJSON_CreateArray();
    cJSON *ex = cJSON_AddObjectToObject(key, "example");
    dd_json_doc_t *doc = dd_json_doc_new();
    unsigned char h[DD_HASH_LEN];
    char *text = NULL, out[DD_KEY_MAX + 1], why[256], hex[DD_HASH_HEX_LEN + 1];
    size_t len;

    for (int i = 0; i < dd_key_tmpl_path_cnt(tmpl); i++)
        dd_describe_example_set(payload, dd_key_tmpl_path(tmpl, i));
    for (int i = 0; i < d->hash_cnt; i++) {
        dd_jpath_t path = {0};
        if (dd_jpath_parse(&path, d->hash[i], strlen(d->hash[i]), 1, why, sizeof(why)) == 0)
            dd_describe_example_set(payload, &path);
        dd_jpath_release(&path);
    }
    text = cJSON_PrintUnformatted(payload);
    cJSON_AddItemToObject(ex, "payload", payload);
    if (!text || !doc || dd_json_parse(doc, text, strlen(text), why, sizeof(why)) != 0 ||
        dd_key_render(tmpl, doc, out, &len, why, sizeof(why)) != DD_KEY_OK)
        goto done;
    cJSON_AddStringToObject(ex, "key", out);
    if (dd_hash_doc(hash, doc, h) == 0) {
        dd_hash_hex(h, hex);
        cJSON_AddStringToObject(ex, "requestHash", hex);
    }
done:
    free(text);
    dd_json_doc_destroy(doc);
}

/* The key's format: its text with each placeholder as {path}. */
static void dd_describe_format(const dd_key_tmpl_t *tmpl, char *out, size_t out_size)
{
    char text[1024];
    size_t o = 0;

    dd_key_tmpl_text(tmpl, text, sizeof(text));
    for (const char *p = text; *p && o + 1 < out_size; p++) {
        if (p[0] == '$' && p[1] == '$') {
            out[o++] = '$';
            p++;
        } else if (p[0] == '$' && p[1] == '{') {
            out[o++] = '{';
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

/* A template's fields into the payload schema and, as paths, into list. */
static void dd_describe_tmpl_fields(cJSON *schema, cJSON *list, const dd_key_tmpl_t *tmpl, int role)
{
    for (int i = 0; i < dd_key_tmpl_path_cnt(tmpl); i++) {
        dd_describe_field(schema, dd_key_tmpl_path(tmpl, i), role);
        cJSON_AddItemToArray(list, cJSON_CreateString(dd_key_tmpl_path(tmpl, i)->text));
    }
}

/* A template of the route (its text, or the business key's when NULL) as
 * an object of x-idempotency. */
static int dd_describe_tmpl(cJSON *parent, const char *name, const char *text, cJSON *schema,
                            int role, const char *setting, dd_key_tmpl_t **tmplp, char *errstr,
                            size_t errstr_size)
{
    cJSON *o = cJSON_AddObjectToObject(parent, name);
    char format[1024], err[512];

    if (dd_key_tmpl_new(tmplp, text, err, sizeof(err)) != 0) {
        dd_errstr_set(errstr, errstr_size, "%s: %s", setting, err);
        return -1;
    }
    cJSON_AddStringToObject(o, "template", text);
    dd_describe_format(*tmplp, format, sizeof(format));
    cJSON_AddStringToObject(o, "format", format);
    dd_describe_tmpl_fields(schema, cJSON_AddArrayToObject(o, "fields"), *tmplp, role);
    cJSON_AddStringToObject(o, "setting", setting);
    cJSON_AddStringToObject(o, "description", dd_describe_setting(setting));
    return 0;
}

static void dd_describe_hash(cJSON *x, cJSON *schema, const dd_conf_dedup_t *d)
{
    cJSON *o = cJSON_AddObjectToObject(x, "requestHash");
    cJSON *fields = cJSON_AddArrayToObject(o, "fields");
    dd_jpath_t path;
    char err[256];

    cJSON_AddStringToObject(o, "algorithm", "SHA-256 of the canonical JSON (docs/KEYS.md)");
    cJSON_AddStringToObject(o, "covers", d->hash_cnt ? "the fields listed" : "the whole payload");
    for (int i = 0; i < d->hash_cnt; i++) {
        cJSON_AddItemToArray(fields, cJSON_CreateString(d->hash[i]));
        memset(&path, 0, sizeof(path));
        if (dd_jpath_parse(&path, d->hash[i], strlen(d->hash[i]), 1, err, sizeof(err)) == 0)
            dd_describe_field(schema, &path, DD_ROLE_HASH);
        dd_jpath_release(&path);
    }
    cJSON_AddStringToObject(o, "description", dd_describe_setting("dedup.hash"));
}

static void dd_describe_window(cJSON *x, const dd_conf_t *conf, const dd_conf_dedup_t *d)
{
    cJSON *o = cJSON_AddObjectToObject(x, "window");
    int64_t window = dd_validate_window_s(conf);
    char ttl[32];

    dd_describe_duration(d->ttl_s, ttl, sizeof(ttl));
    cJSON_AddStringToObject(o, "ttl", ttl);
    cJSON_AddNumberToObject(o, "ttlSeconds", (double)d->ttl_s);
    cJSON_AddNumberToObject(o, "redeliveryWindowSeconds", (double)window);
    cJSON_AddBoolToObject(o, "coversRedeliveryWindow", d->ttl_s >= 2 * window);
    cJSON_AddStringToObject(o, "description", dd_describe_setting("dedup.ttl"));
}

static void dd_describe_states_add(cJSON *x, int external, int retry_failed)
{
    cJSON *o = cJSON_AddObjectToObject(x, "states");

    for (size_t i = 0; i < sizeof(dd_describe_states) / sizeof(dd_describe_states[0]); i++) {
        cJSON *s;
        if (dd_describe_states[i].external && !external) continue;
        s = cJSON_AddObjectToObject(o, dd_describe_states[i].name);
        cJSON_AddStringToObject(s, "meaning", dd_describe_states[i].meaning);
        cJSON_AddStringToObject(s, "aCopyArriving", dd_describe_states[i].copy);
    }
    cJSON_AddBoolToObject(x, "retryFailed", retry_failed);
}

/* The reasons a message of this route can be dead-lettered with. */
static cJSON *dd_describe_reasons(const dd_conf_t *conf, const dd_conf_route_t *rt, int external)
{
    cJSON *arr = cJSON_CreateArray();

#define DD_DESCRIBE_REASON(id, name, flags, help)                                                  \
    if ((!((flags)&DD_REASON_F_SHARDS) || conf->shard_cnt > 1) &&                                  \
        (!((flags)&DD_REASON_F_AVRO) || rt->dedup.format == DD_FORMAT_AVRO) &&                     \
        (!((flags)&DD_REASON_F_EXTERNAL) || external)) {                                           \
        cJSON *r = cJSON_CreateObject();                                                           \
        cJSON_AddStringToObject(r, "reason", name);                                                \
        cJSON_AddStringToObject(r, "meaning", help);                                               \
        cJSON_AddItemToArray(arr, r);                                                              \
    }
    DD_REASON_TABLE(DD_DESCRIBE_REASON)
#undef DD_DESCRIBE_REASON
    return arr;
}

/* A string setting of a handler's group, or def. */
static const char *dd_describe_hsetting(const config_setting_t *g, const char *name,
                                        const char *def)
{
    const char *v = NULL;

    return g && config_setting_lookup_string(g, name, &v) ? v : def;
}

/* The HTTP handler that ships with dedupd: the request the service gets
 * (its header names as the handler's group sets them; the defaults are
 * the handler's, handlers/http/http_conf.c), and the reconcile GET. */
static void dd_describe_http(cJSON *o, const dd_conf_handler_t *hc)
{
    cJSON *h = cJSON_AddObjectToObject(o, "http");

    cJSON_AddStringToObject(h, "method", dd_describe_hsetting(hc->config, "method", "POST"));
    cJSON_AddStringToObject(h, "contentType", "application/json");
    cJSON_AddStringToObject(h, "body", "the payload's exact bytes (an Avro route's: its JSON)");
    cJSON_AddStringToObject(h, "idempotencyKeyHeader",
                            dd_describe_hsetting(hc->config, "key_header", "Idempotency-Key"));
    cJSON_AddStringToObject(h, "fenceHeader",
                            dd_describe_hsetting(hc->config, "fence_header", "Dedupd-Fence"));
    cJSON_AddStringToObject(h, "answers",
                            "2xx: done (the body is kept as the response); 400, 404, 409, 410, "
                            "422: rejected, dead-lettered with the status; 408, 425, 429, 5xx "
                            "and no answer: tried again with the same key and token, never "
                            "sooner than Retry-After (docs/HANDLERS.md, \"External mode "
                            "without C\"; the handler's statuses may say otherwise)");
    cJSON_AddStringToObject(
        h, "reconcile",
        dd_describe_hsetting(hc->config, "reconcile_url", NULL)
            ? "GET reconcile_url with the key: 200 done (its body the response), 404 not done, "
              "anything else unknown"
            : "none: after a takeover the call is made again with the same key");
}

/* External mode: what the downstream receives and must do. */
static void dd_describe_downstream(cJSON *x, const dd_describe_in_t *in)
{
    const dd_conf_handler_t *hc = &in->conf->routes[in->route].handler;
    cJSON *o = cJSON_AddObjectToObject(x, "downstream");

    cJSON_AddStringToObject(o, "idempotencyKey",
                            "The business key: the downstream stores it with the outcome and "
                            "answers a repeated call with that outcome, not a second effect.");
    cJSON_AddStringToObject(o, "fence",
                            "A fencing token, larger for every new claim of the key: the "
                            "downstream refuses a call whose token is lower than one it has "
                            "seen for the key (a late call of a claim taken over).");
    cJSON_AddStringToObject(o, "reconcile",
                            dd_handler_has_reconcile(in->h)
                                ? "After a takeover dedupd asks the downstream what it knows of "
                                  "the key before acting again."
                                : "The handler cannot ask the downstream: after a takeover the "
                                  "call is made again, so the effect is at least once.");
    if (hc->builtin && strcmp(hc->builtin, "http") == 0) dd_describe_http(o, hc);
}

/* A channel id from a topic: the name itself, pattern<N> for a pattern. */
static void dd_describe_channel_id(const char *topic, int i, const char *prefix, char *out,
                                   size_t out_size)
{
    if (dd_conf_topic_is_pattern(topic))
        snprintf(out, out_size, "%spattern%d", prefix, i + 1);
    else
        snprintf(out, out_size, "%s%s", prefix, topic);
}

static cJSON *dd_describe_ref(const char *fmt, const char *a, const char *b)
{
    cJSON *o = cJSON_CreateObject();
    char ref[600];

    snprintf(ref, sizeof(ref), fmt, a, b);
    cJSON_AddStringToObject(o, "$ref", ref);
    return o;
}

/* The dead-letter channel of topic i, and its operation. */
static void dd_describe_dlq_channel(cJSON *channels, cJSON *ops, const dd_conf_route_t *rt, int i)
{
    const char *topic = rt->topics[i];
    char id[300], dlq[300], opid[320];
    cJSON *ch, *op, *msgs;

    dd_describe_channel_id(topic, i, "deadLetters.", id, sizeof(id));
    ch = cJSON_AddObjectToObject(channels, id);
    if (rt->dlq.topic)
        cJSON_AddStringToObject(ch, "address", rt->dlq.topic);
    else if (!dd_conf_topic_is_pattern(topic))
        cJSON_AddStringToObject(ch, "address", dd_conf_dlq_topic(rt, topic, dlq, sizeof(dlq)));
    else
        cJSON_AddNullToObject(ch, "address");
    cJSON_AddStringToObject(ch, "description",
                            dd_conf_topic_is_pattern(topic) && !rt->dlq.topic
                                ? "The dead letters of each topic the pattern matches, in "
                                  "<topic>.dlq."
                                : "Messages that cannot be applied, with the reason.");
    msgs = cJSON_AddObjectToObject(ch, "messages");
    cJSON_AddItemToObject(msgs, "deadLetter",
                          dd_describe_ref("#/components/messages/%s%s", "deadLetter", ""));
    snprintf(opid, sizeof(opid), "deadLetter.%s", id + strlen("deadLetters."));
    op = cJSON_AddObjectToObject(ops, opid);
    cJSON_AddStringToObject(op, "action", "send");
    cJSON_AddItemToObject(op, "channel", dd_describe_ref("#/channels/%s%s", id, ""));
    cJSON_AddStringToObject(op, "summary", "dedupd dead-letters what it cannot apply.");
}

static cJSON *dd_describe_dlq_message(const dd_conf_t *conf, const dd_conf_route_t *rt,
                                      int external)
{
    cJSON *m = cJSON_CreateObject(), *hdr, *props, *reasons, *names;

    cJSON_AddStringToObject(m, "name", "deadLetter");
    cJSON_AddStringToObject(m, "summary",
                            "A message dedupd could not apply: the original key, "
                            "payload and headers, and why.");
    hdr = cJSON_AddObjectToObject(m, "headers");
    cJSON_AddStringToObject(hdr, "type", "object");
    props = cJSON_AddObjectToObject(hdr, "properties");
    for (int i = 0; i < DD_DLQ_H_COUNT; i++) {
        cJSON *p = cJSON_AddObjectToObject(props, dd_dlq_header_names[i]);
        cJSON_AddStringToObject(p, "type", "string");
        cJSON_AddStringToObject(p, "description", dd_dlq_header_helps[i]);
        if (i != DD_DLQ_H_REASON) continue;
        reasons = dd_describe_reasons(conf, rt, external);
        names = cJSON_AddArrayToObject(p, "enum");
        for (cJSON *r = reasons->child; r; r = r->next)
            cJSON_AddItemToArray(names,
                                 cJSON_CreateString(cJSON_GetObjectItem(r, "reason")->valuestring));
        cJSON_Delete(reasons);
    }
    cJSON_AddObjectToObject(m, "payload");
    cJSON_AddStringToObject(cJSON_GetObjectItem(m, "payload"), "description",
                            "The original message's value, unchanged (cut only when it did not "
                            "fit: header dedupd.truncated).");
    return m;
}

/* The x-idempotency extension; the payload's fields go into schema. */
static cJSON *dd_describe_idempotency(const dd_describe_in_t *in, cJSON *schema, int external,
                                      char *errstr, size_t errstr_size)
{
    const dd_conf_route_t *rt = &in->conf->routes[in->route];
    const dd_conf_dedup_t *d = &rt->dedup;
    cJSON *x = cJSON_CreateObject(), *key;
    dd_key_tmpl_t *tmpl = NULL, *sub = NULL;
    dd_hash_spec_t *hash = NULL;
    char err[512];
    int rc = -1;

    if (dd_describe_tmpl(x, "key", d->key, schema, DD_ROLE_KEY, "dedup.key", &tmpl, errstr,
                         errstr_size))
        goto done;
    key = cJSON_GetObjectItem(x, "key");
    cJSON_AddNumberToObject(key, "maxBytes", DD_KEY_MAX);
    cJSON_AddStringToObject(key, "source", "the payload, never the Kafka key, offset or id");
    if (dd_hash_spec_new(&hash, d->hash, d->hash_cnt, err, sizeof(err)) != 0) {
        dd_errstr_set(errstr, errstr_size, "dedup.hash: %s", err);
        goto done;
    }
    dd_describe_example(key, tmpl, hash, d);
    dd_describe_hash(x, schema, d);
    if (dd_describe_tmpl(x, "orderingKey", d->lane_key ? d->lane_key : d->key, schema, DD_ROLE_LANE,
                         "dedup.lane_key", &sub, errstr, errstr_size))
        goto done;
    dd_key_tmpl_destroy(sub);
    sub = NULL;
    if (in->conf->shard_cnt > 1 &&
        dd_describe_tmpl(x, "shardKey", d->shard_key ? d->shard_key : d->key, schema, DD_ROLE_SHARD,
                         "dedup.shard_key", &sub, errstr, errstr_size))
        goto done;
    dd_describe_window(x, in->conf, d);
    dd_describe_states_add(x, external, d->retry_failed);
    cJSON_AddStringToObject(x, "mode", external ? "external" : "local");
    if (external) dd_describe_downstream(x, in);
    cJSON_AddItemToObject(x, "deadLetterReasons", dd_describe_reasons(in->conf, rt, external));
    rc = 0;
done:
    dd_key_tmpl_destroy(sub);
    dd_key_tmpl_destroy(tmpl);
    dd_hash_spec_destroy(hash);
    if (rc) {
        cJSON_Delete(x);
        return NULL;
    }
    return x;
}

/* The message's payload: a JSON Schema of what dedupd reads. */
static void dd_describe_payload(cJSON *msg, cJSON *schema)
{
    cJSON_AddStringToObject(msg, "contentType", "application/json");
    cJSON_AddStringToObject(schema, "description",
                            "What dedupd reads of the payload (strict JSON, docs/KEYS.md): the "
                            "fields of the business key, the ordering key, the shard key and "
                            "the request hash. Other fields are the handler's.");
    cJSON_AddItemToObject(msg, "payload", schema);
}

/* The message of an Avro route's topic i: its writer schema, the latest
 * version of its subject, and what dedupd reads of the decoded record. */
static void dd_describe_avro_msg(cJSON *msgs, const dd_describe_in_t *in, int i,
                                 const cJSON *schema)
{
    const char *topic = in->conf->routes[in->route].topics[i];
    cJSON *avro = cJSON_Parse(in->avro[i]), *msg, *p;
    char id[300], subject[320];

    if (!avro) return;
    snprintf(id, sizeof(id), "message.%s", topic);
    snprintf(subject, sizeof(subject), "%s-value", topic);
    msg = cJSON_AddObjectToObject(msgs, id);
    cJSON_AddStringToObject(msg, "name", topic);
    cJSON_AddStringToObject(msg, "contentType", "application/octet-stream");
    cJSON_AddStringToObject(msg, "summary",
                            "The Confluent wire format around an Avro record (docs/KEYS.md, "
                            "Avro), decoded into JSON before the key and hash are taken.");
    p = cJSON_AddObjectToObject(msg, "payload");
    cJSON_AddStringToObject(p, "schemaFormat", "application/vnd.apache.avro;version=1.9.0");
    cJSON_AddItemToObject(p, "schema", avro);
    cJSON_AddStringToObject(msg, "x-dedupd-subject", subject);
    cJSON_AddNumberToObject(msg, "x-dedupd-subject-version", in->avro_version[i]);
    cJSON_AddItemToObject(msg, "x-dedupd-fields", cJSON_Duplicate(schema, 1));
}

static void dd_describe_info(cJSON *doc, const dd_describe_in_t *in, const cJSON *x)
{
    const dd_conf_route_t *rt = &in->conf->routes[in->route];
    cJSON *info = cJSON_AddObjectToObject(doc, "info");
    char *text = cJSON_PrintUnformatted(x), title[300], version[32];
    unsigned char h[DD_HASH_LEN];
    char hex[DD_HASH_HEX_LEN + 1];

    snprintf(title, sizeof(title), "dedupd route %s", rt->name);
    cJSON_AddStringToObject(info, "title", title);
    /* the version changes exactly when the contract does */
    if (text && dd_hash_payload(NULL, text, strlen(text), h) == 0) {
        dd_hash_hex(h, hex);
        snprintf(version, sizeof(version), "0.0.0-%.12s", hex);
    } else {
        snprintf(version, sizeof(version), "0.0.0");
    }
    free(text);
    cJSON_AddStringToObject(info, "version", version);
    cJSON_AddStringToObject(info, "description",
                            "How dedupd consumes this route's topics exactly once in effect: "
                            "the business key it derives from each payload, how long it "
                            "remembers it, and what a producer sees of a copy, a conflict or a "
                            "message that cannot be applied (x-idempotency).");
}

/* The channel of topic i and the operation that consumes it. */
static void dd_describe_consume(cJSON *channels, cJSON *ops, const dd_describe_in_t *in, int i,
                                const cJSON *x)
{
    const dd_conf_route_t *rt = &in->conf->routes[in->route];
    char msgid[320];
    cJSON *ch, *op, *chmsgs, *opmsgs;
    char id[300], opid[320];

    dd_describe_channel_id(rt->topics[i], i, "", id, sizeof(id));
    ch = cJSON_AddObjectToObject(channels, id);
    if (dd_conf_topic_is_pattern(rt->topics[i])) {
        cJSON_AddNullToObject(ch, "address");
        cJSON_AddStringToObject(ch, "description", "Every topic the pattern matches.");
        cJSON_AddStringToObject(ch, "x-dedupd-topic-pattern", rt->topics[i]);
    } else {
        cJSON_AddStringToObject(ch, "address", rt->topics[i]);
    }
    chmsgs = cJSON_AddObjectToObject(ch, "messages");
    snprintf(msgid, sizeof(msgid), "message%s%s", in->avro && in->avro[i] ? "." : "",
             in->avro && in->avro[i] ? rt->topics[i] : "");
    cJSON_AddItemToObject(chmsgs, "message",
                          dd_describe_ref("#/components/messages/%s%s", msgid, ""));
    snprintf(opid, sizeof(opid), "consume.%s", id);
    op = cJSON_AddObjectToObject(ops, opid);
    cJSON_AddStringToObject(op, "action", "receive");
    cJSON_AddItemToObject(op, "channel", dd_describe_ref("#/channels/%s%s", id, ""));
    opmsgs = cJSON_AddArrayToObject(op, "messages");
    cJSON_AddItemToArray(opmsgs, dd_describe_ref("#/channels/%s/messages/%s", id, "message"));
    cJSON_AddStringToObject(op, "summary", "dedupd applies each business key once.");
    cJSON_AddItemToObject(op, "x-idempotency", cJSON_Duplicate(x, 1));
}

cJSON *dd_describe_doc(const dd_describe_in_t *in, char *errstr, size_t errstr_size)
{
    const dd_conf_route_t *rt = &in->conf->routes[in->route];
    int external = in->h && dd_handler_mode(in->h) == DEDUPD_MODE_EXTERNAL;
    cJSON *doc = cJSON_CreateObject(), *schema = cJSON_CreateObject(), *x, *channels, *ops, *comps,
          *msgs, *msg;

    cJSON_AddStringToObject(doc, "asyncapi", "3.0.0");
    if (!(x = dd_describe_idempotency(in, schema, external, errstr, errstr_size))) {
        cJSON_Delete(schema);
        cJSON_Delete(doc);
        return NULL;
    }
    dd_describe_info(doc, in, x);
    channels = cJSON_AddObjectToObject(doc, "channels");
    ops = cJSON_AddObjectToObject(doc, "operations");
    for (int i = 0; i < rt->topic_cnt; i++) {
        dd_describe_consume(channels, ops, in, i, x);
        /* dlq.topic: one dead-letter channel for every topic */
        if (!rt->dlq.topic || i == 0) dd_describe_dlq_channel(channels, ops, rt, i);
    }
    cJSON_Delete(x);
    comps = cJSON_AddObjectToObject(doc, "components");
    msgs = cJSON_AddObjectToObject(comps, "messages");
    msg = cJSON_AddObjectToObject(msgs, "message");
    cJSON_AddStringToObject(msg, "name", rt->name);
    for (int i = 0; in->avro && i < rt->topic_cnt; i++)
        if (in->avro[i]) dd_describe_avro_msg(msgs, in, i, schema);
    dd_describe_payload(msg, schema);
    cJSON_AddItemToObject(msgs, "deadLetter", dd_describe_dlq_message(in->conf, rt, external));
    return doc;
}
