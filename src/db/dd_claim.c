/*
 * Claim statements (see dd_claim.h for the protocol). Statements are built
 * as text with hex literals for binary values and Connector/C escaping for
 * text, into a buffer reused across batches.
 */
#include "dd_claim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_db_txn.h"
#include "dd_log.h"
#include "dd_text.h"

/* Most rows per statement (the finish's bulk arrays hold this many).
 * Statements are also split by size, see dd_claim_chunk(). */
#define DD_CLAIM_CHUNK 1000

/* Size bounds for splitting statements: the text of a statement around
 * its rows (column lists, ON DUPLICATE KEY UPDATE, RETURNING), and what a
 * row holds besides its variable-length values (hash and token in hex,
 * numbers, quotes, NOW(6) + INTERVAL ...). Text values count twice their
 * length (escaping), binary ones twice (hex). */
#define DD_CLAIM_STMT_FIXED 2048
#define DD_CLAIM_ROW_FIXED 256
#define DD_CLAIM_ERROR_MAX 1000 /* bytes of an error kept in the row */

/* How long a processing row blocks other consumers before it may be taken
 * over (its claimer is presumed dead). */
#define DD_CLAIM_LEASE_S 300

void dd_claim_opts_init(dd_claim_opts_t *opts, const dd_conf_route_t *route, const char *owner,
                        int slot)
{
    opts->table = route->dedup.table;
    opts->ttl_s = route->dedup.ttl_s;
    opts->retry_failed = route->dedup.retry_failed;
    opts->defer = route->dedup.defer_claim;
    opts->owner = owner;
    opts->lease_s = DD_CLAIM_LEASE_S;
    opts->max_response = (size_t)route->handler.max_response_bytes;
    opts->stmt_slot = slot;
}

/* Upper bounds of one row's text, by statement. */
static size_t dd_claim_key_max(const dd_claim_opts_t *opts, const dd_claim_t *c)
{
    (void)opts;
    return 2 * c->key_len + 16;
}

static size_t dd_claim_insert_max(const dd_claim_opts_t *opts, const dd_claim_t *c)
{
    return 2 * (c->key_len + strlen(c->topic) + strlen(opts->owner)) + DD_CLAIM_ROW_FIXED;
}

static size_t dd_claim_finish_max(const dd_claim_opts_t *opts, const dd_claim_t *c)
{
    size_t resp = c->response ? strlen(c->response) : 0;
    size_t err = c->error ? strnlen(c->error, DD_CLAIM_ERROR_MAX) : 0;

    return 2 * (resp + err) + dd_claim_insert_max(opts, c);
}

/* How many of claims[0..n) one statement takes: at most DD_CLAIM_CHUNK,
 * and only as many as fit in the connection's statement size by row_max's
 * bound, but always one (dd_claim_require() made room for the largest). */
static size_t dd_claim_chunk(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims,
                             size_t n,
                             size_t (*row_max)(const dd_claim_opts_t *, const dd_claim_t *))
{
    size_t budget = dd_db_max_statement(db), used = DD_CLAIM_STMT_FIXED, i;

    for (i = 0; i < n && i < DD_CLAIM_CHUNK; i++) {
        used += row_max(opts, claims[i]);
        if (used > budget && i > 0) break;
    }
    return i;
}

int dd_claim_require(dd_db_t *db, const dd_claim_opts_t *opts, char *errstr, size_t errstr_size)
{
    /* The largest row: the longest response and error, a key, topic and
     * owner of the longest lengths the table takes. */
    size_t row =
        2 * (opts->max_response + DD_CLAIM_ERROR_MAX + 255 + 249 + 128) + DD_CLAIM_ROW_FIXED;
    char what[96];

    snprintf(what, sizeof(what), "handler.max_response_bytes (%zu)", opts->max_response);
    return dd_db_require_statement(db, DD_CLAIM_STMT_FIXED + row, what, errstr, errstr_size);
}

