/*
 * One schema id's fetch, on the registry's thread (see dd_registry.h):
 * GET /schemas/ids/<id>, the schemas it references (GET
 * /subjects/<subject>/versions/<version>, each fetched once for the life
 * of the process), the parse, and the check of its fingerprint against
 * the database's record.
 *
 * Nothing a registry sends is believed before it is checked: an answer is
 * read only up to DD_REGISTRY_MAX_BODY bytes and within one deadline for
 * the whole fetch (references included), however slowly it trickles in;
 * it must be strict JSON (dd_json.h: no member twice) with a schema
 * string, or it is a fault (a maintenance page answering 200), retried
 * and never remembered. Only a well-formed answer gives a verdict on the
 * messages: schema_unknown for an id the registry says it lacks, bad_avro
 * for a schema that is no valid Avro schema.
 */
#include "dd_registry_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "dd_buf.h"
#include "dd_common.h"
#include "dd_json.h"
#include "dd_log.h"

/* One fetch: its deadline, and what it has gathered. */
typedef struct {
    dd_registry_t *reg;
    uint32_t id;
    int64_t deadline_ms;
    dd_reg_result_t *res;
    const dd_reg_subject_t *order[DD_REGISTRY_MAX_REFS]; /* the references, each before its users */
    size_t order_cnt;
    size_t text_bytes; /* of the schema and its references */
    const dd_reg_subject_t *path[DD_REGISTRY_MAX_REF_DEPTH + 1];
    int depth;
} dd_reg_fetch_t;

/* Settles the fetch as state; for DD_REG_FAILED, with fault. Returns -1. */
__attribute__((format(printf, 4, 5))) static int
dd_reg_set(dd_reg_fetch_t *f, dd_reg_state_t state, dd_registry_fault_t fault, const char *fmt, ...)
{
    va_list ap;

    f->res->state = state;
    f->res->fault = fault;
    va_start(ap, fmt);
    vsnprintf(f->res->why, sizeof(f->res->why), fmt, ap);
    va_end(ap);
    return -1;
}

/*
 * One request
 */

typedef struct {
    dd_buf_t body;
    int too_long;
} dd_reg_body_t;

static size_t dd_reg_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    dd_reg_body_t *b = arg;
    size_t n = size * nmemb;

    if (b->body.len + n > DD_REGISTRY_MAX_BODY) {
        b->too_long = 1;
        return 0; /* libcurl fails the transfer */
    }
    dd_buf_put(&b->body, data, n);
    return b->body.oom ? 0 : n;
}

/* Ends a transfer when the registry is destroyed (called about once a
 * second, and whenever data moves). */
static int dd_reg_progress_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                              curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return atomic_load(&((dd_registry_t *)arg)->stop);
}

static void dd_reg_setopts(dd_reg_fetch_t *f, CURL *c, const char *url, dd_reg_body_t *body,
                           struct curl_slist *hdrs, char *curl_err, long left_ms)
{
    const dd_conf_registry_t *conf = f->reg->conf;

    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* the whole request, however slowly the answer comes; and a transfer
     * that stalls below 1 KiB/s for half of schema_registry.timeout ends
     * then */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, left_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, left_ms);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)(conf->timeout_ms / 2000 + 1));
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, dd_reg_progress_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, f->reg);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, dd_reg_write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    if (conf->user) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, conf->user);
        curl_easy_setopt(c, CURLOPT_PASSWORD, conf->password ? conf->password : "");
    }
    if (conf->tls.ca) curl_easy_setopt(c, CURLOPT_CAINFO, conf->tls.ca);
    if (conf->tls.cert) curl_easy_setopt(c, CURLOPT_SSLCERT, conf->tls.cert);
    if (conf->tls.key) curl_easy_setopt(c, CURLOPT_SSLKEY, conf->tls.key);
}

/* GET url into body with *status; -1 (the fetch failed) when no answer
 * came within the deadline. */
