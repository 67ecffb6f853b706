/*
 * Events out of the SQL handler (docs/SQL.md, "Events"): for each applied
 * message, each configured event rendered from its templates and written
 * into dedupd's outbox by host->emit, in the message's transaction.
 *
 * The topic and the key are text templates: a value is its text (a
 * string's bytes, a number as written). The value is a JSON template: a
 * value is its JSON text (a string with its quotes and escapes), so the
 * event is JSON whatever the payload holds; it is checked when the
 * configuration is loaded, with every placeholder standing for null.
 */
#include "sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sql_event_check(const sql_tmpl *t, char *errstr, size_t errstr_size)
{
    sql_buf b = {0};
    const char *end = NULL;
    cJSON *json;

    for (size_t i = 0; i < t->piece_cnt; i++)
        sql_buf_put(&b, t->pieces[i].lit ? t->pieces[i].lit : "null",
                    t->pieces[i].lit ? t->pieces[i].len : 4);
    if (b.oom) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    /* the length with its NUL: cJSON looks for it after the value */
    json = b.p ? cJSON_ParseWithLengthOpts(b.p, b.len + 1, &end, 1) : NULL;
    if (!json)
        snprintf(errstr, errstr_size,
                 "not a JSON text with its placeholders where values go (with each one null it "
                 "reads \"%.60s\", which is not JSON near byte %zu)",
                 b.p ? b.p : "", b.p && end ? (size_t)(end - b.p) : 0);
    cJSON_Delete(json);
    free(b.p);
    return json ? 0 : -1;
}

/* The meta placeholder ph (${@key}, ...) into b, as text or JSON. */
static void sql_render_meta(const sql_ph *ph, const dedupd_msg *msg, const char *event_id, int json,
                            sql_buf *b)
{
    char num[24], *tmp;
    const char *s = ph->meta == SQL_META_KEY        ? msg->biz_key
                    : ph->meta == SQL_META_TOPIC    ? msg->topic
                    : ph->meta == SQL_META_EVENT_ID ? event_id
                                                    : NULL;

    if (!s) { /* partition, offset: numbers, the same as text and JSON */
        snprintf(num, sizeof(num), "%lld",
                 ph->meta == SQL_META_PARTITION ? (long long)msg->partition
                                                : (long long)msg->offset);
        sql_buf_put(b, num, strlen(num));
    } else if (!json) {
        sql_buf_put(b, s, strlen(s));
    } else if ((tmp = malloc(6 * strlen(s) + 2))) {
        sql_buf_put(b, tmp, sql_json_escape(s, strlen(s), tmp));
        free(tmp);
    } else {
        b->oom = 1;
    }
}

/* Placeholder ph of template t (a path) into b; -1 with err when the
 * message cannot give it. */
static int sql_render_path(const sql_state *st, const sql_tmpl *t, const sql_ph *ph,
                           const dedupd_msg *msg, sql_buf *b, char *err, size_t err_size)
{
    int json = t->json || ph->json;
    dedupd_value v;

    if (st->host->path_value(st->host, msg, ph->path, &v, err, err_size) != 0) return -1;
    if (v.type == DEDUPD_VALUE_MISSING) {
        if (!ph->optional) return -1; /* err says why */
        if (json) sql_buf_put(b, "null", 4);
        return 0;
    }
    if (json) return sql_json_value(&v, b) ? (snprintf(err, err_size, "out of memory"), -1) : 0;
    if (v.type == DEDUPD_VALUE_NULL && ph->optional) return 0;
    if (v.type == DEDUPD_VALUE_STRING || v.type == DEDUPD_VALUE_NUMBER ||
        v.type == DEDUPD_VALUE_TRUE || v.type == DEDUPD_VALUE_FALSE) {
        sql_buf_put(b, v.text, v.len);
        return 0;
    }
    snprintf(err, err_size, "field %.*s is %s: ${json:%.*s} writes its JSON text", (int)ph->len,
             t->src + ph->at,
             v.type == DEDUPD_VALUE_NULL    ? "null"
             : v.type == DEDUPD_VALUE_ARRAY ? "an array"
                                            : "an object",
             (int)ph->len, t->src + ph->at);
    return -1;
}

/* Template t for msg into b (NUL-terminated); 0 or -1 with err. */
static int sql_render(const sql_state *st, const sql_tmpl *t, const dedupd_msg *msg,
                      const char *event_id, sql_buf *b, char *err, size_t err_size)
{
    for (size_t i = 0; i < t->piece_cnt; i++) {
        const sql_piece *pc = &t->pieces[i];
        if (pc->lit)
            sql_buf_put(b, pc->lit, pc->len);
        else if (t->ph[pc->ph].meta)
            sql_render_meta(&t->ph[pc->ph], msg, event_id, t->json || t->ph[pc->ph].json, b);
        else if (sql_render_path(st, t, &t->ph[pc->ph], msg, b, err, err_size))
            return -1;
    }
    sql_buf_put(b, "", 0);
    if (b->oom) snprintf(err, err_size, "out of memory");
    return b->oom ? -1 : 0;
}

/* Whether t reads ${@event_id}. */
static int sql_uses_event_id(const sql_tmpl *t)
{
    for (size_t k = 0; k < t->ph_cnt; k++)
        if (t->ph[k].meta == SQL_META_EVENT_ID) return 1;
    return 0;
}

/* One event of msg: rendered, then emitted. */
static dedupd_status sql_event_emit(const sql_state *st, const sql_event *ev, size_t i, MYSQL *db,
                                    const dedupd_msg *msg, dedupd_result *res)
{
    const dedupd_host *h = st->host;
    char id[DEDUPD_EVENT_ID_SIZE] = "", err[DEDUPD_ERROR_SIZE] = "";
    sql_buf topic = {0}, key = {0}, value = {0};
    dedupd_status rc = DEDUPD_REJECT;

    if ((sql_uses_event_id(&ev->key) || sql_uses_event_id(&ev->value)) &&
        h->event_id(h, msg, id, sizeof(id)) != 0) {
        snprintf(err, sizeof(err), "no event id here (is outbox.enabled on?)");
    } else if (!sql_render(st, &ev->topic, msg, id, &topic, err, sizeof(err)) &&
               (!ev->has_key || !sql_render(st, &ev->key, msg, id, &key, err, sizeof(err))) &&
               (!ev->has_value || !sql_render(st, &ev->value, msg, id, &value, err, sizeof(err)))) {
        if (h->emit(h, db, msg, topic.p, key.p, key.len, value.p ? value.p : msg->payload,
                    value.p ? value.len : msg->payload_len, NULL, 0, err, sizeof(err)) == 0)
            rc = DEDUPD_OK;
        else if (mysql_errno(db)) /* the outbox's insert failed: its error is on db */
            rc = DEDUPD_RETRY;
    }
    if (rc != DEDUPD_OK) snprintf(res->error, sizeof(res->error), "event %zu: %s", i + 1, err);
    free(topic.p);
    free(key.p);
    free(value.p);
    return rc;
}

dedupd_status sql_events_emit(const sql_state *st, MYSQL *db, const dedupd_msg *msg,
                              dedupd_result *res)
{
    dedupd_status rc = DEDUPD_OK;

    for (size_t i = 0; rc == DEDUPD_OK && i < st->event_cnt; i++)
        rc = sql_event_emit(st, &st->events[i], i, db, msg, res);
    return rc;
}
