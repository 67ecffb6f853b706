/*
 * Claim statements (see dd_claim.h for the protocol). Statements are built
 * as text with hex literals for binary values and Connector/C escaping for
 * text, into a buffer reused across batches.
 */
#include "dd_claim.h"

#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"

/* Keys per statement: keeps statements well under max_allowed_packet. */
#define DD_CLAIM_CHUNK 1000

int dd_claim_cmp(const dd_claim_t *a, const dd_claim_t *b)
{
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->key, b->key, n);

    if (c)
        return c;
    return (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

static int dd_claim_qcmp(const void *a, const void *b)
{
    return dd_claim_cmp(*(dd_claim_t *const *)a, *(dd_claim_t *const *)b);
}

/* Equal keys keep their array order (claims point into one array in
 * offset order), so the first copy of a key leads its group. */
static int dd_claim_qcmp_stable(const void *a, const void *b)
{
    const dd_claim_t *ca = *(dd_claim_t *const *)a, *cb = *(dd_claim_t *const *)b;
    int c = dd_claim_cmp(ca, cb);

    return c ? c : (ca > cb) - (ca < cb);
}

void dd_claim_sort(dd_claim_t **claims, size_t n)
{
    qsort(claims, n, sizeof(*claims), dd_claim_qcmp_stable);
}

static int dd_claim_fail(dd_db_t *db, const char *what, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    unsigned int err = mysql ? mysql_errno(mysql) : 2006;

    dd_errstr_set(errstr, errstr_size, "%s: %u: %s", what, err,
                  mysql ? mysql_error(mysql) : "not connected");
    return dd_db_classify(err);
}

static dd_claim_t *dd_claim_find(dd_claim_t **claims, size_t n, const char *key, size_t len)
{
    dd_claim_t probe = {.key = key, .key_len = len}, *pp = &probe, **found;

    found = bsearch(&pp, claims, n, sizeof(*claims), dd_claim_qcmp);
    return found ? *found : NULL;
}

/* Sends the statement built in sql; what names it in errors. */
static int dd_claim_send(dd_db_t *db, const dd_buf_t *sql, const char *what, char *errstr,
                         size_t errstr_size)
{
    if (sql->oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory building the %s statement", what);
        return DD_ERR_FATAL;
    }
    if (mysql_real_query(dd_db_mysql(db), sql->p, (unsigned long)sql->len) != 0)
        return dd_claim_fail(db, what, errstr, errstr_size);
    return DD_OK;
}

/* What the claim found, from rows of (biz_key, request_hash, status,
 * claim_token = token, error). require_all: every key was just inserted or
 * locked, so a missing row means the table changed under us (dropped,
 * truncated): replay the batch. */
static int dd_claim_read(MYSQL_RES *res, dd_claim_t **claims, size_t n, int require_all,
                         char *errstr, size_t errstr_size)
{
    MYSQL_ROW row;
    size_t seen = 0;

    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_claim_t *c = dd_claim_find(claims, n, row[0], len[0]);
        if (!c || c->row_status >= 0)
            continue;
        seen++;
        c->mine = row[3] && row[3][0] == '1';
        c->row_status = atoi(row[2]);
        if (len[1] == DD_HASH_LEN)
            memcpy(c->row_hash, row[1], DD_HASH_LEN);
        snprintf(c->row_error, sizeof(c->row_error), "%s", row[4] ? row[4] : "");
    }
    if (require_all && seen != n) {
        dd_errstr_set(errstr, errstr_size, "claim read-back found %zu of %zu keys", seen, n);
        return DD_ERR_RETRIABLE;
    }
    return DD_OK;
}