int dd_claim_cmp(const dd_claim_t *a, const dd_claim_t *b)
{
    if (a->group != b->group) return a->group < b->group ? -1 : 1;
    return dd_text_cmp(a->key, a->key_len, b->key, b->key_len);
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

    if (n > 0) probe.group = claims[0]->group; /* one table's claims */
    found = bsearch(&pp, claims, n, sizeof(*claims), dd_claim_qcmp);
    return found ? *found : NULL;
}

/* Sends the statement built in sql; what names it in errors. */
static int dd_claim_send(dd_db_t *db, const dd_buf_t *sql, const char *what, char *errstr,
                         size_t errstr_size)
{
    if (sql->oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory building the %s statement", what);
        return DD_ERR_NOMEM;
    }
    if (mysql_real_query(dd_db_mysql(db), sql->p, (unsigned long)sql->len) != 0)
        return dd_claim_fail(db, what, errstr, errstr_size);
    /* A statement with rows is checked once they are read. */
    if (mysql_field_count(dd_db_mysql(db)) != 0) return DD_OK;
    return dd_db_txn_check(db, what, errstr, errstr_size);
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
        if (!c || c->row_status >= 0) continue;
        seen++;
        c->mine = row[3] && row[3][0] == '1';
        c->row_status = atoi(row[2]);
        if (len[1] == DD_HASH_LEN) memcpy(c->row_hash, row[1], DD_HASH_LEN);
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

    if (rc) return rc;
    if (!(res = mysql_store_result(dd_db_mysql(db))))
        return dd_claim_fail(db, what, errstr, errstr_size);
    rc = dd_claim_read(res, claims, n, require_all, errstr, errstr_size);
    mysql_free_result(res);
    return rc ? rc : dd_db_txn_check(db, what, errstr, errstr_size);
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
    dd_db_hex(sql, token, DD_CLAIM_TOKEN_LEN);
    dd_buf_puts(sql, ", error");
}

/* Reads the rows of the keys: after the claim when the server has no
 * RETURNING (every key must be there), or before it as the pre-check
 * (token NULL: a plain read, absent keys are fine). On MariaDB the keys are
 * a table value constructor joined to the table by primary key, which
 * spares the server the range analysis an IN list of hundreds of values
 * gets. */
static void dd_claim_key_list(dd_buf_t *sql, dd_claim_t **claims, size_t n, const char *open,
                              const char *close)
{
    for (size_t i = 0; i < n; i++) {
        dd_buf_puts(sql, i ? "," : "");
        dd_buf_puts(sql, open);
        dd_db_hex(sql, claims[i]->key, claims[i]->key_len);
        dd_buf_puts(sql, close);
    }
}

static int dd_claim_readback(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims,
                             size_t n, const unsigned char *token, dd_buf_t *sql, char *errstr,
                             size_t errstr_size)
{
    dd_buf_reset(sql);
    if (dd_db_has_returning(db)) { /* MariaDB 10.5+, which has VALUES too */
        dd_buf_puts(sql, "WITH v (k) AS (VALUES ");
        dd_claim_key_list(sql, claims, n, "(", ")");
        dd_buf_puts(sql, ") SELECT ");
        dd_claim_columns(sql, token);
        dd_buf_printf(sql, " FROM v STRAIGHT_JOIN `%s` ON biz_key = v.k", opts->table);
    } else {
        dd_buf_puts(sql, "SELECT ");
        dd_claim_columns(sql, token);
        dd_buf_printf(sql, " FROM `%s` WHERE biz_key IN (", opts->table);
        dd_claim_key_list(sql, claims, n, "", "");
        dd_buf_puts(sql, ")");
    }
    return dd_claim_query_rows(db, sql, "claim read-back", claims, n, token != NULL, errstr,
                               errstr_size);
}

/* Columns a taken-over row gets from the new claim. */
static const char *const dd_claim_takeover[] = {"owner",      "lease_until", "topic",
                                                "kpartition", "koffset",     "expire_at"};