static int dd_reg_get(dd_reg_fetch_t *f, const char *url, dd_reg_body_t *body, long *status)
{
    char curl_err[CURL_ERROR_SIZE] = "";
    long left_ms = (long)(f->deadline_ms - dd_now_ms());
    struct curl_slist *hdrs = NULL;
    CURL *c = NULL;
    CURLcode cc;

    *status = 0;
    if (left_ms <= 0)
        return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE,
                          "schema id %u: the schema registry took longer than "
                          "schema_registry.timeout (%d ms) to answer, at GET %.300s",
                          f->id, f->reg->conf->timeout_ms, url);
    hdrs = curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json, "
                                   "application/json");
    if (!hdrs || !(c = curl_easy_init())) {
        curl_slist_free_all(hdrs);
        return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE,
                          "out of memory for a registry request");
    }
    dd_reg_setopts(f, c, url, body, hdrs, curl_err, left_ms);
    cc = curl_easy_perform(c);
    if (cc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    if (cc == CURLE_OK && !body->body.oom) return 0;
    if (body->too_long)
        return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_BAD_ANSWER,
                          "the schema registry's answer to GET %.300s is longer than %d bytes", url,
                          DD_REGISTRY_MAX_BODY);
    return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE,
                      "the schema registry did not answer GET %.300s: %s", url,
                      body->body.oom ? "out of memory for the answer"
                      : curl_err[0]  ? curl_err
                                     : curl_easy_strerror(cc));
}

/* A registry error's JSON {"error_code": N, "message": "..."}: its code
 * (0 when there is none) and message. */
static long dd_reg_error_code(const dd_reg_body_t *body, char *msg, size_t msg_size)
{
    cJSON *j = cJSON_ParseWithLength(body->body.p ? body->body.p : "", body->body.len);
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "error_code");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    long n = cJSON_IsNumber(code) ? (long)code->valuedouble : 0;

    snprintf(msg, msg_size, "%.200s", cJSON_IsString(m) ? m->valuestring : "");
    cJSON_Delete(j);
    return n;
}

/* A 200 answer's JSON, strict (dd_json.h) and an object, into *jp; else
 * the fetch failed: the registry did not answer as a registry does. */
static int dd_reg_answer(dd_reg_fetch_t *f, const char *url, const dd_reg_body_t *body, cJSON **jp)
{
    dd_json_doc_t *doc = dd_json_doc_new();
    char why[200] = "out of memory";
    int rc =
        doc ? dd_json_parse(doc, body->body.p ? body->body.p : "", body->body.len, why, sizeof(why))
            : DD_ERR_NOMEM;

    dd_json_doc_destroy(doc);
    *jp = rc ? NULL : cJSON_ParseWithLength(body->body.p, body->body.len);
    if (!rc && cJSON_IsObject(*jp)) return 0;
    cJSON_Delete(*jp);
    *jp = NULL;
    return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_BAD_ANSWER,
                      "schema id %u: the schema registry answered GET %.300s with HTTP 200 but "
                      "not with a registry's answer (%s%.120s): a maintenance page or a proxy?",
                      f->id, url, rc ? "not strict JSON: " : "not a JSON object", rc ? why : "");
}

/*
 * References
 */

static int dd_reg_schema_of(dd_reg_fetch_t *f, const cJSON *j, const char *subject,
                            dd_reg_ref_t **refs, size_t *ref_cnt, const char *url);

static void dd_reg_refs_free(dd_reg_ref_t *refs, size_t ref_cnt)
{
    for (size_t i = 0; i < ref_cnt; i++)
        free(refs[i].subject);
    free(refs);
}

static void dd_reg_subject_free(dd_reg_subject_t *s)
{
    dd_reg_refs_free(s->refs, s->ref_cnt);
    free(s->text);
    free(s->subject);
    free(s);
}

/* The referenced schema of subject and version: from the cache, or
 * fetched into it. NULL when the fetch failed. */