/* Sends sql and reads the rows it returns into claims (dd_claim_read). */
static int dd_claim_query_rows(dd_db_t *db, const dd_buf_t *sql, const char *what,
                               dd_claim_t **claims, size_t n, int require_all, char *errstr,
                               size_t errstr_size)
{
    MYSQL_RES *res;
    int rc = dd_claim_send(db, sql, what, errstr, errstr_size);

    if (rc)
        return rc;
    if (!(res = mysql_store_result(dd_db_mysql(db))))
        return dd_claim_fail(db, what, errstr, errstr_size);
    rc = dd_claim_read(res, claims, n, require_all, errstr, errstr_size);
    mysql_free_result(res);
    return rc;
}

/* The columns dd_claim_read() takes, for RETURNING or the read-back.
 * Without a token (the pre-check) no row is ours. */
static void dd_claim_columns(dd_buf_t *sql, const unsigned char *token)
{
    if (!token) {
        dd_buf_puts(sql, "biz_key, request_hash, status, 0, error");
        return;
    }
    dd_buf_puts(sql, "biz_key, request_hash, status, claim_token = ");
    dd_buf_hex(sql, token, DD_CLAIM_TOKEN_LEN);
    dd_buf_puts(sql, ", error");
}

/* Reads the rows of the keys: after the claim when the server has no
 * RETURNING (every key must be there), or before it as the pre-check
 * (token NULL: a plain read, absent keys are fine). */
static int dd_claim_readback(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims,
                             size_t n, const unsigned char *token, dd_buf_t *sql, char *errstr,
                             size_t errstr_size)
{
    dd_buf_reset(sql);
    dd_buf_puts(sql, "SELECT ");
    dd_claim_columns(sql, token);
    dd_buf_printf(sql, " FROM `%s` WHERE biz_key IN (", opts->table);
    for (size_t i = 0; i < n; i++) {
        if (i)
            dd_buf_puts(sql, ",");
        dd_buf_hex(sql, claims[i]->key, claims[i]->key_len);
    }
    dd_buf_puts(sql, ")");
    return dd_claim_query_rows(db, sql, "claim read-back", claims, n, token != NULL, errstr,
                               errstr_size);
}

/* Columns a taken-over row gets from the new claim. */
static const char *const dd_claim_takeover[] = {"owner",      "lease_until", "topic",
                                                "kpartition", "koffset",     "expire_at"};

static int dd_claim_insert(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims,
                           size_t n, const unsigned char *token, dd_buf_t *sql, char *errstr,
                           size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    int rc;

    dd_buf_reset(sql);
    dd_buf_printf(sql,
                  "INSERT INTO `%s` (biz_key, request_hash, status, attempts, claim_token, owner,"
                  " lease_until, topic, kpartition, koffset, expire_at) VALUES ",
                  opts->table);
    for (size_t i = 0; i < n; i++) {
        dd_claim_t *c = claims[i];
        dd_buf_puts(sql, i ? ",(" : "(");
        dd_buf_hex(sql, c->key, c->key_len);
        dd_buf_puts(sql, ",");
        dd_buf_hex(sql, c->hash, DD_HASH_LEN);
        dd_buf_puts(sql, ",0,0,");
        dd_buf_hex(sql, token, DD_CLAIM_TOKEN_LEN);
        dd_buf_puts(sql, ",");
        dd_buf_quote(sql, mysql, opts->owner, strlen(opts->owner));
        dd_buf_printf(sql, ",NOW(6) + INTERVAL %d SECOND,", opts->lease_s);
        dd_buf_quote(sql, mysql, c->topic, strlen(c->topic));
        dd_buf_printf(sql, ",%d,%lld,NOW(6) + INTERVAL %lld SECOND)", (int)c->partition,
                      (long long)c->offset, (long long)opts->ttl_s);
    }
    /* Existing rows keep their token (a no-op that still locks them) unless
     * they may be taken over: a failed row with the same request hash when
     * retry_failed is on, or a processing row whose lease ran out. Later
     * assignments see the new claim_token, so they follow it: a taken-over
     * row gets this claim's lease, message and expiry, as a new one does
     * (the finish then only writes the outcome). */
    dd_buf_printf(sql,
                  " ON DUPLICATE KEY UPDATE claim_token = IF(request_hash = VALUES(request_hash)"
                  " AND ((status = 2 AND %d) OR (status = 0 AND lease_until < NOW(6))),"
                  " VALUES(claim_token), claim_token)",
                  opts->retry_failed ? 1 : 0);
    for (size_t i = 0; i < sizeof(dd_claim_takeover) / sizeof(dd_claim_takeover[0]); i++)
        dd_buf_printf(sql, ", %s = IF(claim_token = VALUES(claim_token), VALUES(%s), %s)",
                      dd_claim_takeover[i], dd_claim_takeover[i], dd_claim_takeover[i]);
    /* RETURNING gives every row as the statement left it, inserted or
     * not, so the claim needs no second statement to read them back. */
    if (dd_db_has_returning(db)) {
        dd_buf_puts(sql, " RETURNING ");
        dd_claim_columns(sql, token);
        return dd_claim_query_rows(db, sql, "claim insert", claims, n, 1, errstr, errstr_size);
    }
    rc = dd_claim_send(db, sql, "claim insert", errstr, errstr_size);
    return rc ? rc : dd_claim_readback(db, opts, claims, n, token, sql, errstr, errstr_size);
}