static int dd_claim_insert(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                           const unsigned char *token, dd_buf_t *sql, char *errstr,
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
        dd_db_hex(sql, c->key, c->key_len);
        dd_buf_puts(sql, ",");
        dd_db_hex(sql, c->hash, DD_HASH_LEN);
        dd_buf_puts(sql, ",0,0,");
        dd_db_hex(sql, token, DD_CLAIM_TOKEN_LEN);
        dd_buf_puts(sql, ",");
        dd_db_quote(sql, mysql, opts->owner, strlen(opts->owner));
        dd_buf_printf(sql, ",NOW(6) + INTERVAL %d SECOND,", opts->lease_s);
        dd_db_quote(sql, mysql, c->topic, strlen(c->topic));
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
 * conflict if its hash differs. With DD_CLAIM_DEFER a key the read does not
 * find is owned at once, its row left to the finish. The others go on to
 * the claim, in scratch (still in key order). Returns 0 or an error class;
 * *m: how many go on. */
static int dd_claim_precheck(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims,
                             size_t n, int flags, dd_claim_t **scratch, size_t *m, dd_buf_t *sql,
                             char *errstr, size_t errstr_size)
{
    int rc;

    for (size_t off = 0, cnt; off < n && !(flags & DD_CLAIM_BLIND); off += cnt) {
        cnt = dd_claim_chunk(db, opts, claims + off, n - off, dd_claim_key_max);
        rc = dd_claim_readback(db, opts, claims + off, cnt, NULL, sql, errstr, errstr_size);
        if (rc) return rc;
    }
    *m = 0;
    for (size_t i = 0; i < n; i++) {
        dd_claim_t *c = claims[i];
        if (c->row_status == DD_ROW_APPLIED) continue;
        if (c->row_status < 0 && (flags & DD_CLAIM_DEFER)) {
            c->mine = c->deferred = 1;
            continue;
        }
        c->row_status = -1; /* decided again by the claim */
        scratch[(*m)++] = c;
    }
    return DD_OK;
}

int dd_claim_acquire(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                     const unsigned char token[DD_CLAIM_TOKEN_LEN], int flags, dd_claim_t **scratch,
                     dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    int rc;

    for (size_t i = 0; i < n; i++) {
        claims[i]->mine = claims[i]->deferred = 0;
        claims[i]->row_status = -1;
    }
    if (flags & (DD_CLAIM_PRECHECK | DD_CLAIM_DEFER)) {
        rc = dd_claim_precheck(db, opts, claims, n, flags, scratch, &n, sql, errstr, errstr_size);
        if (rc) return rc;
        claims = scratch;
    }
    for (size_t off = 0, cnt; off < n; off += cnt) {
        cnt = dd_claim_chunk(db, opts, claims + off, n - off, dd_claim_insert_max);
        rc = dd_claim_insert(db, opts, claims + off, cnt, token, sql, errstr, errstr_size);
        if (rc) return rc;
    }
    return DD_OK;
}

/* Conflicts are rare, so their rows' times are read apart, only when one
 * happens: the claim's own statements stay as narrow as they are. */
int dd_claim_row_times(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                       dd_buf_t *sql, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t want = 0;
    int rc;

    dd_buf_reset(sql);
    dd_buf_printf(sql, "SELECT biz_key, created_at, updated_at FROM `%s` WHERE biz_key IN (",
                  opts->table);
    for (size_t i = 0; i < n; i++) {
        if (!claims[i]->want_times) continue;
        claims[i]->row_created[0] = claims[i]->row_updated[0] = '\0';
        dd_buf_puts(sql, want++ ? "," : "");
        dd_db_hex(sql, claims[i]->key, claims[i]->key_len);
    }
    dd_buf_puts(sql, ")");
    if (want == 0) return DD_OK;
    if ((rc = dd_claim_send(db, sql, "conflict row read", errstr, errstr_size))) return rc;
    if (!(res = mysql_store_result(dd_db_mysql(db))))
        return dd_claim_fail(db, "conflict row read", errstr, errstr_size);
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_claim_t *c = dd_claim_find(claims, n, row[0], len[0]);
        if (!c) continue;
        snprintf(c->row_created, sizeof(c->row_created), "%s", row[1] ? row[1] : "");
        snprintf(c->row_updated, sizeof(c->row_updated), "%s", row[2] ? row[2] : "");
    }
    mysql_free_result(res);
    return dd_db_txn_check(db, "conflict row read", errstr, errstr_size);
}

