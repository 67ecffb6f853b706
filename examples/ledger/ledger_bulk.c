/*
 * The ledger example's handle_batch() (see ledger.h): the same rows as
 * handle() in ledger.c for every payment, with one statement per table
 * whatever the batch size:
 *  - the ledger entries, in message order;
 *  - the merchant balances, summed per merchant and currency first, so a
 *    hot merchant is one row change per batch instead of one per payment;
 *  - the order upserts;
 *  - a read of the orders' statuses for the responses, only when the
 *    upsert's counts do not show that every order took its payment's
 *    status (see ledger_orders_all_set).
 * Where the server has bulk execution and RETURNING (MariaDB 10.5+), the
 * entries and the orders are prepared statements executed for arrays of
 * rows, and the entries' ids come back row by row (ledger_batch_bulk).
 * Elsewhere all three are multi-row text statements in one round trip,
 * and the ids are the consecutive block such a statement takes
 * (ledger_batch_text).
 * It declines (dedupd then calls handle() per message, which decides each
 * one) when a payment is invalid, when an order appears twice in the batch
 * (its second payment would see the first one's state, which the status
 * read cannot tell apart), or when the ids cannot be known. Balances and
 * orders are written in key order, so concurrent batches lock them in the
 * same order.
 *
 * The prepared statements live in the connection's state (conn_init and
 * conn_fini, ABI 3): dedupd makes one per connection, after every
 * reconnect too, so a statement is never used on a connection it was not
 * prepared on.
 */
#include "ledger.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ledger_buf {
    char *p;
    size_t len, cap;
    int oom;
} ledger_buf;

