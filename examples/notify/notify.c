/*
 * Example handler in external mode: "send" a notification through a service
 * outside dedupd's database.
 *
 * The service here is a stand-in: another MariaDB connection, opened by the
 * handler with its own settings, to an outbox table (notify_outbox). Like a
 * remote API it is reached outside dedupd's transaction, so nothing dedupd
 * rolls back takes a send back. What makes a send happen once is the
 * protocol of external mode (include/dedupd/handler.h) and what this
 * handler does with the two values it passes downstream:
 *
 *  - the business key and the token (msg->fence) travel with every send:
 *    notify_outbox is keyed by both, so the same claim sending twice (a
 *    retry) is one row, and a send by another claim shows as a second row;
 *  - the service fences by token: notify_fence keeps the largest token it
 *    has seen per key, and a send with a smaller one is refused. A worker
 *    whose claim was taken over while its call was on its way can then no
 *    longer send;
 *  - reconcile() asks the service: it records the asking token first (so
 *    an older send still on its way is refused from now on), then answers
 *    DONE when the outbox holds a send for the key, NOT_DONE when not, and
 *    UNKNOWN when the service cannot be reached;
 *  - finish() writes notify_log in dedupd's finishing transaction: a local
 *    record of the send, exactly once per key with the applied mark. From
 *    the compensation scan it gets no payload (recipient NULL).
 *
 * Payload: {"id": ..., "to": "...", "text": "..."} ("to" and "text"
 * optional strings). Key template, e.g. "n:${id}".
 *
 * Config (handler.config): database (required), and socket or host/port,
 * user, password_env: the connection to the service.
 *
 * Hooks for tests and demos (environment):
 *   NOTIFY_CRASH_AFTER_ACT=N  _exit(9) right after the Nth successful send
 *                             of the process, before dedupd can finish it
 *   NOTIFY_ACT_SLEEP_MS=MS    sleep after each send (a slow reply)
 *   NOTIFY_UNKNOWN_PREFIX=P   reconcile() answers UNKNOWN for keys starting
 *                             with P (a service that cannot tell)
 * Built a second time as notify_noreconcile.so (NOTIFY_NO_RECONCILE): the
 * same handler without reconcile(), so a takeover sends again.
 */
#include "dedupd/handler.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOTIFY_POOL_MAX 64
#define NOTIFY_SQL_MAX 2048

typedef struct notify_state {
    char *host, *socket, *user, *password, *database;
    int port;
    long crash_after;     /* NOTIFY_CRASH_AFTER_ACT */
    long sleep_ms;        /* NOTIFY_ACT_SLEEP_MS */
    char *unknown_prefix; /* NOTIFY_UNKNOWN_PREFIX */
    atomic_long sends;
    pthread_mutex_t mu; /* guards the pool: act() and reconcile() run on several threads */
    MYSQL *pool[NOTIFY_POOL_MAX];
    int pooled;
} notify_state;

/* ---- configuration ---- */

static char *notify_conf_str(const config_setting_t *conf, const char *name, const char *def)
{
    const char *v = NULL;

    if (!conf || !config_setting_lookup_string(conf, name, &v)) v = def;
    return v ? strdup(v) : NULL;
}

static void notify_fini(void *state)
{
    notify_state *st = state;

    if (!st) return;
    for (int i = 0; i < st->pooled; i++)
        mysql_close(st->pool[i]);
    free(st->host);
    free(st->socket);
    free(st->user);
    free(st->password);
    free(st->database);
    free(st->unknown_prefix);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static int notify_init(void **statep, const config_setting_t *conf, char *err, size_t errlen)
{
    notify_state *st = calloc(1, sizeof(*st));
    const char *env, *pw_env = NULL;

    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&st->mu, NULL);
    st->host = notify_conf_str(conf, "host", "127.0.0.1");
    st->socket = notify_conf_str(conf, "socket", NULL);
    st->user = notify_conf_str(conf, "user", "notify");
    st->database = notify_conf_str(conf, "database", NULL);
    if (!conf || !config_setting_lookup_int(conf, "port", &st->port)) st->port = 3306;
    if (conf) config_setting_lookup_string(conf, "password_env", &pw_env);
    st->password = strdup(pw_env && getenv(pw_env) ? getenv(pw_env) : "");
    st->crash_after = (env = getenv("NOTIFY_CRASH_AFTER_ACT")) ? atol(env) : 0;
    st->sleep_ms = (env = getenv("NOTIFY_ACT_SLEEP_MS")) ? atol(env) : 0;
    env = getenv("NOTIFY_UNKNOWN_PREFIX");
    st->unknown_prefix = env && *env ? strdup(env) : NULL;
    if (!st->database || !st->host || !st->user || !st->password) {
        snprintf(err, errlen, "%s",
                 st->database ? "out of memory"
                              : "handler.config.database "
                                "is required");
        notify_fini(st);
        return -1;
    }
    *statep = st;
    return 0;
}

/* ---- the service's connections ---- */

