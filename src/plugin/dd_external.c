/*
 * External mode's statements (see dd_external.h). Built as text with hex
 * literals for binary values and Connector/C escaping for text, as the
 * claim statements of local mode are. An UPDATE that decides ownership is
 * judged by the rows it *matched* (mysql_info), not by affected rows: a
 * renewal that lands within the microsecond of the previous one changes
 * nothing and must still count as held.
 */
#include "dd_external.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "dd_claim.h"
#include "dd_common.h"
#include "dd_db_txn.h"
#include "dd_handler.h"

void dd_external_opts_init(dd_external_opts_t *opts, const dd_conf_t *conf,
                           const dd_conf_route_t *route, const char *owner)
{
    opts->table = route->dedup.table;
    opts->owner = owner;
    opts->lease_ms = conf->external.lease_ms;
    opts->ttl_s = route->dedup.ttl_s;
    opts->retry_failed = route->dedup.retry_failed;
}

static int dd_external_fail(MYSQL *mysql, const char *what, char *errstr, size_t errstr_size)
{
    unsigned int err = mysql ? mysql_errno(mysql) : 2006;

    dd_errstr_set(errstr, errstr_size, "%s: %u: %s", what, err,
                  mysql ? mysql_error(mysql) : "not connected");
    return dd_db_classify(err ? err : 2013);
}

/* Sends sql; a result set, if any, is left for the caller. */
static int dd_external_send(dd_db_t *db, const dd_buf_t *sql, const char *what, char *errstr,
                            size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);

    if (sql->oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory building the %s statement", what);
        return DD_ERR_NOMEM;
    }
    if (!mysql || mysql_real_query(mysql, sql->p, (unsigned long)sql->len) != 0)
        return dd_external_fail(mysql, what, errstr, errstr_size);
    return DD_OK;
}

/* Sends an UPDATE; *matched: the rows its WHERE found ("Rows matched: N"
 * of mysql_info, which counts rows left unchanged too). */
static int dd_external_update(dd_db_t *db, const dd_buf_t *sql, const char *what, int *matched,
                              char *errstr, size_t errstr_size)
{
    const char *info;
    unsigned long n = 0;
    int rc = dd_external_send(db, sql, what, errstr, errstr_size);

    if (rc) return rc;
    info = mysql_info(dd_db_mysql(db));
    if (!info || sscanf(info, "Rows matched: %lu", &n) != 1)
        n = (unsigned long)mysql_affected_rows(dd_db_mysql(db));
    *matched = n > 0;
    return DD_OK;
}

/* Sends a SELECT and stores its result in *res. */
static int dd_external_select(dd_db_t *db, const dd_buf_t *sql, const char *what, MYSQL_RES **res,
                              char *errstr, size_t errstr_size)
{
    int rc = dd_external_send(db, sql, what, errstr, errstr_size);

    if (rc) return rc;
    if (!(*res = mysql_store_result(dd_db_mysql(db))))
        return dd_external_fail(dd_db_mysql(db), what, errstr, errstr_size);
    return DD_OK;
}

/* " WHERE biz_key = X'..' AND fence = N AND status = 0" */
static void dd_external_where(dd_buf_t *sql, const char *key, size_t key_len, int64_t fence)
{
    dd_buf_puts(sql, " WHERE biz_key = ");
    dd_db_hex(sql, key, key_len);
    dd_buf_printf(sql, " AND fence = %lld AND status = %d", (long long)fence, DD_ROW_PROCESSING);
}

/* ", lease_until = NOW(6) + INTERVAL <lease> MICROSECOND" and the owner */
static void dd_external_lease(dd_buf_t *sql, MYSQL *mysql, const dd_external_opts_t *opts)
{
    dd_buf_puts(sql, "owner = ");
    dd_db_quote(sql, mysql, opts->owner, strlen(opts->owner));
    dd_buf_printf(sql, ", lease_until = NOW(6) + INTERVAL %lld MICROSECOND",
                  (long long)opts->lease_ms * 1000);
}

/* ---- the claim ---- */