/* One row of an outcome statement. A new row (a deferred claim) also
 * carries what the claim would have set: attempts, owner and expiry. */
static void dd_claim_finish_row(dd_buf_t *sql, MYSQL *mysql, const dd_claim_opts_t *opts,
                                const dd_claim_t *c, int fresh)
{
    dd_buf_puts(sql, "(");
    dd_db_hex(sql, c->key, c->key_len);
    dd_buf_puts(sql, ",");
    dd_db_hex(sql, c->hash, DD_HASH_LEN);
    dd_buf_printf(sql, ",%d,", c->result_status);
    if (c->response)
        dd_db_quote(sql, mysql, c->response, strlen(c->response));
    else
        dd_buf_puts(sql, "NULL");
    dd_buf_puts(sql, ",");
    if (c->error)
        dd_db_quote(sql, mysql, c->error, strnlen(c->error, DD_CLAIM_ERROR_MAX));
    else
        dd_buf_puts(sql, "NULL");
    if (fresh) {
        dd_buf_puts(sql, ",1,");
        dd_db_quote(sql, mysql, opts->owner, strlen(opts->owner));
    }
    dd_buf_puts(sql, ",");
    dd_db_quote(sql, mysql, c->topic, strlen(c->topic));
    dd_buf_printf(sql, ",%d,%lld,NOW(6)", (int)c->partition, (long long)c->offset);
    if (fresh) dd_buf_printf(sql, " + INTERVAL %lld SECOND", (long long)opts->ttl_s);
    dd_buf_puts(sql, ")");
}

/* How the finish writes a key's outcome. */
typedef enum {
    DD_FINISH_PLAIN, /* claimed, applied without a response: an in-place update */
    DD_FINISH_RICH,  /* claimed, with a response or an error */
    DD_FINISH_NEW,   /* deferred: the row is inserted now */
    DD_FINISH_KINDS
} dd_finish_kind_t;

static dd_finish_kind_t dd_claim_kind(const dd_claim_t *c)
{
    if (c->deferred) return DD_FINISH_NEW;
    if (c->result_status == DD_ROW_APPLIED && !c->response && !c->error) return DD_FINISH_PLAIN;
    return DD_FINISH_RICH;
}

/* Claimed rows with a response or an error: one INSERT ... ON DUPLICATE KEY
 * UPDATE carrying each row's values. Every row exists and is locked by this
 * transaction, so this only updates; the insert half needs the NOT NULL
 * columns all the same. Message and expiry were set by the claim.
 * Deferred rows: a plain INSERT of the finished rows. */
static void dd_claim_finish_values(dd_buf_t *sql, MYSQL *mysql, const dd_claim_opts_t *opts,
                                   dd_claim_t **claims, size_t n, dd_finish_kind_t kind)
{
    int fresh = kind == DD_FINISH_NEW;
    size_t k = 0;

    dd_buf_printf(sql,
                  "INSERT INTO `%s` (biz_key, request_hash, status, response, error,%s"
                  " topic, kpartition, koffset, expire_at) VALUES ",
                  opts->table, fresh ? " attempts, owner," : "");
    for (size_t i = 0; i < n; i++) {
        if (dd_claim_kind(claims[i]) != kind) continue;
        if (k++) dd_buf_puts(sql, ",");
        dd_claim_finish_row(sql, mysql, opts, claims[i], fresh);
    }
    if (!fresh)
        dd_buf_puts(sql, " ON DUPLICATE KEY UPDATE status = VALUES(status),"
                         " response = VALUES(response), error = VALUES(error),"
                         " attempts = attempts + 1, updated_at = NOW(6)");
}

/* Applied rows without a response: one UPDATE of constants, by key. The
 * row keeps its size (status, attempts and updated_at are fixed-width), so
 * InnoDB updates it in place. */
static void dd_claim_finish_plain(dd_buf_t *sql, const dd_claim_opts_t *opts, dd_claim_t **claims,
                                  size_t n)
{
    size_t k = 0;

    dd_buf_printf(sql,
                  "UPDATE `%s` SET status = %d, attempts = attempts + 1, updated_at = NOW(6)"
                  " WHERE biz_key IN (",
                  opts->table, DD_ROW_APPLIED);
    for (size_t i = 0; i < n; i++) {
        if (dd_claim_kind(claims[i]) != DD_FINISH_PLAIN) continue;
        if (k++) dd_buf_puts(sql, ",");
        dd_db_hex(sql, claims[i]->key, claims[i]->key_len);
    }
    dd_buf_puts(sql, ")");
}