/* The pre-check: a plain read of every key. A key already applied is
 * settled without a lock, because an applied row never changes (only the
 * purge deletes it, once its ttl is over): the copy is a duplicate, or a
 * conflict if its hash differs. The others go on to the claim, in
 * scratch (still in key order). Returns 0 or an error class; *m: how many
 * go on. */
static int dd_claim_precheck(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims,
                             size_t n, dd_claim_t **scratch, size_t *m, dd_buf_t *sql,
                             char *errstr, size_t errstr_size)
{
    int rc;

    for (size_t off = 0; off < n; off += DD_CLAIM_CHUNK) {
        size_t cnt = n - off < DD_CLAIM_CHUNK ? n - off : DD_CLAIM_CHUNK;
        rc = dd_claim_readback(db, opts, claims + off, cnt, NULL, sql, errstr, errstr_size);
        if (rc)
            return rc;
    }
    *m = 0;
    for (size_t i = 0; i < n; i++) {
        if (claims[i]->row_status == DD_ROW_APPLIED)
            continue;
        claims[i]->row_status = -1; /* decided again by the claim */
        scratch[(*m)++] = claims[i];
    }
    return DD_OK;
}

int dd_claim_acquire(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                     const unsigned char token[DD_CLAIM_TOKEN_LEN], dd_claim_t **precheck,
                     dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    int rc;

    for (size_t i = 0; i < n; i++) {
        claims[i]->mine = 0;
        claims[i]->row_status = -1;
    }
    if (precheck) {
        rc = dd_claim_precheck(db, opts, claims, n, precheck, &n, sql, errstr, errstr_size);
        if (rc)
            return rc;
        claims = precheck;
    }
    for (size_t off = 0; off < n; off += DD_CLAIM_CHUNK) {
        size_t cnt = n - off < DD_CLAIM_CHUNK ? n - off : DD_CLAIM_CHUNK;
        rc = dd_claim_insert(db, opts, claims + off, cnt, token, sql, errstr, errstr_size);
        if (rc)
            return rc;
    }
    return DD_OK;
}

static void dd_claim_finish_row(dd_buf_t *sql, MYSQL *mysql, const dd_claim_t *c)
{
    dd_buf_puts(sql, "(");
    dd_buf_hex(sql, c->key, c->key_len);
    dd_buf_puts(sql, ",");
    dd_buf_hex(sql, c->hash, DD_HASH_LEN);
    dd_buf_printf(sql, ",%d,", c->result_status);
    if (c->response)
        dd_buf_quote(sql, mysql, c->response, strlen(c->response));
    else
        dd_buf_puts(sql, "NULL");
    dd_buf_puts(sql, ",");
    if (c->error)
        dd_buf_quote(sql, mysql, c->error, strnlen(c->error, 1000));
    else
        dd_buf_puts(sql, "NULL");
    dd_buf_puts(sql, ",");
    dd_buf_quote(sql, mysql, c->topic, strlen(c->topic));
    dd_buf_printf(sql, ",%d,%lld,NOW(6))", (int)c->partition, (long long)c->offset);
}