static int dd_external_insert(dd_db_t *db, const dd_external_opts_t *opts,
                              const dd_external_claim_t *c, dd_buf_t *sql, char *errstr,
                              size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);

    dd_buf_reset(sql);
    dd_buf_printf(sql,
                  "INSERT INTO `%s` (biz_key, request_hash, status, attempts, owner, lease_until,"
                  " fence, topic, kpartition, koffset, expire_at) VALUES (",
                  opts->table);
    dd_db_hex(sql, c->key, c->key_len);
    dd_buf_puts(sql, ",");
    dd_db_hex(sql, c->hash, DD_HASH_LEN);
    dd_buf_printf(sql, ",%d,0,", DD_ROW_PROCESSING);
    dd_db_quote(sql, mysql, opts->owner, strlen(opts->owner));
    dd_buf_printf(sql, ",NOW(6) + INTERVAL %lld MICROSECOND,1,", (long long)opts->lease_ms * 1000);
    dd_db_quote(sql, mysql, c->topic, strlen(c->topic));
    dd_buf_printf(sql, ",%d,%lld,NOW(6) + INTERVAL %lld SECOND)", (int)c->partition,
                  (long long)c->offset, (long long)opts->ttl_s);
    return dd_external_send(db, sql, "external claim insert", errstr, errstr_size);
}

/* The row is locked by this transaction: raise its token, take the lease,
 * and make it this message's (as a new claim would). */
static int dd_external_take(dd_db_t *db, const dd_external_opts_t *opts,
                            const dd_external_claim_t *c, dd_buf_t *sql, char *errstr,
                            size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);

    dd_buf_reset(sql);
    dd_buf_printf(sql, "UPDATE `%s` SET status = %d, fence = fence + 1, ", opts->table,
                  DD_ROW_PROCESSING);
    dd_external_lease(sql, mysql, opts);
    dd_buf_puts(sql, ", topic = ");
    dd_db_quote(sql, mysql, c->topic, strlen(c->topic));
    dd_buf_printf(sql,
                  ", kpartition = %d, koffset = %lld, expire_at = NOW(6) + INTERVAL %lld SECOND,"
                  " updated_at = NOW(6) WHERE biz_key = ",
                  (int)c->partition, (long long)c->offset, (long long)opts->ttl_s);
    dd_db_hex(sql, c->key, c->key_len);
    return dd_external_send(db, sql, "external takeover", errstr, errstr_size);
}

/* Decides from the locked row (request_hash, status, fence, lease over,
 * owner, error, microseconds of lease left) what the claim is, and takes
 * the row over when it may. */
static int dd_external_decide(dd_db_t *db, const dd_external_opts_t *opts, dd_external_claim_t *c,
                              MYSQL_ROW row, const unsigned long *len, dd_buf_t *sql, char *errstr,
                              size_t errstr_size)
{
    int over = !row[3] || row[3][0] == '1'; /* no lease at all counts as over */

    c->prev_status = atoi(row[1]);
    c->prev_fence = strtoll(row[2], NULL, 10);
    snprintf(c->prev_owner, sizeof(c->prev_owner), "%s", row[4] ? row[4] : "");
    snprintf(c->row_error, sizeof(c->row_error), "%s", row[5] ? row[5] : "");
    if (len[0] != DD_HASH_LEN || memcmp(row[0], c->hash, DD_HASH_LEN) != 0) {
        c->result = DD_EXTERNAL_CONFLICT;
    } else if (c->prev_status == DD_ROW_APPLIED) {
        c->result = DD_EXTERNAL_APPLIED;
    } else if (c->prev_status == DD_ROW_FAILED && !opts->retry_failed) {
        c->result = DD_EXTERNAL_FAILED;
    } else if (c->prev_status == DD_ROW_PROCESSING && !over) {
        c->result = DD_EXTERNAL_BUSY;
        c->lease_left_s = row[6] ? strtod(row[6], NULL) / 1e6 : 0;
    } else {
        c->result = DD_EXTERNAL_OWNED;
        c->taken_over = 1;
        c->fence = c->prev_fence + 1; /* the row is locked: nobody else raises it */
        return dd_external_take(db, opts, c, sql, errstr, errstr_size);
    }
    return DD_OK;
}