/* The bulk insert's parameters, one array per column (column-wise
 * binding), for up to DD_CLAIM_CHUNK rows. */
enum {
    DD_NEW_KEY,
    DD_NEW_HASH,
    DD_NEW_STATUS,
    DD_NEW_RESPONSE,
    DD_NEW_ERROR,
    DD_NEW_TOPIC,
    DD_NEW_PARTITION,
    DD_NEW_OFFSET,
    DD_NEW_PARAMS
};

struct dd_claim_rows_s {
    const char *key[DD_CLAIM_CHUNK], *hash[DD_CLAIM_CHUNK], *response[DD_CLAIM_CHUNK],
        *error[DD_CLAIM_CHUNK], *topic[DD_CLAIM_CHUNK];
    unsigned long key_len[DD_CLAIM_CHUNK], hash_len[DD_CLAIM_CHUNK], response_len[DD_CLAIM_CHUNK],
        error_len[DD_CLAIM_CHUNK], topic_len[DD_CLAIM_CHUNK];
    char response_ind[DD_CLAIM_CHUNK], error_ind[DD_CLAIM_CHUNK];
    int32_t status[DD_CLAIM_CHUNK], partition[DD_CLAIM_CHUNK];
    int64_t offset[DD_CLAIM_CHUNK];
    MYSQL_BIND bind[DD_NEW_PARAMS];
};

dd_claim_rows_t *dd_claim_rows_new(void)
{
    dd_claim_rows_t *r = calloc(1, sizeof(*r));
    MYSQL_BIND *b;

    if (!r) return NULL;
    b = r->bind;
    b[DD_NEW_KEY] =
        (MYSQL_BIND){.buffer_type = MYSQL_TYPE_BLOB, .buffer = r->key, .length = r->key_len};
    b[DD_NEW_HASH] =
        (MYSQL_BIND){.buffer_type = MYSQL_TYPE_BLOB, .buffer = r->hash, .length = r->hash_len};
    b[DD_NEW_STATUS] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_LONG, .buffer = r->status};
    b[DD_NEW_RESPONSE] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_STRING,
                                      .buffer = r->response,
                                      .length = r->response_len,
                                      .u.indicator = r->response_ind};
    b[DD_NEW_ERROR] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_STRING,
                                   .buffer = r->error,
                                   .length = r->error_len,
                                   .u.indicator = r->error_ind};
    b[DD_NEW_TOPIC] =
        (MYSQL_BIND){.buffer_type = MYSQL_TYPE_STRING, .buffer = r->topic, .length = r->topic_len};
    b[DD_NEW_PARTITION] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_LONG, .buffer = r->partition};
    b[DD_NEW_OFFSET] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_LONGLONG, .buffer = r->offset};
    return r;
}

void dd_claim_rows_destroy(dd_claim_rows_t *rows)
{
    free(rows);
}

/* A column of the bulk insert from an optional string. */
static void dd_claim_rows_text(const char *s, size_t max, const char **p, unsigned long *len,
                               char *ind)
{
    *p = s ? s : "";
    *len = s ? (unsigned long)strnlen(s, max) : 0;
    *ind = s ? STMT_INDICATOR_NONE : STMT_INDICATOR_NULL;
}

/* The deferred rows as one prepared INSERT executed for an array of
 * parameter rows: the server parses the statement once per connection, not
 * a VALUES list per batch. The owner and the ttl are the same for every
 * row, so they are part of the statement. */