static const dd_reg_subject_t *dd_reg_subject(dd_reg_fetch_t *f, const dd_reg_ref_t *ref)
{
    dd_registry_t *reg = f->reg;
    char url[1500], *esc;
    dd_reg_body_t body = {0};
    dd_reg_subject_t *s;
    cJSON *j = NULL;
    long status;

    for (s = reg->subjects; s; s = s->next)
        if (s->version == ref->version && strcmp(s->subject, ref->subject) == 0) return s;
    if (!(esc = curl_easy_escape(NULL, ref->subject, 0)) || !(s = calloc(1, sizeof(*s)))) {
        curl_free(esc);
        dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE, "out of memory");
        return NULL;
    }
    snprintf(url, sizeof(url), "%s/subjects/%.400s/versions/%d", reg->base, esc, ref->version);
    curl_free(esc);
    if (dd_reg_get(f, url, &body, &status)) goto fail;
    if (status != 200) {
        char msg[256];
        long code = dd_reg_error_code(&body, msg, sizeof(msg));
        dd_reg_set(f, DD_REG_FAILED,
                   code == 40401 || code == 40402 ? DD_REGISTRY_FAULT_BAD_ANSWER
                                                  : DD_REGISTRY_FAULT_UNREACHABLE,
                   "schema id %u refers to version %d of subject %.200s, and the schema "
                   "registry answered HTTP %ld to GET %.300s%s%s",
                   f->id, ref->version, ref->subject, status, url, msg[0] ? ": " : "", msg);
        goto fail;
    }
    if (dd_reg_answer(f, url, &body, &j) ||
        dd_reg_schema_of(f, j, ref->subject, &s->refs, &s->ref_cnt, url))
        goto fail;
    s->text = strdup(cJSON_GetObjectItemCaseSensitive(j, "schema")->valuestring);
    s->subject = strdup(ref->subject);
    if (!s->text || !s->subject) {
        dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE, "out of memory");
        goto fail;
    }
    s->len = strlen(s->text);
    s->version = ref->version;
    s->next = reg->subjects;
    reg->subjects = s;
    cJSON_Delete(j);
    dd_buf_release(&body.body);
    return s;
fail:
    cJSON_Delete(j);
    dd_buf_release(&body.body);
    dd_reg_subject_free(s);
    return NULL;
}

static int dd_reg_resolve(dd_reg_fetch_t *f, const dd_reg_ref_t *refs, size_t ref_cnt);

/* One reference: its own references first, then it, once per fetch. */
static int dd_reg_resolve_one(dd_reg_fetch_t *f, const dd_reg_ref_t *ref)
{
    const dd_reg_subject_t *s;

    for (size_t i = 0; i < f->order_cnt; i++)
        if (f->order[i]->version == ref->version && strcmp(f->order[i]->subject, ref->subject) == 0)
            return 0;
    for (int i = 0; i < f->depth; i++)
        if (f->path[i]->version == ref->version && strcmp(f->path[i]->subject, ref->subject) == 0)
            return dd_reg_set(f, DD_REG_BAD, 0,
                              "schema id %u: its references form a cycle through version %d of "
                              "subject %.200s",
                              f->id, ref->version, ref->subject);
    if (f->depth >= DD_REGISTRY_MAX_REF_DEPTH || f->order_cnt >= DD_REGISTRY_MAX_REFS)
        return dd_reg_set(f, DD_REG_BAD, 0,
                          "schema id %u: its references nest deeper than %d or are more than %d",
                          f->id, DD_REGISTRY_MAX_REF_DEPTH, DD_REGISTRY_MAX_REFS);
    if (!(s = dd_reg_subject(f, ref))) return -1;
    f->path[f->depth++] = s;
    if (dd_reg_resolve(f, s->refs, s->ref_cnt)) return -1;
    f->depth--;
    if ((f->text_bytes += s->len) > DD_REGISTRY_MAX_BODY)
        return dd_reg_set(f, DD_REG_BAD, 0,
                          "schema id %u: the schema and its references are more than %d bytes",
                          f->id, DD_REGISTRY_MAX_BODY);
    f->order[f->order_cnt++] = s;
    return 0;
}

static int dd_reg_resolve(dd_reg_fetch_t *f, const dd_reg_ref_t *refs, size_t ref_cnt)
{
    for (size_t i = 0; i < ref_cnt; i++)
        if (dd_reg_resolve_one(f, &refs[i])) return -1;
    return 0;
}

/* An answer's "references": [{"name", "subject", "version"}], into a
 * malloc'd array. A registry's answer always has them right: else the
 * answer is not believed. */
static int dd_reg_refs_of(dd_reg_fetch_t *f, const cJSON *j, dd_reg_ref_t **refs, size_t *ref_cnt,
                          const char *url)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "references"), *r;
    size_t n = 0;

    *refs = NULL;
    *ref_cnt = 0;
    if (!arr || cJSON_IsNull(arr)) return 0;
    if (!cJSON_IsArray(arr)) goto bad;
    if (!(*refs = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(**refs))))
        return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE, "out of memory");
    cJSON_ArrayForEach(r, arr)
    {
        const cJSON *subject = cJSON_GetObjectItemCaseSensitive(r, "subject");
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(r, "version");
        if (!cJSON_IsString(subject) || !cJSON_IsNumber(version) || version->valuedouble < 1 ||
            version->valuedouble > 0x7fffffff ||
            version->valuedouble != (double)(int)version->valuedouble)
            goto bad;
        if (!((*refs)[n].subject = strdup(subject->valuestring)))
            return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE, "out of memory");
        (*refs)[n++].version = (int)version->valuedouble;
        *ref_cnt = n;
    }
    return 0;
