/*
 * Example handler: coupons granted, then redeemed once.
 *
 * Two events, each with its own id (dedup.key = "coupon:${code}:${event_id}"),
 * routed by code (dedup.lane_key = "${code}": one coupon's events keep
 * their order):
 *   {"event_id": "e1", "event": "granted", "code": "C1", "user_id": "u1",
 *    "amount_cents": 500}    inserts the coupon, NEW;
 *   {"event_id": "e2", "event": "redeemed", "code": "C1", "order_no": "o1"}
 *                            moves it NEW -> REDEEMED for that order, never back.
 *
 * The redemption is the update pattern of a one-way state machine:
 *     UPDATE coupon SET status = 'REDEEMED', order_no = ? WHERE code = ? AND status = 'NEW'
 * changes 1 row (redeemed now) or 0 (not NEW: redeemed by another order
 * before, or not granted yet). dedupd makes each event apply once; the
 * WHERE makes a second order's redemption of the same coupon a no-op
 * instead of an overwrite. On 0 rows a read tells which: a coupon not
 * granted yet is RETRY (its grant may still be on its way), one redeemed
 * already is applied as refused, with the reason in the response
 * snapshot and in dedupd's log (host->log).
 *
 * The three statements are prepared once per connection, in conn_init,
 * and closed in conn_fini: dedupd calls them for every connection it opens
 * for handler work, again after each reconnect.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <dedupd/handler.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUPON_TEXT_MAX 64 /* bytes; VARCHAR(64) columns */

enum { COUPON_GRANT, COUPON_REDEEM, COUPON_STATUS, COUPON_STMTS };

static const char *const coupon_sql[COUPON_STMTS] = {
    "INSERT INTO coupon (code, user_id, amount_cents, status) VALUES (?, ?, ?, 'NEW')",
    "UPDATE coupon SET status = 'REDEEMED', order_no = ? WHERE code = ? AND status = 'NEW'",
    "SELECT status, COALESCE(order_no, '') FROM coupon WHERE code = ?",
};

typedef struct coupon_conn {
    MYSQL_STMT *stmt[COUPON_STMTS];
} coupon_conn;

static int coupon_init(void **state, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    (void)errstr, (void)errstr_size;
    *state = (void *)host; /* the only state it needs: for host->log */
    return 0;
}

static int coupon_migrate(void *state, MYSQL *db, char *errstr, size_t errstr_size)
{
    (void)state;
    if (mysql_query(db, "CREATE TABLE IF NOT EXISTS coupon ("
                        " code VARCHAR(64) NOT NULL PRIMARY KEY,"
                        " user_id VARCHAR(64) NOT NULL,"
                        " amount_cents BIGINT NOT NULL,"
                        " status VARCHAR(16) NOT NULL,"
                        " order_no VARCHAR(64) NULL"
                        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin") != 0) {
        snprintf(errstr, errstr_size, "create table coupon: %s", mysql_error(db));
        return -1;
    }
    return 0;
}

static void coupon_conn_fini(void *state, MYSQL *db, void *conn_state)
{
    coupon_conn *c = conn_state;

    (void)state, (void)db;
    for (int i = 0; c && i < COUPON_STMTS; i++)
        if (c->stmt[i]) mysql_stmt_close(c->stmt[i]);
    free(c);
}

static int coupon_conn_init(void *state, MYSQL *db, void **conn_state, char *errstr,
                            size_t errstr_size)
{
    coupon_conn *c = calloc(1, sizeof(*c));

    if (!c) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    for (int i = 0; i < COUPON_STMTS; i++) {
        if (!(c->stmt[i] = mysql_stmt_init(db)) ||
            mysql_stmt_prepare(c->stmt[i], coupon_sql[i], (unsigned long)strlen(coupon_sql[i]))) {
            snprintf(errstr, errstr_size, "prepare \"%s\": %s", coupon_sql[i],
                     c->stmt[i] ? mysql_stmt_error(c->stmt[i]) : "out of memory");
            coupon_conn_fini(state, db, c);
            return -1;
        }
    }
    *conn_state = c;
    return 0;
}

/* A string field of the payload; NULL (with the reason in res) if it is not
 * one of 1 to COUPON_TEXT_MAX bytes. */
static const char *coupon_text(const dedupd_msg *msg, const char *name, dedupd_result *res)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(msg->json, name);
    size_t n = cJSON_IsString(f) ? strlen(f->valuestring) : 0;

    if (n > 0 && n <= COUPON_TEXT_MAX) return f->valuestring;
    snprintf(res->error, sizeof(res->error), "%s must be a string of 1 to %d bytes", name,
             COUPON_TEXT_MAX);
    return NULL;
}

static MYSQL_BIND coupon_str(const char *s, unsigned long *len)
{
    *len = (unsigned long)strlen(s);
    return (MYSQL_BIND){.buffer_type = MYSQL_TYPE_STRING, .buffer = (void *)s, .length = len};
}