static int dd_claim_finish_bulk(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims,
                                size_t n, dd_claim_rows_t *r, dd_buf_t *sql, char *errstr,
                                size_t errstr_size)
{
    dd_stmt_slot_t slot = (dd_stmt_slot_t)(DD_STMT_CLAIM_NEW + opts->stmt_slot);
    MYSQL_STMT *stmt = dd_db_stmt(db, slot);
    unsigned int rows = 0, err;
    int rc;

    if (!stmt) {
        dd_buf_reset(sql);
        dd_buf_printf(sql,
                      "INSERT INTO `%s` (biz_key, request_hash, status, response, error,"
                      " attempts, owner, topic, kpartition, koffset, expire_at)"
                      " VALUES (?, ?, ?, ?, ?, 1, ",
                      opts->table);
        dd_db_quote(sql, dd_db_mysql(db), opts->owner, strlen(opts->owner));
        dd_buf_printf(sql, ", ?, ?, ?, NOW(6) + INTERVAL %lld SECOND)", (long long)opts->ttl_s);
        if (sql->oom) {
            dd_errstr_set(errstr, errstr_size, "out of memory building the claim finish");
            return DD_ERR_NOMEM;
        }
        rc = dd_db_prepare(db, slot, sql->p, sql->len, &stmt, errstr, errstr_size);
        if (rc) return rc;
    }
    for (size_t i = 0; i < n; i++) {
        const dd_claim_t *c = claims[i];
        if (!c->deferred) continue;
        r->key[rows] = c->key;
        r->key_len[rows] = (unsigned long)c->key_len;
        r->hash[rows] = (const char *)c->hash;
        r->hash_len[rows] = DD_HASH_LEN;
        r->status[rows] = c->result_status;
        dd_claim_rows_text(c->response, SIZE_MAX, &r->response[rows], &r->response_len[rows],
                           &r->response_ind[rows]);
        dd_claim_rows_text(c->error, DD_CLAIM_ERROR_MAX, &r->error[rows], &r->error_len[rows],
                           &r->error_ind[rows]);
        r->topic[rows] = c->topic;
        r->topic_len[rows] = (unsigned long)strlen(c->topic);
        r->partition[rows] = c->partition;
        r->offset[rows] = c->offset;
        rows++;
    }
    if (mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &rows) != 0 ||
        mysql_stmt_bind_param(stmt, r->bind) != 0 || mysql_stmt_execute(stmt) != 0) {
        err = mysql_stmt_errno(stmt);
        dd_errstr_set(errstr, errstr_size, "claim finish: %u: %s", err, mysql_stmt_error(stmt));
        return dd_db_classify(err);
    }
    return dd_db_txn_check(db, "claim finish (bulk)", errstr, errstr_size);
}

/* owner, lease_until and claim_token stay as the claim set them: status
 * alone says whether a row is still being processed, and leaving them keeps
 * the row's size, so the update is in place. owner then tells the operator
 * which instance applied the key. */
int dd_claim_finish(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                    dd_buf_t *sql, dd_claim_rows_t *rows, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    int rc = DD_OK;

    for (size_t off = 0, cnt; !rc && off < n; off += cnt) {
        size_t count[DD_FINISH_KINDS] = {0};
        cnt = dd_claim_chunk(db, opts, claims + off, n - off, dd_claim_finish_max);
        for (size_t i = 0; i < cnt; i++)
            count[dd_claim_kind(claims[off + i])]++;
        for (int kind = 0; !rc && kind < DD_FINISH_KINDS; kind++) {
            if (count[kind] == 0) continue;
            if (kind == DD_FINISH_NEW && dd_db_has_bulk(db)) {
                rc = dd_claim_finish_bulk(db, opts, claims + off, cnt, rows, sql, errstr,
                                          errstr_size);
            } else {
                dd_buf_reset(sql);
                if (kind == DD_FINISH_PLAIN)
                    dd_claim_finish_plain(sql, opts, claims + off, cnt);
                else
                    dd_claim_finish_values(sql, mysql, opts, claims + off, cnt, kind);
                rc = dd_claim_send(db, sql, "claim finish", errstr, errstr_size);
            }
            /* A failed statement, prepared or not, leaves its error on the
             * connection. ER_DUP_ENTRY on a deferred row: another consumer
             * has the key. */
            if (rc && kind == DD_FINISH_NEW && mysql_errno(mysql) == 1062) rc = DD_CLAIM_RACED;
        }
    }
    return rc;
}