bad:
    return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_BAD_ANSWER,
                      "schema id %u: the references in the schema registry's answer to GET "
                      "%.300s are not a list of {name, subject, version (a number from 1)}",
                      f->id, url);
}

/* A schema answer: {"schema": "<text>", "schemaType": ..., "references":
 * [...]}: its text must be there, and an Avro schema's. */
static int dd_reg_schema_of(dd_reg_fetch_t *f, const cJSON *j, const char *subject,
                            dd_reg_ref_t **refs, size_t *ref_cnt, const char *url)
{
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(j, "schema");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "schemaType");

    if (!cJSON_IsString(schema))
        return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_BAD_ANSWER,
                          "schema id %u: the schema registry's answer to GET %.300s has no schema",
                          f->id, url);
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "AVRO") != 0)) {
        if (subject)
            return dd_reg_set(f, DD_REG_BAD, 0,
                              "schema id %u refers to subject %.200s, a %.40s schema, not an "
                              "Avro one",
                              f->id, subject,
                              cJSON_IsString(type) ? type->valuestring : "non-Avro");
        return dd_reg_set(f, DD_REG_BAD, 0, "schema id %u is a %.40s schema, not an Avro one",
                          f->id, cJSON_IsString(type) ? type->valuestring : "non-Avro");
    }
    return dd_reg_refs_of(f, j, refs, ref_cnt, url);
}

/*
 * The schema of an id
 */

/* Parses text with the references gathered in f->order. */
#define DD_REG_WHAT 240

static int dd_reg_parse(dd_reg_fetch_t *f, const char *text)
{
    dd_avro_text_t texts[DD_REGISTRY_MAX_REFS];
    char *what = f->order_cnt ? malloc(f->order_cnt * DD_REG_WHAT) : NULL, why[300];
    int rc = DD_ERR_NOMEM;

    if (f->order_cnt && !what) goto out;
    for (size_t i = 0; i < f->order_cnt; i++) {
        snprintf(what + i * DD_REG_WHAT, DD_REG_WHAT, "version %d of subject %.200s",
                 f->order[i]->version, f->order[i]->subject);
        texts[i] = (dd_avro_text_t){f->order[i]->text, f->order[i]->len, what + i * DD_REG_WHAT};
    }
    rc = dd_avro_schema_new_refs(&f->res->schema, texts, f->order_cnt, text, strlen(text), why,
                                 sizeof(why));
out:
    free(what);
    if (rc == DD_ERR_NOMEM)
        return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE,
                          "schema id %u: out of memory parsing it", f->id);
    if (rc)
        return dd_reg_set(f, DD_REG_BAD, 0, "schema id %u is no valid Avro schema: %s", f->id, why);
    return 0;
}

/* The database's record of the id's fingerprint: the same one, or the
 * schema is not used. */
static int dd_reg_verify(dd_reg_fetch_t *f)
{
    dd_registry_t *reg = f->reg;
    const unsigned char *fp = dd_avro_schema_fingerprint(f->res->schema);
    char why[300];
    int rc;

    if (!reg->opts.verify) return 0;
    rc = reg->opts.verify(reg->opts.verify_opaque, f->id, fp, why, sizeof(why));
    if (!rc) return 0;
    dd_avro_schema_destroy(f->res->schema);
    f->res->schema = NULL;
    if (rc != DD_ERR_PERMANENT)
        return dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNVERIFIED,
                          "schema id %u: cannot check it against the database's record of "
                          "schema ids: %s",
                          f->id, why);
    dd_reg_set(f, DD_REG_FAILED, DD_REGISTRY_FAULT_CHANGED,
               "schema id %u: the schema registry serves another schema than the one this "
               "database recorded for the id (%s); it is not used",
               f->id, why);
    dd_log(DD_LOG_ERROR,
           "%s. Its messages wait. Was the registry rebuilt without its ids? "
           "docs/OPERATIONS.md, \"Avro and the schema registry\", says what to do.",
           f->res->why);
    return -1;
}