static MYSQL *notify_conn_get(notify_state *st, char *err, size_t errlen)
{
    unsigned int timeout = 5;
    MYSQL *c = NULL;

    pthread_mutex_lock(&st->mu);
    if (st->pooled > 0) c = st->pool[--st->pooled];
    pthread_mutex_unlock(&st->mu);
    if (c) return c;
    if (!(c = mysql_init(NULL))) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    if (!mysql_real_connect(c, st->socket ? NULL : st->host, st->user, st->password, st->database,
                            (unsigned int)st->port, st->socket, 0)) {
        snprintf(err, errlen, "cannot reach the notification store: %s", mysql_error(c));
        mysql_close(c);
        return NULL;
    }
    return c;
}

/* Back to the pool, or closed after an error (it may be broken). */
static void notify_conn_put(notify_state *st, MYSQL *c, int ok)
{
    if (!c) return;
    pthread_mutex_lock(&st->mu);
    if (ok && st->pooled < NOTIFY_POOL_MAX) {
        st->pool[st->pooled++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&st->mu);
    if (c) mysql_close(c);
}

/* Lower-case hex of s (a key: NUL-terminated, at most 255 bytes). */
static void notify_hex(const char *s, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        *out++ = digits[*p >> 4];
        *out++ = digits[*p & 15];
    }
    *out = '\0';
}

/* Runs sql; on failure writes the error and returns -1. */
static int notify_exec(MYSQL *c, const char *sql, char *err, size_t errlen)
{
    if (mysql_query(c, sql) == 0) return 0;
    snprintf(err, errlen, "notification store: %s (%u)", mysql_error(c), mysql_errno(c));
    return -1;
}

/* The largest token the service has seen for the key, after raising it to
 * at least fence, in the open transaction (the row stays locked). */
static int notify_fence_raise(MYSQL *c, const char *hex, int64_t fence, long long *seen, char *err,
                              size_t errlen)
{
    char sql[NOTIFY_SQL_MAX];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql),
             "INSERT INTO notify_fence (biz_key, fence) VALUES (X'%s', %lld)"
             " ON DUPLICATE KEY UPDATE fence = GREATEST(fence, VALUES(fence))",
             hex, (long long)fence);
    if (notify_exec(c, sql, err, errlen)) return -1;
    snprintf(sql, sizeof(sql), "SELECT fence FROM notify_fence WHERE biz_key = X'%s'", hex);
    if (notify_exec(c, sql, err, errlen) || !(res = mysql_store_result(c))) return -1;
    row = mysql_fetch_row(res);
    *seen = row && row[0] ? atoll(row[0]) : fence;
    mysql_free_result(res);
    return 0;
}

/* ---- the handler ---- */