/* One attempt: DD_CLAIM_RACED when another consumer inserted the key between
 * our read and our insert. */
static int dd_external_claim_once(dd_db_t *db, const dd_external_opts_t *opts,
                                  dd_external_claim_t *c, dd_buf_t *sql, char *errstr,
                                  size_t errstr_size)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    c->result = DD_EXTERNAL_BUSY;
    c->fence = c->prev_fence = 0;
    c->prev_status = -1;
    c->taken_over = 0;
    c->lease_left_s = 0;
    c->prev_owner[0] = c->row_error[0] = '\0';
    if ((rc = dd_db_txn_begin(db, errstr, errstr_size))) return rc;
    dd_buf_reset(sql);
    dd_buf_printf(sql,
                  "SELECT request_hash, status, fence, lease_until < NOW(6), owner, error,"
                  " TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_until) FROM `%s` WHERE biz_key = ",
                  opts->table);
    dd_db_hex(sql, c->key, c->key_len);
    dd_buf_puts(sql, " FOR UPDATE");
    rc = dd_external_select(db, sql, "external claim read", &res, errstr, errstr_size);
    if (!rc) rc = dd_db_txn_check(db, "external claim read", errstr, errstr_size);
    if (!rc && (row = mysql_fetch_row(res)) != NULL) {
        rc = dd_external_decide(db, opts, c, row, mysql_fetch_lengths(res), sql, errstr,
                                errstr_size);
    } else if (!rc) {
        rc = dd_external_insert(db, opts, c, sql, errstr, errstr_size);
        if (rc && mysql_errno(dd_db_mysql(db)) == ER_DUP_ENTRY) rc = DD_CLAIM_RACED;
        c->result = DD_EXTERNAL_OWNED;
        c->fence = 1;
    }
    if (res) mysql_free_result(res);
    if (!rc) rc = dd_db_txn_check(db, "external claim", errstr, errstr_size);
    if (!rc) rc = dd_db_txn_commit(db, errstr, errstr_size);
    if (rc) dd_db_txn_rollback_quiet(db);
    return rc;
}

int dd_external_claim(dd_db_t *db, const dd_external_opts_t *opts, dd_external_claim_t *c,
                      dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    int rc = DD_CLAIM_RACED;

    /* A read that finds no row locks nothing (READ COMMITTED), so two
     * consumers may both insert; the second waits for the first and then
     * fails as a duplicate, and reads the row again. */
    for (int attempt = 0; rc == DD_CLAIM_RACED && attempt < 3; attempt++)
        rc = dd_external_claim_once(db, opts, c, sql, errstr, errstr_size);
    if (rc == DD_CLAIM_RACED) rc = DD_ERR_RETRIABLE;
    return rc;
}

/* ---- owning a claim ---- */

int dd_external_lock(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                     int64_t fence, int *held, dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res = NULL;
    int rc;

    dd_buf_reset(sql);
    dd_buf_printf(sql, "SELECT 1 FROM `%s`", opts->table);
    dd_external_where(sql, key, key_len, fence);
    dd_buf_puts(sql, " FOR UPDATE");
    rc = dd_external_select(db, sql, "external finish lock", &res, errstr, errstr_size);
    if (rc) return rc;
    *held = mysql_fetch_row(res) != NULL;
    mysql_free_result(res);
    return DD_OK;
}

int dd_external_finish(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                       int64_t fence, int status, const char *response, const char *error,
                       int *held, dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);

    dd_buf_reset(sql);
    dd_buf_printf(sql, "UPDATE `%s` SET status = %d, response = ", opts->table, status);
    if (response)
        dd_db_quote(sql, mysql, response, strlen(response));
    else
        dd_buf_puts(sql, "NULL");
    dd_buf_puts(sql, ", error = ");
    if (error)
        dd_db_quote(sql, mysql, error, strnlen(error, 1000));
    else
        dd_buf_puts(sql, "NULL");
    dd_buf_puts(sql, ", attempts = attempts + 1, updated_at = NOW(6)");
    dd_external_where(sql, key, key_len, fence);
    return dd_external_update(db, sql, "external finish", held, errstr, errstr_size);
}

