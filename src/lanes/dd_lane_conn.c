/*
 * One lane's connection and what its executors share (see
 * dd_lane_conn.h). The handlers' state for a connection follows it:
 * conn_fini before the old one closes, conn_init on the new one. Both
 * executors that run messages (the batch transaction and external mode's
 * steps) reconnect through here, as the connection and every route's state
 * on it are shared, and build what a handler sees of a message here.
 */
#include "dd_lane_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dd_common.h"
#include "dd_hash.h"

void dd_lane_conn_init(dd_lane_conn_t *conn, dd_lane_env_t *env, int idx, int shard)
{
    memset(conn, 0, sizeof(*conn));
    conn->env = env;
    conn->idx = idx;
    conn->shard = shard;
    conn->seed = (unsigned int)(time(NULL) ^ (idx * 7919));
}

/* Before the connection goes away: each handler frees its state for it,
 * in the reverse order of their conn_init. */
static void dd_lane_conn_handlers_close(dd_lane_conn_t *conn)
{
    const dd_routes_t *routes = conn->env->routes;

    for (int r = routes->cnt; r-- > 0;) {
        if (!conn->hconn[r].open) continue;
        dd_handler_conn_fini(routes->route[r].h, dd_db_mysql(conn->db), conn->hconn[r].state);
        conn->hconn[r].state = NULL;
        conn->hconn[r].open = 0;
    }
    conn->ready = 0;
}

/* Every route's handler's state for the current connection (conn_init, in
 * the routes' order). When one fails, those made are given back. */
static int dd_lane_conn_handlers_open(dd_lane_conn_t *conn, char *errstr, size_t errstr_size)
{
    const dd_routes_t *routes = conn->env->routes;
    int rc = DD_OK;

    for (int r = 0; !rc && r < routes->cnt; r++) {
        rc = dd_handler_conn_init(routes->route[r].h, dd_db_mysql(conn->db), &conn->hconn[r].state,
                                  errstr, errstr_size);
        conn->hconn[r].open = rc == DD_OK;
    }
    if (rc) dd_lane_conn_handlers_close(conn);
    conn->ready = rc == DD_OK;
    return rc;
}

int dd_lane_conn_open(dd_lane_conn_t *conn, char *errstr, size_t errstr_size)
{
    const dd_lane_env_t *env = conn->env;
    int rc = dd_db_new_shard(&conn->db, env->conf, conn->shard, errstr, errstr_size);

    if (!rc)
        rc = dd_claim_require(conn->db, &env->route[env->need_route].copts, errstr, errstr_size);
    if (!rc) rc = dd_lane_conn_handlers_open(conn, errstr, errstr_size);
    return rc;
}

void dd_lane_conn_release(dd_lane_conn_t *conn)
{
    if (conn->env) dd_lane_conn_handlers_close(conn);
    dd_db_destroy(conn->db);
    conn->db = NULL;
    dd_buf_release(&conn->sql);
    free(conn->hdrs);
    conn->hdrs = NULL;
    conn->hdr_cap = 0;
}

int dd_lane_conn_reconnect(dd_lane_conn_t *conn, char *errstr, size_t errstr_size)
{
    int rc;

    if (conn->ready && dd_db_mysql(conn->db) && mysql_ping(dd_db_mysql(conn->db)) == 0)
        return DD_OK;
    atomic_store(&conn->down, 1);
    dd_lane_conn_handlers_close(conn);
    rc = dd_db_reconnect(conn->db, errstr, errstr_size);
    if (!rc) rc = dd_lane_conn_handlers_open(conn, errstr, errstr_size);
    if (!rc) {
        atomic_store(&conn->down, 0);
        dd_log(DD_LOG_INFO, "Lane %d: reconnected to the database.", conn->idx);
    }
    return rc;
}

void dd_lane_conn_set_state(dd_lane_conn_t *conn, dd_lane_state_t state)
{
    if (atomic_load_explicit(&conn->state, memory_order_relaxed) == (int)state) return;
    atomic_store(&conn->state_since_ms, dd_now_ms());
    atomic_store(&conn->state, (int)state);
}

int64_t dd_lane_conn_backoff_ms(dd_lane_conn_t *conn, int attempt)
{
    const dd_conf_t *conf = conn->env->conf;
    int64_t ms = conf->retry.backoff_initial_ms;

    for (int i = 1; i < attempt && ms < conf->retry.backoff_max_ms; i++)
        ms *= 2;
    if (ms > conf->retry.backoff_max_ms) ms = conf->retry.backoff_max_ms;
    /* +-20% jitter so lanes and workers do not retry in lock step */
    return ms * (80 + rand_r(&conn->seed) % 41) / 100;
}

int dd_lane_conn_stopping(const dd_lane_conn_t *conn)
{
    return atomic_load(&conn->env->stop_hard) || atomic_load(&conn->env->report.fatal);
}

/* ---- what a handler sees of a message ---- */

size_t dd_lane_conn_header_cnt(rd_kafka_message_t *rkm)
{
    rd_kafka_headers_t *hdrs;

    if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    return rd_kafka_header_cnt(hdrs);
}

