/*
 * Test handler of ABI 3, using what it added (test 38): init_host and the
 * host API, per-connection state (conn_init/conn_fini), handle_conn and
 * handle_batch_conn, the messages' Kafka headers, host->log.
 *
 *   th_v3_effect  per business key: n applications, the path ("single" or
 *                 "batch"), the "trace-id" header's value and the message's
 *                 header count, and whether the conn_state passed with the
 *                 call was the one made for that connection (conn_ok)
 *   th_v3_conn    a row per conn_init (written with autocommit, outside any
 *                 transaction): the connection's id
 * A batch holding a payload with "single": true is declined, so both paths
 * run. Every conn_init, conn_fini and message is logged through host->log
 * ("th_v3 ..."), so the test can see the lines' format and fields.
 * handler.config: tag = "..." (optional), logged at init.
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct th_v3_conn {
    unsigned long id; /* CONNECTION_ID() at conn_init */
} th_v3_conn;

static int th_v3_init(void **state, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    const char *tag = "";

    if (host->version < 1 || !host->instance || !strchr(host->instance, ':') || !host->log) {
        snprintf(errstr, errstr_size, "th_v3: incomplete host API");
        return -1;
    }
    if (host->config) config_setting_lookup_string(host->config, "tag", &tag);
    host->log(host, DEDUPD_LOG_INFO, "th_v3 init instance=%s tag=%s", host->instance, tag);
    *state = (void *)host;
    return 0;
}

static int th_v3_migrate(void *state, MYSQL *db, char *errstr, size_t errstr_size)
{
    (void)state;
    if (mysql_query(db, "CREATE TABLE IF NOT EXISTS th_v3_effect (biz_key VARBINARY(255) NOT NULL"
                        " PRIMARY KEY, n INT NOT NULL, path VARCHAR(8) NOT NULL, trace"
                        " VARCHAR(64) NULL, hdr_cnt INT NOT NULL, conn_ok INT NOT NULL)"
                        " ENGINE=InnoDB") != 0 ||
        mysql_query(db, "CREATE TABLE IF NOT EXISTS th_v3_conn (id BIGINT NOT NULL AUTO_INCREMENT"
                        " PRIMARY KEY, conn_id BIGINT NOT NULL) ENGINE=InnoDB") != 0) {
        snprintf(errstr, errstr_size, "%s", mysql_error(db));
        return -1;
    }
    return 0;
}

static int th_v3_conn_init(void *state, MYSQL *db, void **conn_state, char *errstr,
                           size_t errstr_size)
{
    const dedupd_host *host = state;
    th_v3_conn *c = calloc(1, sizeof(*c));
    char sql[100];

    if (!c) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    c->id = mysql_thread_id(db);
    snprintf(sql, sizeof(sql), "INSERT INTO th_v3_conn (conn_id) VALUES (%lu)", c->id);
    if (mysql_query(db, sql) != 0) {
        snprintf(errstr, errstr_size, "%s", mysql_error(db));
        free(c);
        return -1;
    }
    host->log(host, DEDUPD_LOG_INFO, "th_v3 conn_init connection=%lu", c->id);
    *conn_state = c;
    return 0;
}

static void th_v3_conn_fini(void *state, MYSQL *db, void *conn_state)
{
    const dedupd_host *host = state;
    th_v3_conn *c = conn_state;

    (void)db;
    host->log(host, DEDUPD_LOG_INFO, "th_v3 conn_fini connection=%lu", c->id);
    free(c);
}

/* The value of header name (at most 64 bytes), or NULL. */
static const char *th_v3_header(const dedupd_msg *msg, const char *name, char *out, size_t size)
{
    for (size_t i = 0; i < msg->header_cnt; i++) {
        const dedupd_header *h = &msg->headers[i];
        if (strcmp(h->name, name) != 0 || !h->value || h->value_len >= size) continue;
        memcpy(out, h->value, h->value_len);
        out[h->value_len] = '\0';
        return out;
    }
    return NULL;
}

static dedupd_status th_v3_apply(const dedupd_host *host, th_v3_conn *c, MYSQL *db,
                                 const dedupd_msg *msg, const char *path, dedupd_result *res)
{
    char key[2 * 255 + 1], trace[65], trace_sql[2 * 64 + 3] = "NULL", sql[1000];

    mysql_real_escape_string(db, key, msg->biz_key, (unsigned long)strlen(msg->biz_key));
    if (th_v3_header(msg, "trace-id", trace, sizeof(trace))) {
        trace_sql[0] = '\'';
        strcpy(trace_sql + 1 +
                   mysql_real_escape_string(db, trace_sql + 1, trace, (unsigned long)strlen(trace)),
               "'");
    }
    snprintf(sql, sizeof(sql),
             "INSERT INTO th_v3_effect (biz_key, n, path, trace, hdr_cnt, conn_ok)"
             " VALUES ('%s', 1, '%s', %s, %zu, %d) ON DUPLICATE KEY UPDATE n = n + 1",
             key, path, trace_sql, msg->header_cnt, c && c->id == mysql_thread_id(db));
    if (mysql_query(db, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", mysql_error(db));
        return DEDUPD_RETRY;
    }
    host->log(host, DEDUPD_LOG_INFO, "th_v3 applied path=%s trace=%s", path, trace_sql);
    return DEDUPD_OK;
}

static dedupd_status th_v3_handle(void *state, void *conn_state, MYSQL *db, const dedupd_msg *msg,
                                  dedupd_result *res)
{
    return th_v3_apply(state, conn_state, db, msg, "single", res);
}

static dedupd_status th_v3_handle_batch(void *state, void *conn_state, MYSQL *db,
                                        const dedupd_msg *const *msgs, size_t n, dedupd_result *res)
{
    for (size_t i = 0; i < n; i++) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msgs[i]->json, "single"))) {
            snprintf(res[0].error, sizeof(res[0].error), "th_v3: declines a single");
            return DEDUPD_REJECT;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (th_v3_apply(state, conn_state, db, msgs[i], "batch", &res[0]) != DEDUPD_OK)
            return DEDUPD_RETRY;
    return DEDUPD_OK;
}

static const dedupd_handler th_v3 = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_v3",
    .init_host = th_v3_init,
    .migrate = th_v3_migrate,
    .conn_init = th_v3_conn_init,
    .conn_fini = th_v3_conn_fini,
    .handle_conn = th_v3_handle,
    .handle_batch_conn = th_v3_handle_batch,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_v3;
}