static const char *notify_field(const cJSON *json, const char *name)
{
    const cJSON *v = json ? cJSON_GetObjectItemCaseSensitive(json, name) : NULL;

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A string as an SQL literal, or NULL. */
static void notify_quote(MYSQL *c, const char *s, char *out, size_t out_size)
{
    size_t n;

    if (!s || out_size < 8 || strlen(s) > (out_size - 3) / 2) {
        snprintf(out, out_size, "NULL");
        return;
    }
    out[0] = '\'';
    n = mysql_real_escape_string(c, out + 1, s, (unsigned long)strlen(s));
    out[n + 1] = '\'';
    out[n + 2] = '\0';
}

/* The send: the service takes it unless a newer claim's token was seen.
 * *refused: the service answered no (the connection is fine). */
static dedupd_status notify_send(MYSQL *c, const dedupd_msg *msg, dedupd_result *res, int *refused)
{
    char hex[2 * 255 + 1], to[300], text[900], sql[NOTIFY_SQL_MAX];
    long long seen = 0;

    notify_hex(msg->biz_key, hex);
    notify_quote(c, notify_field(msg->json, "to"), to, sizeof(to));
    notify_quote(c, notify_field(msg->json, "text"), text, sizeof(text));
    if (notify_exec(c, "START TRANSACTION", res->error, sizeof(res->error)) ||
        notify_fence_raise(c, hex, msg->fence, &seen, res->error, sizeof(res->error)))
        return DEDUPD_RETRY;
    if (seen > msg->fence) {
        *refused = notify_exec(c, "ROLLBACK", res->error, sizeof(res->error)) == 0;
        snprintf(res->error, sizeof(res->error),
                 "refused by the notification store: token %lld is older than %lld",
                 (long long)msg->fence, seen);
        return DEDUPD_RETRY;
    }
    snprintf(sql, sizeof(sql),
             "INSERT INTO notify_outbox (biz_key, fence, recipient, body) VALUES"
             " (X'%s', %lld, %s, %s) ON DUPLICATE KEY UPDATE fence = fence",
             hex, (long long)msg->fence, to, text);
    if (notify_exec(c, sql, res->error, sizeof(res->error)) ||
        notify_exec(c, "COMMIT", res->error, sizeof(res->error)))
        return DEDUPD_RETRY;
    return DEDUPD_OK;
}

static dedupd_status notify_act(void *state, const dedupd_msg *msg, dedupd_result *res)
{
    notify_state *st = state;
    char resp[96];
    MYSQL *c = notify_conn_get(st, res->error, sizeof(res->error));
    int refused = 0;
    dedupd_status rc;

    if (!c) return DEDUPD_RETRY;
    rc = notify_send(c, msg, res, &refused);
    notify_conn_put(st, c, rc == DEDUPD_OK || refused);
    if (rc != DEDUPD_OK) return rc;
    if (st->sleep_ms > 0) {
        struct timespec ts = {st->sleep_ms / 1000, (st->sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (st->crash_after > 0 && atomic_fetch_add(&st->sends, 1) + 1 == st->crash_after)
        _exit(9); /* the test hook: sent, and dedupd will never hear of it */
    snprintf(resp, sizeof(resp), "{\"sent\":true,\"fence\":%lld}", (long long)msg->fence);
    res->response = strdup(resp);
    return DEDUPD_OK;
}

#ifndef NOTIFY_NO_RECONCILE
static dedupd_outcome notify_reconcile(void *state, const char *biz_key, int64_t fence,
                                       dedupd_result *res)
{
    notify_state *st = state;
    char hex[2 * 255 + 1], sql[NOTIFY_SQL_MAX], resp[128];
    long long seen = 0, sent = -1;
    MYSQL_RES *r = NULL;
    MYSQL_ROW row;
    MYSQL *c;

    if (st->unknown_prefix &&
        strncmp(biz_key, st->unknown_prefix, strlen(st->unknown_prefix)) == 0) {
        snprintf(res->error, sizeof(res->error), "the notification store cannot tell (test hook)");
        return DEDUPD_UNKNOWN;
    }
    if (!(c = notify_conn_get(st, res->error, sizeof(res->error)))) return DEDUPD_UNKNOWN;
    notify_hex(biz_key, hex);
    snprintf(sql, sizeof(sql),
             "SELECT fence FROM notify_outbox WHERE biz_key = X'%s' ORDER BY fence LIMIT 1", hex);
    if (notify_exec(c, "START TRANSACTION", res->error, sizeof(res->error)) ||
        notify_fence_raise(c, hex, fence, &seen, res->error, sizeof(res->error)) ||
        notify_exec(c, sql, res->error, sizeof(res->error)) || !(r = mysql_store_result(c))) {
        notify_conn_put(st, c, 0);
        return DEDUPD_UNKNOWN;
    }
    if ((row = mysql_fetch_row(r)) && row[0]) sent = atoll(row[0]);
    mysql_free_result(r);
    if (notify_exec(c, "COMMIT", res->error, sizeof(res->error))) {
        notify_conn_put(st, c, 0);
        return DEDUPD_UNKNOWN;
    }
    notify_conn_put(st, c, 1);
    if (sent < 0) return DEDUPD_NOT_DONE;
    snprintf(resp, sizeof(resp), "{\"sent\":true,\"fence\":%lld,\"reconciled\":true}", sent);
    res->response = strdup(resp);
    return DEDUPD_DONE;
}
#endif

/* The local record, in dedupd's finishing transaction on db. */
static dedupd_status notify_finish(void *state, MYSQL *db, const dedupd_msg *msg,
                                   dedupd_result *res)
{
    char hex[2 * 255 + 1], to[300], sql[NOTIFY_SQL_MAX];

    (void)state;
    notify_hex(msg->biz_key, hex);
    notify_quote(db, notify_field(msg->json, "to"), to, sizeof(to)); /* no json from the scan */
    snprintf(sql, sizeof(sql),
             "INSERT INTO notify_log (biz_key, fence, recipient) VALUES (X'%s', %lld, %s)", hex,
             (long long)msg->fence, to);
    if (mysql_query(db, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "notify_log: %s (%u)", mysql_error(db),
                 mysql_errno(db));
        return DEDUPD_RETRY; /* the server's error stays on db for dedupd */
    }
    return DEDUPD_OK;
}

static int notify_migrate(void *state, MYSQL *db, char *err, size_t errlen)
{
    static const char *const sql[] = {
        "CREATE TABLE IF NOT EXISTS notify_outbox ("
        " biz_key VARBINARY(255) NOT NULL, fence BIGINT NOT NULL,"
        " recipient VARCHAR(255) NULL, body TEXT NULL,"
        " sent_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
        " PRIMARY KEY (biz_key, fence)) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS notify_fence ("
        " biz_key VARBINARY(255) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS notify_log ("
        " biz_key VARBINARY(255) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL,"
        " recipient VARCHAR(255) NULL,"
        " logged_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++)
        if (mysql_query(db, sql[i]) != 0) {
            snprintf(err, errlen, "creating the notify tables: %s", mysql_error(db));
            return -1;
        }
    return 0;
}

static const dedupd_handler notify_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
#ifdef NOTIFY_NO_RECONCILE
    .name = "notify_noreconcile",
#else
    .name = "notify",
    .reconcile = notify_reconcile,
#endif
    .init = notify_init,
    .migrate = notify_migrate,
    .fini = notify_fini,
    .mode = DEDUPD_MODE_EXTERNAL,
    .act = notify_act,
    .finish = notify_finish,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &notify_handler;
}