int dd_lane_conn_headers_reserve(dd_lane_conn_t *conn, size_t n, char *errstr, size_t errstr_size)
{
    dedupd_header *p;

    if (n <= conn->hdr_cap) return DD_OK;
    if (!(p = realloc(conn->hdrs, n * sizeof(*p)))) {
        dd_errstr_set(errstr, errstr_size, "out of memory for %zu message headers", n);
        return DD_ERR_NOMEM;
    }
    conn->hdrs = p;
    conn->hdr_cap = n;
    return DD_OK;
}

/* No bytes are copied: the headers point into librdkafka's copy. */
void dd_lane_conn_msg_fill(dd_lane_conn_t *conn, const dd_item_t *item, size_t *at, dedupd_msg *msg)
{
    rd_kafka_message_t *rkm = item->rkm;
    rd_kafka_headers_t *hdrs;
    size_t n = 0, text_len;

    *msg = (dedupd_msg){
        .topic = rd_kafka_topic_name(rkm->rkt),
        .partition = rkm->partition,
        .offset = rkm->offset,
        .timestamp_ms = rd_kafka_message_timestamp(rkm, NULL),
        .key = rkm->key,
        .key_len = rkm->key_len,
        .payload = dd_item_text(item, &text_len),
        .payload_len = text_len,
        .json = item->json,
        .biz_key = item->key,
        .fence = item->fence,
        .shard = item->shard,
        .doc = (const dedupd_doc *)(const void *)item->doc,
    };
    if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    for (size_t i = 0; *at + n < conn->hdr_cap; i++) {
        dedupd_header *hd = &conn->hdrs[*at + n];
        const void *value;
        if (rd_kafka_header_get_all(hdrs, i, &hd->name, &value, &hd->value_len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        hd->value = value;
        n++;
    }
    msg->headers = n ? &conn->hdrs[*at] : NULL;
    msg->header_cnt = n;
    *at += n;
}

/* The consumer hashes as it parses; what it could not hash is tried again
 * here, from the payload (the consumer's document is gone). A request hash
 * fails only for want of memory or on a libcrypto error, never for the
 * input, which parsed already: stop rather than compare a hash that was
 * not computed. */
int dd_lane_conn_hash(dd_lane_conn_t *conn, dd_item_t *item)
{
    const char *text;
    size_t len;

    if (item->hashed) return 0;
    text = dd_item_text(item, &len);
    if (dd_hash_payload(conn->env->routes->route[item->route].hspec, text, len, item->hash) !=
        DD_OK) {
        dd_lane_conn_fatal(conn,
                           "cannot compute a request hash (out of memory or a libcrypto error)");
        return -1;
    }
    item->hashed = 1;
    return 0;
}

/* ---- the log and the report ---- */

void dd_lane_conn_dlq(dd_item_t *item, dd_reason_t reason, const char *fmt, const char *arg)
{
    item->outcome = DD_OUT_DLQ;
    item->reason = reason;
    snprintf(item->error, sizeof(item->error), fmt, arg);
}

/* 1 when the handler's statement was refused a privilege: the server's
 * error left on the connection, or the handler's words for it. */
static int dd_lane_conn_denied(unsigned int err, const char *text)
{
    return err == 1044 || err == 1045 || err == 1142 || err == 1143 || err == 1227 || err == 1370 ||
           strstr(text, "command denied") || strstr(text, "Access denied");
}

/* A retry is routine (info) unless the handler was refused a privilege:
 * then no retry will succeed until someone grants it, so it is a warning,
 * at most DD_LANE_DENIED_LINES per lane per minute (the rest counted). */
#define DD_LANE_DENIED_LINES 5
void dd_lane_conn_log_retry(dd_lane_conn_t *conn, const dd_item_t *item, unsigned int herr,
                            const char *error)
{
    const char *topic = rd_kafka_topic_name(item->rkm->rkt);
    uint64_t suppressed = 0;

    if (!dd_lane_conn_denied(herr, error)) {
        dd_log_msg(DD_LOG_INFO, topic, item->rkm->partition, item->rkm->offset, item->key,
                   "Handler asked to retry (attempt %d): %s", item->attempts, error);
        return;
    }
    conn->denied_limit.max = DD_LANE_DENIED_LINES;
    conn->denied_limit.window_ms = 60000;
    if (!dd_log_limit_take(&conn->denied_limit, dd_now_ms(), &suppressed)) return;
    dd_log_msg(DD_LOG_WARN, topic, item->rkm->partition, item->rkm->offset, item->key,
               "Handler asked to retry (attempt %d) after the database refused it a privilege: "
               "%s. It is retried until the privilege is granted (or retry.max_attempts); "
               "declare the handler's grants in handler.grants so that dedupd check and run "
               "tell it at start (docs/HANDLERS.md, \"Privileges a handler needs\").%s",
               item->attempts, error, suppressed ? " More such lines were left out." : "");
    if (suppressed)
        dd_log(DD_LOG_WARN,
               "%llu more privilege refusal(s) of the handler were not logged (at "
               "most %d lines per lane per minute).",
               (unsigned long long)suppressed, DD_LANE_DENIED_LINES);
}

void dd_lane_conn_post(dd_lane_conn_t *conn, dd_item_t **items, size_t n, const dd_stats_t *d)
{
    dd_lane_report_post(&conn->env->report, items, n, d);
}

void dd_lane_conn_fatal(dd_lane_conn_t *conn, const char *err)
{
    dd_lane_report_fatal(&conn->env->report, conn->idx, conn->shard, err);
}