int dd_external_renew(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                      int64_t fence, int *held, dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    dd_buf_reset(sql);
    dd_buf_printf(sql, "UPDATE `%s` SET lease_until = NOW(6) + INTERVAL %lld MICROSECOND",
                  opts->table, (long long)opts->lease_ms * 1000);
    dd_external_where(sql, key, key_len, fence);
    return dd_external_update(db, sql, "lease renewal", held, errstr, errstr_size);
}

int dd_external_expire(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                       int64_t fence, int *held, dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    dd_buf_reset(sql);
    dd_buf_printf(sql, "UPDATE `%s` SET lease_until = NOW(6), updated_at = NOW(6)", opts->table);
    dd_external_where(sql, key, key_len, fence);
    return dd_external_update(db, sql, "lease release", held, errstr, errstr_size);
}

int dd_external_peek(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                     int64_t *fence, int *status, char *owner, size_t owner_size, dd_buf_t *sql,
                     char *errstr, size_t errstr_size)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    *fence = -1;
    *status = -1;
    if (owner_size) owner[0] = '\0';
    dd_buf_reset(sql);
    dd_buf_printf(sql, "SELECT fence, status, owner FROM `%s` WHERE biz_key = ", opts->table);
    dd_db_hex(sql, key, key_len);
    rc = dd_external_select(db, sql, "external peek", &res, errstr, errstr_size);
    if (rc) return rc;
    if ((row = mysql_fetch_row(res))) {
        *fence = strtoll(row[0], NULL, 10);
        *status = atoi(row[1]);
        snprintf(owner, owner_size, "%s", row[2] ? row[2] : "");
    }
    mysql_free_result(res);
    return DD_OK;
}

/* ---- the compensation scan ---- */

int dd_external_stuck_count(dd_db_t *db, const dd_external_opts_t *opts, int64_t *count,
                            double *oldest_s, char *errstr, size_t errstr_size)
{
    dd_buf_t sql = {0};
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    *count = 0;
    *oldest_s = 0;
    dd_buf_printf(&sql,
                  "SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(lease_until),"
                  " NOW(6)), 0) FROM `%s` WHERE status = %d AND lease_until < NOW(6)",
                  opts->table, DD_ROW_PROCESSING);
    rc = dd_external_select(db, &sql, "stuck rows count", &res, errstr, errstr_size);
    if (!rc && (row = mysql_fetch_row(res))) {
        *count = strtoll(row[0], NULL, 10);
        *oldest_s = strtod(row[1], NULL) / 1e6;
    }
    if (res) mysql_free_result(res);
    dd_buf_release(&sql);
    return rc;
}