/* Applied without a response: nothing per row but the key. */
static int dd_claim_plain(const dd_claim_t *c)
{
    return c->result_status == DD_ROW_APPLIED && !c->response && !c->error;
}

/* Rows with a response or an error: one INSERT ... ON DUPLICATE KEY UPDATE
 * carrying each row's values. Every row exists and is locked by this
 * transaction, so this only updates; the insert half needs the NOT NULL
 * columns all the same. Message and expiry were set by the claim. */
static void dd_claim_finish_rich(dd_buf_t *sql, MYSQL *mysql, const dd_claim_opts_t *opts,
                                 dd_claim_t **claims, size_t n)
{
    size_t k = 0;

    dd_buf_printf(sql,
                  "INSERT INTO `%s` (biz_key, request_hash, status, response, error, topic,"
                  " kpartition, koffset, expire_at) VALUES ",
                  opts->table);
    for (size_t i = 0; i < n; i++) {
        if (dd_claim_plain(claims[i]))
            continue;
        if (k++)
            dd_buf_puts(sql, ",");
        dd_claim_finish_row(sql, mysql, claims[i]);
    }
    dd_buf_puts(sql, " ON DUPLICATE KEY UPDATE status = VALUES(status),"
                     " response = VALUES(response), error = VALUES(error),"
                     " attempts = attempts + 1, updated_at = NOW(6)");
}

/* Applied rows without a response: one UPDATE of constants, by key. The
 * row keeps its size (status, attempts and updated_at are fixed-width), so
 * InnoDB updates it in place. */
static void dd_claim_finish_plain(dd_buf_t *sql, const dd_claim_opts_t *opts,
                                  dd_claim_t **claims, size_t n)
{
    size_t k = 0;

    dd_buf_printf(sql,
                  "UPDATE `%s` SET status = %d, attempts = attempts + 1, updated_at = NOW(6)"
                  " WHERE biz_key IN (",
                  opts->table, DD_ROW_APPLIED);
    for (size_t i = 0; i < n; i++) {
        if (!dd_claim_plain(claims[i]))
            continue;
        if (k++)
            dd_buf_puts(sql, ",");
        dd_buf_hex(sql, claims[i]->key, claims[i]->key_len);
    }
    dd_buf_puts(sql, ")");
}

/* owner, lease_until and claim_token stay as the claim set them: status
 * alone says whether a row is still being processed, and leaving them keeps
 * the row's size, so the update is in place. owner then tells the operator
 * which instance applied the key. */
int dd_claim_finish(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                    dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (size_t off = 0; !rc && off < n; off += DD_CLAIM_CHUNK) {
        size_t cnt = n - off < DD_CLAIM_CHUNK ? n - off : DD_CLAIM_CHUNK, plain = 0;
        for (size_t i = 0; i < cnt; i++)
            plain += dd_claim_plain(claims[off + i]);
        if (plain > 0) {
            dd_buf_reset(sql);
            dd_claim_finish_plain(sql, opts, claims + off, cnt);
            rc = dd_claim_send(db, sql, "claim finish", errstr, errstr_size);
        }
        if (!rc && plain < cnt) {
            dd_buf_reset(sql);
            dd_claim_finish_rich(sql, dd_db_mysql(db), opts, claims + off, cnt);
            rc = dd_claim_send(db, sql, "claim finish", errstr, errstr_size);
        }
    }
    return rc;
}