/* A failed statement: RETRY, its error left on db for dedupd (neither the
 * statement nor its result is reset, which would clear it). */
static dedupd_status coupon_db_fail(MYSQL_STMT *stmt, dedupd_result *res)
{
    snprintf(res->error, sizeof(res->error), "%s (%u)", mysql_stmt_error(stmt),
             mysql_stmt_errno(stmt));
    return DEDUPD_RETRY;
}

static dedupd_status coupon_grant(coupon_conn *c, const dedupd_msg *msg, dedupd_result *res)
{
    const cJSON *amount = cJSON_GetObjectItemCaseSensitive(msg->json, "amount_cents");
    const char *code = coupon_text(msg, "code", res),
               *user = code ? coupon_text(msg, "user_id", res) : NULL;
    long long cents = cJSON_IsNumber(amount) ? (long long)amount->valuedouble : 0;
    unsigned long len[2];
    MYSQL_BIND b[3];

    if (!user) return DEDUPD_REJECT;
    if (cents <= 0 || cents > 100000000 || (double)cents != amount->valuedouble) {
        snprintf(res->error, sizeof(res->error), "amount_cents must be a whole number of cents");
        return DEDUPD_REJECT;
    }
    b[0] = coupon_str(code, &len[0]);
    b[1] = coupon_str(user, &len[1]);
    b[2] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_LONGLONG, .buffer = &cents};
    if (mysql_stmt_bind_param(c->stmt[COUPON_GRANT], b) ||
        mysql_stmt_execute(c->stmt[COUPON_GRANT]))
        return coupon_db_fail(c->stmt[COUPON_GRANT], res);
    return DEDUPD_OK;
}

static dedupd_status coupon_redeem(const dedupd_host *host, coupon_conn *c, const dedupd_msg *msg,
                                   dedupd_result *res)
{
    const char *code = coupon_text(msg, "code", res),
               *order = code ? coupon_text(msg, "order_no", res) : NULL;
    MYSQL_STMT *up = c->stmt[COUPON_REDEEM], *rd = c->stmt[COUPON_STATUS];
    char status[17] = "", by[COUPON_TEXT_MAX + 1] = "";
    unsigned long len[2], status_len = 0, by_len = 0;
    MYSQL_BIND b[2], out[2];
    int rc;

    if (!order) return DEDUPD_REJECT;
    b[0] = coupon_str(order, &len[0]);
    b[1] = coupon_str(code, &len[1]);
    if (mysql_stmt_bind_param(up, b) || mysql_stmt_execute(up)) return coupon_db_fail(up, res);
    if (mysql_stmt_affected_rows(up) == 1) {
        res->response = strdup("{\"redeemed\":true}");
        return DEDUPD_OK;
    }
    /* 0 rows: not NEW. Not granted yet, or redeemed already? */
    out[0] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_STRING,
                          .buffer = status,
                          .buffer_length = sizeof(status) - 1,
                          .length = &status_len};
    out[1] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_STRING,
                          .buffer = by,
                          .buffer_length = sizeof(by) - 1,
                          .length = &by_len};
    if (mysql_stmt_bind_param(rd, &b[1]) || mysql_stmt_execute(rd) ||
        mysql_stmt_bind_result(rd, out))
        return coupon_db_fail(rd, res);
    rc = mysql_stmt_fetch(rd);
    if (rc == 1) return coupon_db_fail(rd, res);
    mysql_stmt_free_result(rd);
    if (rc == MYSQL_NO_DATA) {
        snprintf(res->error, sizeof(res->error), "coupon %s is not granted yet", code);
        return DEDUPD_RETRY;
    }
    host->log(host, DEDUPD_LOG_INFO, "coupon %s is %s (order %s): not redeemed for order %s", code,
              status, by, order);
    res->response = strdup("{\"redeemed\":false}");
    return DEDUPD_OK;
}

static dedupd_status coupon_handle(void *state, void *conn_state, MYSQL *db, const dedupd_msg *msg,
                                   dedupd_result *res)
{
    const cJSON *event = cJSON_GetObjectItemCaseSensitive(msg->json, "event");

    (void)db;
    if (cJSON_IsString(event) && strcmp(event->valuestring, "granted") == 0)
        return coupon_grant(conn_state, msg, res);
    if (cJSON_IsString(event) && strcmp(event->valuestring, "redeemed") == 0)
        return coupon_redeem(state, conn_state, msg, res);
    snprintf(res->error, sizeof(res->error), "event must be \"granted\" or \"redeemed\"");
    return DEDUPD_REJECT;
}

static const dedupd_handler coupon = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "coupon",
    .init_host = coupon_init,
    .migrate = coupon_migrate,
    .conn_init = coupon_conn_init,
    .conn_fini = coupon_conn_fini,
    .handle_conn = coupon_handle,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &coupon;
}