int dd_external_stuck(dd_db_t *db, const dd_external_opts_t *opts, int64_t after_ms,
                      dd_external_row_t *rows, size_t max, size_t *n, dd_buf_t *sql, char *errstr,
                      size_t errstr_size)
{
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    int rc;

    *n = 0;
    dd_buf_reset(sql);
    dd_buf_printf(sql,
                  "SELECT biz_key, fence, TIMESTAMPDIFF(MICROSECOND, lease_until, NOW(6)), owner,"
                  " topic, kpartition, koffset FROM `%s` WHERE status = %d"
                  " AND lease_until < NOW(6) - INTERVAL %lld MICROSECOND"
                  " ORDER BY lease_until LIMIT %zu",
                  opts->table, DD_ROW_PROCESSING, (long long)after_ms * 1000, max);
    rc = dd_external_select(db, sql, "stuck rows", &res, errstr, errstr_size);
    while (!rc && *n < max && (row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_external_row_t *r = &rows[(*n)++];

        r->key_len = len[0] < sizeof(r->key) ? len[0] : sizeof(r->key) - 1;
        memcpy(r->key, row[0], r->key_len);
        r->key[r->key_len] = '\0';
        r->fence = strtoll(row[1], NULL, 10);
        r->past_s = row[2] ? strtod(row[2], NULL) / 1e6 : 0;
        snprintf(r->owner, sizeof(r->owner), "%s", row[3] ? row[3] : "");
        snprintf(r->topic, sizeof(r->topic), "%s", row[4] ? row[4] : "");
        r->partition = (int32_t)atoi(row[5]);
        r->offset = strtoll(row[6], NULL, 10);
    }
    if (res) mysql_free_result(res);
    return rc;
}

int dd_external_takeover(dd_db_t *db, const dd_external_opts_t *opts, const char *key,
                         size_t key_len, int64_t fence, int64_t after_ms, int *taken,
                         int64_t *new_fence, dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    dd_buf_reset(sql);
    dd_buf_printf(sql, "UPDATE `%s` SET fence = fence + 1, ", opts->table);
    dd_external_lease(sql, dd_db_mysql(db), opts);
    dd_buf_puts(sql, ", updated_at = NOW(6)");
    dd_external_where(sql, key, key_len, fence);
    dd_buf_printf(sql, " AND lease_until < NOW(6) - INTERVAL %lld MICROSECOND",
                  (long long)after_ms * 1000);
    *new_fence = fence + 1;
    return dd_external_update(db, sql, "scan takeover", taken, errstr, errstr_size);
}

/* ---- the finish with the handler's finish() ---- */

/* What a call of finish() left on the connection: a handler that ended
 * the transaction is a bug (fatal); a retriable database error (deadlock,
 * lost connection) is tried again; else 0. */
static int dd_external_finish_check(dd_db_t *db, dd_handler_t *h, const dedupd_msg *msg, int broken,
                                    dedupd_status st, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    unsigned int e = mysql_errno(mysql);
    char where[300];

    if ((broken || st != DEDUPD_OK) && e && dd_db_classify(e) == DD_ERR_RETRIABLE) {
        dd_errstr_set(errstr, errstr_size, "%u: %s (inside the handler's finish())", e,
                      mysql_error(mysql));
        return DD_ERR_RETRIABLE;
    }
    if (!broken) return DD_OK;
    snprintf(where, sizeof(where), "in finish() of key %.255s (token %lld)", msg->biz_key,
             (long long)msg->fence);
    return dd_db_txn_handler_or_cluster(
        db, dd_handler_txn_lost_error(h, where, errstr, errstr_size), errstr, errstr_size);
}

int dd_external_finish_txn(dd_db_t *db, const dd_external_opts_t *opts, dd_handler_t *h,
                           const dedupd_msg *msg, dedupd_result *res, int *held, dedupd_status *st,
                           dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    const char *where = "in the transaction of finish()";
    size_t key_len = strlen(msg->biz_key);
    int broken = 0, rc;

    *st = DEDUPD_OK;
    *held = 0;
    rc = dd_handler_txn_begin(mysql, errstr, errstr_size);
    if (!rc)
        rc = dd_external_lock(db, opts, msg->biz_key, key_len, msg->fence, held, sql, errstr,
                              errstr_size);
    if (!rc) rc = dd_db_txn_check(db, "external finish lock", errstr, errstr_size);
    if (!rc && *held) {
        *st = dd_handler_finish(h, mysql, msg, res, &broken);
        rc = dd_external_finish_check(db, h, msg, broken, *st, errstr, errstr_size);
    }
    if (!rc && *held && *st == DEDUPD_OK)
        rc = dd_external_finish(db, opts, msg->biz_key, key_len, msg->fence, DD_ROW_APPLIED,
                                res->response, NULL, held, sql, errstr, errstr_size);
    if (!rc && *held && *st == DEDUPD_OK)
        rc = dd_db_txn_check(db, "external finish", errstr, errstr_size);
    if (!rc && *held && *st == DEDUPD_OK)
        return dd_db_txn_handler_or_cluster(
            db, dd_handler_txn_end(h, mysql, 1, where, errstr, errstr_size), errstr, errstr_size);
    if (rc) {
        dd_db_txn_rollback_quiet(db);
        return rc;
    }
    /* A deliberate rollback after finish() ran checks the guard as COMMIT
     * would: the handler may have committed on its own. */
    rc = dd_db_txn_handler_or_cluster(
        db, dd_handler_txn_end(h, mysql, 0, where, errstr, errstr_size), errstr, errstr_size);
    if (rc && rc != DD_ERR_FATAL) dd_db_txn_rollback_quiet(db);
    return rc;
}