void dd_registry_fetch(dd_registry_t *reg, uint32_t id, dd_reg_result_t *res)
{
    dd_reg_fetch_t f = {.reg = reg, .id = id, .res = res};
    dd_reg_body_t body = {0};
    dd_reg_ref_t *refs = NULL;
    size_t ref_cnt = 0;
    char url[1100];
    cJSON *j = NULL;
    long status;

    f.deadline_ms = dd_now_ms() + reg->conf->timeout_ms;
    res->state = DD_REG_OK;
    snprintf(url, sizeof(url), "%s/schemas/ids/%u", reg->base, id);
    pthread_mutex_lock(&reg->mu);
    reg->fetches++;
    pthread_mutex_unlock(&reg->mu);
    if (dd_reg_get(&f, url, &body, &status)) goto out;
    if (status != 200) {
        char msg[256];
        long code = dd_reg_error_code(&body, msg, sizeof(msg));
        if (status == 404 && code == 40403)
            dd_reg_set(&f, DD_REG_UNKNOWN, 0, "the schema registry has no schema of id %u (%s)", id,
                       msg[0] ? msg : "error code 40403");
        else
            dd_reg_set(&f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE,
                       "the schema registry answered HTTP %ld to GET %s%s%s", status, url,
                       msg[0] ? ": " : "", msg);
        goto out;
    }
    if (dd_reg_answer(&f, url, &body, &j) || dd_reg_schema_of(&f, j, NULL, &refs, &ref_cnt, url) ||
        dd_reg_resolve(&f, refs, ref_cnt) ||
        dd_reg_parse(&f, cJSON_GetObjectItemCaseSensitive(j, "schema")->valuestring))
        goto out;
    dd_reg_verify(&f);
out:
    dd_reg_refs_free(refs, ref_cnt);
    cJSON_Delete(j);
    dd_buf_release(&body.body);
}

int dd_registry_latest(dd_registry_t *reg, const char *subject, char **textp, uint32_t *idp,
                       int *versionp, char *errstr, size_t errstr_size)
{
    dd_reg_result_t res = {.state = DD_REG_OK};
    dd_reg_fetch_t f = {.reg = reg, .res = &res};
    dd_reg_body_t body = {0};
    const cJSON *id, *version, *schema;
    char url[1500], msg[256], *esc = curl_easy_escape(NULL, subject, 0);
    cJSON *j = NULL;
    long status, code;
    int rc = DD_ERR_RETRIABLE;

    *textp = NULL;
    if (!esc) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    f.deadline_ms = dd_now_ms() + reg->conf->timeout_ms;
    snprintf(url, sizeof(url), "%s/subjects/%.400s/versions/latest", reg->base, esc);
    curl_free(esc);
    if (dd_reg_get(&f, url, &body, &status) == 0 && status != 200) {
        code = dd_reg_error_code(&body, msg, sizeof(msg));
        if (status == 404 && (code == 40401 || code == 40402)) rc = DD_ERR_PERMANENT;
        dd_reg_set(&f, DD_REG_FAILED, DD_REGISTRY_FAULT_UNREACHABLE,
                   "the schema registry answered HTTP %ld to GET %.300s%s%s", status, url,
                   msg[0] ? ": " : "", msg);
    } else if (res.state == DD_REG_OK && dd_reg_answer(&f, url, &body, &j) == 0) {
        id = cJSON_GetObjectItemCaseSensitive(j, "id");
        version = cJSON_GetObjectItemCaseSensitive(j, "version");
        schema = cJSON_GetObjectItemCaseSensitive(j, "schema");
        if (cJSON_IsNumber(id) && cJSON_IsNumber(version) && cJSON_IsString(schema) &&
            (*textp = strdup(schema->valuestring))) {
            *idp = (uint32_t)id->valuedouble;
            *versionp = (int)version->valuedouble;
            rc = 0;
        } else {
            dd_reg_set(&f, DD_REG_FAILED, DD_REGISTRY_FAULT_BAD_ANSWER,
                       "the schema registry's answer to GET %.300s has no id, version and "
                       "schema",
                       url);
        }
    }
    if (rc) dd_errstr_set(errstr, errstr_size, "%s", res.why);
    cJSON_Delete(j);
    dd_buf_release(&body.body);
    return rc;
}

void dd_registry_subjects_release(dd_registry_t *reg)
{
    dd_reg_subject_t *s, *next;

    for (s = reg->subjects; s; s = next) {
        next = s->next;
        dd_reg_subject_free(s);
    }
    reg->subjects = NULL;
}