static int ledger_buf_reserve(ledger_buf *b, size_t n)
{
    size_t cap = b->cap ? b->cap : 4096;
    char *p;

    if (b->oom) return -1;
    if (b->len + n + 1 <= b->cap) return 0;
    while (cap < b->len + n + 1)
        cap *= 2;
    if (!(p = realloc(b->p, cap))) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void ledger_buf_puts(ledger_buf *b, const char *s)
{
    size_t n = strlen(s);

    if (ledger_buf_reserve(b, n) != 0) return;
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

static void ledger_buf_printf(ledger_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || ledger_buf_reserve(b, (size_t)n) != 0) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Escaped, single-quoted literal of s. */
static void ledger_buf_quote(ledger_buf *b, MYSQL *db, const char *s)
{
    size_t n = strlen(s);

    if (ledger_buf_reserve(b, 2 * n + 2) != 0) return;
    b->p[b->len++] = '\'';
    b->len += mysql_real_escape_string(db, b->p + b->len, s, (unsigned long)n);
    b->p[b->len++] = '\'';
    b->p[b->len] = '\0';
}

static void ledger_buf_hex(ledger_buf *b, const char *s)
{
    if (ledger_buf_reserve(b, 2 * strlen(s) + 3) != 0) return;
    ledger_hex(s, b->p + b->len);
    b->len += strlen(b->p + b->len);
}

/* One payment of a batch. */
typedef struct ledger_item {
    ledger_payment p;
    const char *biz_key;
    unsigned long long ledger_id;
    char status[4 * LEDGER_STATUS_MAX + 1]; /* read back: VARCHAR(16) of utf8mb4 */
} ledger_item;

static int ledger_cmp_order(const void *a, const void *b)
{
    const ledger_item *x = *(const ledger_item *const *)a, *y = *(const ledger_item *const *)b;
    int c = strcmp(x->p.merchant_id, y->p.merchant_id);

    return c ? c : strcmp(x->p.order_no, y->p.order_no);
}

static int ledger_cmp_balance(const void *a, const void *b)
{
    const ledger_item *x = *(const ledger_item *const *)a, *y = *(const ledger_item *const *)b;
    int c = strcmp(x->p.merchant_id, y->p.merchant_id);

    return c ? c : strcmp(x->p.currency, y->p.currency);
}

/* innodb_autoinc_lock_mode, read once per process (it is read-only). */
static int ledger_autoinc_mode(ledger_state *st, MYSQL *db)
{
    ledger_sql q = {.text = "SELECT @@GLOBAL.innodb_autoinc_lock_mode", .want_rows = 1};
    MYSQL_ROW row;
    int mode = atomic_load(&st->autoinc_mode);

    if (mode >= 0) return mode;
    if (ledger_run(db, &q, 1) != 0) return -1;
    row = mysql_fetch_row(q.rows);
    mode = row && row[0] ? atoi(row[0]) : -1;
    mysql_free_result(q.rows);
    if (mode >= 0) atomic_store(&st->autoinc_mode, mode);
    return mode;
}

/* Parses every payment; 0, or -1 with the reason in res[0].error. */
static int ledger_batch_parse(const dedupd_msg *const *msgs, size_t n, ledger_item *items,
                              dedupd_result *res)
{
    char why[200];

    for (size_t i = 0; i < n; i++) {
        if (ledger_parse(msgs[i]->json, &items[i].p, why, sizeof(why)) != 0 ||
            (strlen(msgs[i]->biz_key) > 255 &&
             snprintf(why, sizeof(why), "biz_key longer than 255 bytes") > 0)) {
            snprintf(res[0].error, sizeof(res[0].error), "ledger: offset %lld: %s",
                     (long long)msgs[i]->offset, why);
            return -1;
        }
        items[i].biz_key = msgs[i]->biz_key;
    }
    return 0;
}

/* The ledger entries, one multi-row INSERT in message order. */
static void ledger_sql_entries(const ledger_state *st, MYSQL *db, const ledger_item *items,
                               size_t n, ledger_buf *b)
{
    ledger_buf_printf(b,
                      "INSERT INTO `%sledger_entry` (merchant_id, order_no, txn_id, amount_cents,"
                      " currency, biz_key) VALUES ",
                      st->prefix);
    for (size_t i = 0; i < n; i++) {
        const ledger_payment *p = &items[i].p;
        ledger_buf_puts(b, i ? ",(" : "(");
        ledger_buf_quote(b, db, p->merchant_id);
        ledger_buf_puts(b, ",");
        ledger_buf_quote(b, db, p->order_no);
        ledger_buf_puts(b, ",");
        ledger_buf_quote(b, db, p->txn_id);
        ledger_buf_printf(b, ",%lld,'%s',", p->amount_cents, p->currency);
        ledger_buf_hex(b, items[i].biz_key);
        ledger_buf_puts(b, ")");
    }
}

/* The balances, summed per merchant and currency (bal is in that order). */
static void ledger_sql_balances(const ledger_state *st, MYSQL *db, ledger_item *const *bal,
                                size_t n, ledger_buf *b)
{
    size_t i, j;

    ledger_buf_printf(b,
                      "INSERT INTO `%smerchant_balance` (merchant_id, currency, balance_cents,"
                      " entries) VALUES ",
                      st->prefix);
    for (i = 0; i < n; i = j) {
        long long sum = 0;
        for (j = i; j < n && ledger_cmp_balance(&bal[i], &bal[j]) == 0; j++)
            sum += bal[j]->p.amount_cents;
        ledger_buf_puts(b, i ? ",(" : "(");
        ledger_buf_quote(b, db, bal[i]->p.merchant_id);
        ledger_buf_printf(b, ",'%s',%lld,%zu)", bal[i]->p.currency, sum, j - i);
    }
    ledger_buf_puts(b, LEDGER_BALANCE_ODKU);
}

/* The order upserts, in key order. */
static void ledger_sql_orders(const ledger_state *st, MYSQL *db, ledger_item *const *ord, size_t n,
                              ledger_buf *b)
{
    ledger_buf_printf(b,
                      "INSERT INTO `%spayment_order` (merchant_id, order_no, status, txn_id,"
                      " amount_cents) VALUES ",
                      st->prefix);
    for (size_t k = 0; k < n; k++) {
        const ledger_payment *p = &ord[k]->p;
        ledger_buf_puts(b, k ? ",(" : "(");
        ledger_buf_quote(b, db, p->merchant_id);
        ledger_buf_puts(b, ",");
        ledger_buf_quote(b, db, p->order_no);
        ledger_buf_printf(b, ",'%s',", p->status);
        ledger_buf_quote(b, db, p->txn_id);
        ledger_buf_printf(b, ",%lld)", p->amount_cents);
    }
    ledger_buf_puts(b, LEDGER_ORDER_ODKU);
}

/* The read of the orders' statuses after the upsert. */
static void ledger_sql_statuses(const ledger_state *st, MYSQL *db, ledger_item *const *ord,
                                size_t n, ledger_buf *b)
{
    ledger_buf_printf(b, "SELECT merchant_id, order_no, status FROM `%spayment_order` WHERE ",
                      st->prefix);
    for (size_t k = 0; k < n; k++) {
        ledger_buf_puts(b, k ? " OR (merchant_id = " : "(merchant_id = ");
        ledger_buf_quote(b, db, ord[k]->p.merchant_id);
        ledger_buf_puts(b, " AND order_no = ");
        ledger_buf_quote(b, db, ord[k]->p.order_no);
        ledger_buf_puts(b, ")");
    }
}

/* Matches the read-back statuses to the payments; -1 if one is missing. */
static int ledger_read_statuses(MYSQL_RES *rows, ledger_item **ord, size_t n)
{
    MYSQL_ROW row;
    size_t found = 0;

    while ((row = mysql_fetch_row(rows))) {
        ledger_item probe = {.p = {.merchant_id = row[0], .order_no = row[1]}}, *pp = &probe;
        ledger_item **hit;
        if (!row[0] || !row[1] || !row[2]) continue;
        hit = bsearch(&pp, ord, n, sizeof(*ord), ledger_cmp_order);
        if (!hit || (*hit)->status[0]) continue;
        snprintf((*hit)->status, sizeof((*hit)->status), "%s", row[2]);
        found++;
    }
    return found == n ? 0 : -1;
}

/* 1 when every order row of the upsert was inserted (1 affected row) or
 * moved out of UNPAID (2, counted as "Duplicates"), so each order now has
 * its payment's status. Rows left alone count 0 and make this false; so
 * does CLIENT_FOUND_ROWS, which counts them as 1. */
static int ledger_orders_all_set(MYSQL *db, const ledger_sql *q, size_t n)
{
    return q->updated >= 0 && q->affected == n + (unsigned long long)q->updated &&
           !ledger_conn_has(db, CLIENT_FOUND_ROWS);
}

/* ---- bulk execution --------------------------------------------------- */

/* The statements the bulk path keeps prepared. */
enum { LEDGER_STMT_ENTRIES, LEDGER_STMT_ORDERS, LEDGER_STMTS };

/* Their parameters, one letter per '?': m merchant_id, o order_no, t txn_id,
 * a amount_cents, c currency, s status, k biz_key. */
static const char *const ledger_stmt_params[LEDGER_STMTS] = {"motack", "mosta"};

#define LEDGER_BULK_COLS 6
#define LEDGER_BULK_CHUNK 1000 /* rows per execution: a packet of ~200 kB */

/* A connection's prepared statements, made on first use. */
struct ledger_conn {
    MYSQL_STMT *stmt[LEDGER_STMTS];
    MYSQL_STMT *dead; /* failed to prepare: closed at the next call, since
                         closing it now would clear the error dedupd reads */
};

int ledger_conn_init(void *state, MYSQL *db, void **conn_state, char *errstr, size_t errstr_size)
{
    (void)state, (void)db;
    if (!(*conn_state = calloc(1, sizeof(ledger_conn)))) {
        snprintf(errstr, errstr_size, "ledger: out of memory");
        return -1;
    }
    return 0;
}

/* Before dedupd closes db (it may be broken: closing a statement then
 * only frees it). */
void ledger_conn_fini(void *state, MYSQL *db, void *conn_state)
{
    ledger_conn *c = conn_state;

    (void)state, (void)db;
    if (!c) return;
    for (int i = 0; i < LEDGER_STMTS; i++)
        if (c->stmt[i]) mysql_stmt_close(c->stmt[i]);
    if (c->dead) mysql_stmt_close(c->dead);
    free(c);
}

/* 1 when DEDUPD_TEST_FAULTS names fault (dedupd's test fault injection:
 * "name" or "name=N", separated by ',' or ' '). */
static int ledger_fault(const char *fault)
{
    const char *env = getenv("DEDUPD_TEST_FAULTS"), *p;
    size_t len = strlen(fault);

    for (p = env; p && (p = strstr(p, fault)) != NULL; p += len)
        if ((p == env || p[-1] == ',' || p[-1] == ' ') && strchr(",= ", p[len]))
            return 1; /* strchr also matches the terminating NUL */
    return 0;
}

/* Bulk execution (arrays of parameter rows) exists on MariaDB 10.2 and
 * later, INSERT ... RETURNING from 10.5 on; the bulk path needs both.
 * DEDUPD_TEST_FAULTS=no_bulk makes the ledger act as if the server had
 * neither, like dedupd itself. */
static int ledger_has_bulk(MYSQL *db)
{
    const char *info = mysql_get_server_info(db);
    unsigned long caps = 0;

    if (ledger_fault("no_bulk") || !info || !strstr(info, "MariaDB") ||
        mysql_get_server_version(db) < 100500)
        return 0;
    if (mariadb_get_infov(db, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES, &caps) != 0)
        return 0;
    return (caps & (MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32)) != 0;
}

/* Statement `which` on db (c is db's), prepared on first use. */
static MYSQL_STMT *ledger_stmt(const ledger_state *st, ledger_conn *c, MYSQL *db, int which,
                               dedupd_result *res)
{
    char sql[LEDGER_SQL_MAX];
    MYSQL_STMT *stmt;

    if (c->dead) {
        mysql_stmt_close(c->dead);
        c->dead = NULL;
    }
    if (c->stmt[which]) return c->stmt[which];
    if (which == LEDGER_STMT_ENTRIES)
        snprintf(sql, sizeof(sql),
                 "INSERT INTO `%sledger_entry` (merchant_id, order_no, txn_id, amount_cents,"
                 " currency, biz_key) VALUES (?, ?, ?, ?, ?, ?) RETURNING id, biz_key",
                 st->prefix);
    else
        snprintf(sql, sizeof(sql),
                 "INSERT INTO `%spayment_order` (merchant_id, order_no, status, txn_id,"
                 " amount_cents) VALUES (?, ?, ?, ?, ?)" LEDGER_ORDER_ODKU,
                 st->prefix);
    if (!(stmt = mysql_stmt_init(db))) {
        snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
        return NULL;
    }
    if (mysql_stmt_prepare(stmt, sql, (unsigned long)strlen(sql)) != 0) {
        snprintf(res[0].error, sizeof(res[0].error), "ledger: prepare: %s (%u)",
                 mysql_stmt_error(stmt), mysql_stmt_errno(stmt));
        c->dead = stmt;
        return NULL;
    }
    return c->stmt[which] = stmt;
}

/* Column-wise parameters of a bulk execution: an array of values per '?'. */
typedef struct ledger_params {
    size_t cols;
    const char **str[LEDGER_BULK_COLS];
    unsigned long *len[LEDGER_BULK_COLS];
    long long *num[LEDGER_BULK_COLS];
    MYSQL_BIND bind[LEDGER_BULK_COLS];
} ledger_params;

static void ledger_params_free(ledger_params *prm)
{
    for (size_t c = 0; c < LEDGER_BULK_COLS; c++) {
        free(prm->str[c]);
        free(prm->len[c]);
        free(prm->num[c]);
    }
}

/* Fills the columns named by spec from rows[0..n) (see ledger_stmt_params). */
static int ledger_params_fill(ledger_params *prm, const char *spec, ledger_item *const *rows,
                              size_t n)
{
    memset(prm, 0, sizeof(*prm));
    prm->cols = strlen(spec);
    for (size_t c = 0; c < prm->cols; c++) {
        if (spec[c] == 'a' ? !(prm->num[c] = calloc(n, sizeof(long long)))
                           : !(prm->str[c] = calloc(n, sizeof(char *))) ||
                                 !(prm->len[c] = calloc(n, sizeof(unsigned long))))
            return -1;
        for (size_t i = 0; i < n; i++) {
            const ledger_payment *p = &rows[i]->p;
            const char *v = spec[c] == 'm'   ? p->merchant_id
                            : spec[c] == 'o' ? p->order_no
                            : spec[c] == 't' ? p->txn_id
                            : spec[c] == 'c' ? p->currency
                            : spec[c] == 's' ? p->status
                            : spec[c] == 'k' ? rows[i]->biz_key
                                             : NULL;
            if (!v) {
                prm->num[c][i] = p->amount_cents;
                continue;
            }
            prm->str[c][i] = v;
            prm->len[c][i] = (unsigned long)strlen(v);
        }
    }
    return 0;
}

/* Points the binds at rows [off, ...). The key goes in as bytes. */
static void ledger_params_bind(ledger_params *prm, const char *spec, size_t off)
{
    for (size_t c = 0; c < prm->cols; c++) {
        if (spec[c] == 'a')
            prm->bind[c] =
                (MYSQL_BIND){.buffer_type = MYSQL_TYPE_LONGLONG, .buffer = prm->num[c] + off};
        else
            prm->bind[c] =
                (MYSQL_BIND){.buffer_type = spec[c] == 'k' ? MYSQL_TYPE_BLOB : MYSQL_TYPE_STRING,
                             .buffer = prm->str[c] + off,
                             .length = prm->len[c] + off};
    }
}

/* The rows an entries chunk's RETURNING gives back, one per parameter row
 * and in their order: each payment gets its entry's id. The keys are
 * checked, so a server that returned fewer rows or another order makes the
 * batch decline rather than answer with a wrong id. Reads the whole result
 * (the connection is not free before); -1 on a mismatch or an error.
 * The server's errors for the rows (a lock wait timeout, a deadlock) arrive
 * here, while fetching, not from the execution: they end the result and
 * are left in mysql_errno(db) for dedupd to classify, so the statement is
 * not freed then (mysql_stmt_free_result clears the connection's error). */
static int ledger_take_ids(MYSQL_STMT *stmt, ledger_item *const *rows, size_t n)
{
    unsigned long long id = 0;
    char key[256]; /* biz_key is at most 255 bytes (ledger_batch_parse) */
    unsigned long key_len = 0;
    MYSQL_BIND out[2] = {
        {.buffer_type = MYSQL_TYPE_LONGLONG, .buffer = &id, .is_unsigned = 1},
        {.buffer_type = MYSQL_TYPE_STRING,
         .buffer = key,
         .buffer_length = sizeof(key),
         .length = &key_len},
    };
    size_t i = 0;
    int bad = 0, rc;

    if (mysql_stmt_bind_result(stmt, out) != 0) {
        mysql_stmt_free_result(stmt); /* the rows are still to come */
        return -1;
    }
    while ((rc = mysql_stmt_fetch(stmt)) == 0 || rc == MYSQL_DATA_TRUNCATED) {
        if (rc == 0 && i < n && key_len == strlen(rows[i]->biz_key) &&
            memcmp(key, rows[i]->biz_key, key_len) == 0)
            rows[i]->ledger_id = id;
        else
            bad = 1;
        i++;
    }
    if (rc != MYSQL_NO_DATA) return -1; /* the error ended the result */
    mysql_stmt_free_result(stmt);
    return !bad && i == n ? 0 : -1;
}

/* Why a bulk execution failed, into res[0].error. A server error while the
 * rows were fetched is on the connection, not on the statement; with
 * neither, ledger_take_ids found the rows not matching. */
static void ledger_bulk_fail(MYSQL_STMT *stmt, MYSQL *db, dedupd_result *res)
{
    if (mysql_stmt_errno(stmt))
        snprintf(res[0].error, sizeof(res[0].error), "ledger: %s (%u)", mysql_stmt_error(stmt),
                 mysql_stmt_errno(stmt));
    else if (mysql_errno(db))
        snprintf(res[0].error, sizeof(res[0].error), "ledger: %s (%u)", mysql_error(db),
                 mysql_errno(db));
    else
        snprintf(res[0].error, sizeof(res[0].error),
                 "ledger: the entries' ids did not come back row for row");
}

/* Executes statement `which` for rows[0..n), LEDGER_BULK_CHUNK rows at a
 * time. The entries get their ids (ledger_take_ids); for the orders, q
 * gets the affected rows and "Duplicates:" summed. On failure the error is
 * in res[0].error and, for the server's errors, in mysql_errno(db) too,
 * where dedupd looks for deadlocks. */
static int ledger_bulk_run(const ledger_state *st, ledger_conn *c, MYSQL *db, int which,
                           ledger_item *const *rows, size_t n, ledger_sql *q, dedupd_result *res)
{
    const char *spec = ledger_stmt_params[which];
    MYSQL_STMT *stmt = ledger_stmt(st, c, db, which, res);
    ledger_params prm;
    int rc = -1;

    if (!stmt) return -1;
    if (ledger_params_fill(&prm, spec, rows, n) != 0) {
        snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
        goto out;
    }
    if (q) q->affected = q->updated = 0;
    for (size_t off = 0; off < n; off += LEDGER_BULK_CHUNK) {
        unsigned int cnt =
            (unsigned int)(n - off < LEDGER_BULK_CHUNK ? n - off : LEDGER_BULK_CHUNK);
        long long up;
        ledger_params_bind(&prm, spec, off);
        if (mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &cnt) != 0 ||
            mysql_stmt_bind_param(stmt, prm.bind) != 0 || mysql_stmt_execute(stmt) != 0 ||
            (which == LEDGER_STMT_ENTRIES && ledger_take_ids(stmt, rows + off, cnt) != 0)) {
            ledger_bulk_fail(stmt, db, res);
            goto out;
        }
        if (!q) continue;
        q->affected += mysql_stmt_affected_rows(stmt);
        up = ledger_info_updated(mysql_info(db));
        q->updated = q->updated < 0 || up < 0 ? -1 : q->updated + up;
    }
    rc = 0;
out:
    ledger_params_free(&prm);
    return rc;
}

static dedupd_status ledger_batch_statuses(const ledger_state *st, MYSQL *db, ledger_item **ord,
                                           size_t n, const ledger_sql *q, dedupd_result *res);

/* The text path: the three writes as multi-row statements in one round
 * trip. The entries' ids are the insert id and the ones after it (see
 * ledger_autoinc_mode). */
static dedupd_status ledger_batch_text(ledger_state *st, MYSQL *db, ledger_item *items,
                                       ledger_item **ord, ledger_item **bal, size_t n,
                                       dedupd_result *res)
{
    ledger_buf b[4] = {{0}};
    ledger_sql q[4] = {{0}};
    dedupd_status rc = DEDUPD_RETRY;
    int i, mode = ledger_autoinc_mode(st, db);

    if (mode < 0 || mode > 1) {
        snprintf(res[0].error, sizeof(res[0].error),
                 "ledger: innodb_autoinc_lock_mode is %d, batch ids may not be consecutive", mode);
        return mode < 0 ? ledger_db_fail(db, &res[0]) : DEDUPD_REJECT;
    }
    ledger_sql_entries(st, db, items, n, &b[0]);
    ledger_sql_balances(st, db, bal, n, &b[1]);
    ledger_sql_orders(st, db, ord, n, &b[2]);
    for (i = 0; i < 3; i++) {
        if (b[i].oom) {
            snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
            goto out;
        }
        q[i].text = b[i].p;
    }
    if (ledger_run(db, q, 3) != 0) {
        ledger_db_fail(db, &res[0]);
        goto out;
    }
    if (q[0].affected != n) {
        snprintf(res[0].error, sizeof(res[0].error), "ledger: batch read-back incomplete");
        goto out;
    }
    for (size_t k = 0; k < n; k++)
        items[k].ledger_id = q[0].insert_id + k;
    rc = ledger_batch_statuses(st, db, ord, n, &q[2], res);
out:
    ledger_free_rows(q, 4);
    for (i = 0; i < 4; i++)
        free(b[i].p);
    return rc;
}

/* The bulk path: the entries and the orders as prepared statements
 * executed for arrays of rows (no VALUES list for the server to parse),
 * the balances as one multi-row statement. A bulk execution does not
 * promise one block of consecutive ids (other lanes' rows interleave), so
 * the entries' ids come back through RETURNING. */
static dedupd_status ledger_batch_bulk(ledger_state *st, ledger_conn *c, MYSQL *db,
                                       ledger_item *items, ledger_item **ord, ledger_item **bal,
                                       size_t n, dedupd_result *res)
{
    ledger_buf b = {0};
    ledger_sql q = {0}, orders = {0};
    dedupd_status rc = DEDUPD_RETRY;
    ledger_item **seq = malloc(n * sizeof(*seq)); /* message order */

    if (!seq) {
        snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
        return DEDUPD_RETRY;
    }
    for (size_t i = 0; i < n; i++)
        seq[i] = &items[i];
    if (ledger_bulk_run(st, c, db, LEDGER_STMT_ENTRIES, seq, n, NULL, res) != 0) goto out;
    ledger_sql_balances(st, db, bal, n, &b);
    if (b.oom) {
        snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
        goto out;
    }
    q.text = b.p;
    if (ledger_run(db, &q, 1) != 0) {
        ledger_db_fail(db, &res[0]);
        goto out;
    }
    if (ledger_bulk_run(st, c, db, LEDGER_STMT_ORDERS, ord, n, &orders, res) != 0) goto out;
    rc = ledger_batch_statuses(st, db, ord, n, &orders, res);
out:
    ledger_free_rows(&q, 1);
    free(b.p);
    free(seq);
    return rc;
}

/* The statuses the orders have after the upsert q, then the responses. */
static dedupd_status ledger_batch_statuses(const ledger_state *st, MYSQL *db, ledger_item **ord,
                                           size_t n, const ledger_sql *q, dedupd_result *res)
{
    ledger_buf b = {0};
    ledger_sql rd = {.want_rows = 1};
    dedupd_status rc = DEDUPD_RETRY;

    if (ledger_orders_all_set(db, q, n)) {
        for (size_t k = 0; k < n; k++)
            strcpy(ord[k]->status, ord[k]->p.status); /* validated: at most 16 bytes */
    } else {
        ledger_sql_statuses(st, db, ord, n, &b);
        if (b.oom) {
            snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
            goto out;
        }
        rd.text = b.p;
        if (ledger_run(db, &rd, 1) != 0) {
            ledger_db_fail(db, &res[0]);
            goto out;
        }
        if (ledger_read_statuses(rd.rows, ord, n) != 0) {
            snprintf(res[0].error, sizeof(res[0].error), "ledger: batch read-back incomplete");
            goto out;
        }
    }
    rc = DEDUPD_OK;
out:
    ledger_free_rows(&rd, 1);
    free(b.p);
    return rc;
}

dedupd_status ledger_handle_batch(void *state, void *conn_state, MYSQL *db,
                                  const dedupd_msg *const *msgs, size_t n, dedupd_result *res)
{
    ledger_state *st = state;
    ledger_item *items = calloc(n, sizeof(*items));
    ledger_item **ord = calloc(n, sizeof(*ord)), **bal = calloc(n, sizeof(*bal));
    dedupd_status rc = DEDUPD_REJECT;

    if (!items || !ord || !bal) {
        snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
        goto out;
    }
    if (ledger_batch_parse(msgs, n, items, res) != 0) goto out;
    for (size_t i = 0; i < n; i++)
        ord[i] = bal[i] = &items[i];
    qsort(ord, n, sizeof(*ord), ledger_cmp_order);
    qsort(bal, n, sizeof(*bal), ledger_cmp_balance);
    for (size_t i = 1; i < n; i++) {
        if (ledger_cmp_order(&ord[i - 1], &ord[i]) == 0) {
            snprintf(res[0].error, sizeof(res[0].error),
                     "ledger: order %.64s appears twice in the batch", ord[i]->p.order_no);
            goto out;
        }
    }
    rc = ledger_has_bulk(db) ? ledger_batch_bulk(st, conn_state, db, items, ord, bal, n, res)
                             : ledger_batch_text(st, db, items, ord, bal, n, res);
    for (size_t k = 0; rc == DEDUPD_OK && k < n; k++)
        rc = ledger_emit_booked(st, db, msgs[k], &items[k].p, items[k].ledger_id, &res[0]);
    for (size_t k = 0; rc == DEDUPD_OK && k < n; k++) {
        if (!(res[k].response = ledger_response(items[k].ledger_id, items[k].status))) {
            snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
            rc = DEDUPD_RETRY; /* dedupd frees the responses made so far */
        }
    }
out:
    free(items);
    free(ord);
    free(bal);
    return rc;
}
