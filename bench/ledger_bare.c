/*
 * bench-ledger-bare: the ledger's business writes with no deduplication.
 *
 * dedupd with the ledger handler does two things per batch: it tells
 * duplicates apart (key, request hash, dedup rows, offsets) and it books
 * the payments (the handler's writes). The bare pipeline (bare.c) does
 * neither kind of business write, so dedupd-with-ledger over bare charges
 * the ledger's rows to dedupd. This baseline does the handler's writes and
 * nothing of dedupd's, so dedupd-with-ledger over it is what telling
 * duplicates apart costs a consumer that books this ledger.
 *
 * Per message: consume, parse the JSON, render the key (the ledger stores it
 * in ledger_entry.biz_key), check the fields as the handler does (types,
 * lengths, amount in whole cents, currency and status codes; not its UTF-8
 * scan of the identifiers, which are ASCII in the bench's stream). Per N
 * messages (-n, default 1,000, dedupd's batch.max_messages), one transaction
 * with the handler's bulk path (examples/ledger/ledger.c, ledger_batch_bulk),
 * the same statements on the same tables:
 *  - the ledger entries, in message order, as the handler's prepared
 *    INSERT ... RETURNING id, biz_key executed for arrays of 1,000 rows, the
 *    returned rows read and matched to the messages by key;
 *  - the merchant balances, summed per merchant and currency, as one
 *    multi-row text INSERT ... ON DUPLICATE KEY UPDATE;
 *  - the orders, sorted by key, as the handler's prepared upsert executed
 *    for arrays of rows.
 * The handler's read of the orders' statuses is left out: it feeds only
 * dedupd's stored response, and in dedupd's first pass it never runs (every
 * order of a claimed batch is new, so the upsert's counts vouch for them).
 *
 * No dedup table, no request hash, no key claim, no offsets, one thread.
 * The stream has about 50% duplicates, and every copy is booked: a ledger
 * row for each delivery, each copy's amount added to the balance, and each
 * copy's order upsert (a copy finds its order already PAID and leaves it).
 * The tables tolerate that as they are: the ledger has no unique key on
 * txn_id or biz_key (dedupd's claim is what books a payment once), so the
 * writes are the handler's own, nothing added or relaxed. The tables are
 * the handler's: this program loads the handler plugin (-H) and runs its
 * migrate(), as `dedupd migrate` does.
 *
 * It books twice the ledger rows dedupd does, and it is one thread like
 * bare.c (one connection, waiting on each statement) where dedupd's lanes
 * overlap their waits, so dedupd's rate over this one can pass 1; the
 * bench also sets their CPU per message side by side.
 *
 *   bench-ledger-bare -b BROKERS -t TOPIC -S SOCKET -D DATABASE -H LEDGER_SO
 *                     [-k TEMPLATE] [-n MESSAGES] [-p NAME=VALUE ...]
 *   prints: ledger_bare messages=N entries=E bad=B seconds=S msg_per_s=R
 * (entries: ledger rows booked, one per good message). The clock runs from
 * the first message to the last commit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "dd_handler.h"

#define LBARE_USAGE                                                                                \
    "bench-ledger-bare -b BROKERS -t TOPIC -S SOCKET -D DATABASE -H LEDGER_SO [-k TEMPLATE] "      \
    "[-n MESSAGES] [-p NAME=VALUE ...]"
#define LBARE_ID_MAX 64       /* the handler's VARCHAR(64) ids */
#define LBARE_STATUS_MAX 16   /* VARCHAR(16) */
#define LBARE_AMOUNT_MAX 1e12 /* the handler's bound */
#define LBARE_CHUNK 1000      /* rows per bulk execution, as the handler's */
#define LBARE_COLS 6
/* A balance row of the text statement: ('merchant' escaped, 'CUR', sum, count). */
#define LBARE_BALANCE_ROW (2 * LBARE_ID_MAX + 64)

/* The handler's statements, with its default (empty) table prefix. */
#define LBARE_BALANCE_ODKU                                                                         \
    " ON DUPLICATE KEY UPDATE balance_cents = balance_cents + VALUES(balance_cents),"              \
    " entries = entries + VALUES(entries)"
#define LBARE_ORDER_ODKU                                                                           \
    " ON DUPLICATE KEY UPDATE"                                                                     \
    " txn_id = IF(status = 'UNPAID', VALUES(txn_id), txn_id),"                                     \
    " amount_cents = IF(status = 'UNPAID', VALUES(amount_cents), amount_cents),"                   \
    " status = IF(status = 'UNPAID', VALUES(status), status)"
static const char lbare_sql_entries[] =
    "INSERT INTO `ledger_entry` (merchant_id, order_no, txn_id, amount_cents,"
    " currency, biz_key) VALUES (?, ?, ?, ?, ?, ?) RETURNING id, biz_key";
static const char lbare_sql_orders[] =
    "INSERT INTO `payment_order` (merchant_id, order_no, status, txn_id,"
    " amount_cents) VALUES (?, ?, ?, ?, ?)" LBARE_ORDER_ODKU;
static const char lbare_sql_balances[] =
    "INSERT INTO `merchant_balance` (merchant_id, currency, balance_cents,"
    " entries) VALUES ";
/* The bulk statements' parameters, one letter per '?', as the handler's:
 * m merchant_id, o order_no, t txn_id, a amount_cents, c currency,
 * s status, k biz_key. */
static const char lbare_spec_entries[] = "motack", lbare_spec_orders[] = "mosta";

/* One message of a batch. The strings point into json. */
typedef struct {
    cJSON *json;
    const char *merchant_id, *order_no, *txn_id, *currency, *status;
    long long amount_cents;
    char key[DD_KEY_MAX + 1];
} lbare_row_t;

typedef struct {
    MYSQL *db;
    MYSQL_STMT *entries, *orders;
    size_t n, cap;                   /* rows in the batch, and room */
    lbare_row_t *rows;               /* message order */
    lbare_row_t **ord, **bal, **seq; /* by order, by balance, message order */
    char *sql;                       /* the balances statement */
    long booked;                     /* ledger rows that came back through RETURNING */
    /* one chunk of a bulk execution, column by column */
    const char *str[LBARE_COLS][LBARE_CHUNK];
    unsigned long len[LBARE_COLS][LBARE_CHUNK];
    long long num[LBARE_CHUNK];
} lbare_t;

static void lbare_die(const char *what, const char *why)
{
    fprintf(stderr, "bench-ledger-bare: %s: %s\n", what, why);
    exit(1);
}

/* ---- a message --------------------------------------------------------- */

static const char *lbare_str(const cJSON *json, const char *name, size_t maxlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(json, name);
    size_t n;

    if (!cJSON_IsString(f) || !f->valuestring) return NULL;
    n = strlen(f->valuestring);
    return n >= 1 && n <= maxlen ? f->valuestring : NULL;
}

/* The handler's checks (ledger_parse, ledger_amount), but for UTF-8. */
static int lbare_parse(lbare_row_t *r)
{
    static const char upper[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static const char code[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    const cJSON *amount = cJSON_GetObjectItemCaseSensitive(r->json, "amount");
    double x;

    if (!cJSON_IsObject(r->json) ||
        !(r->merchant_id = lbare_str(r->json, "merchant_id", LBARE_ID_MAX)) ||
        !(r->order_no = lbare_str(r->json, "order_no", LBARE_ID_MAX)) ||
        !(r->txn_id = lbare_str(r->json, "txn_id", LBARE_ID_MAX)) ||
        !(r->currency = lbare_str(r->json, "currency", 3)) ||
        !(r->status = lbare_str(r->json, "status", LBARE_STATUS_MAX)) || !cJSON_IsNumber(amount))
        return -1;
    x = amount->valuedouble;
    if (!isfinite(x) || x <= 0 || x > LBARE_AMOUNT_MAX) return -1;
    r->amount_cents = llround(x * 100.0);
    if ((double)r->amount_cents / 100.0 != x) return -1;
    if (strlen(r->currency) != 3 || r->currency[strspn(r->currency, upper)] != '\0') return -1;
    return r->status[strspn(r->status, code)] == '\0' ? 0 : -1;
}

static int lbare_cmp_order(const void *a, const void *b)
{
    const lbare_row_t *x = *(const lbare_row_t *const *)a, *y = *(const lbare_row_t *const *)b;
    int c = strcmp(x->merchant_id, y->merchant_id);

    return c ? c : strcmp(x->order_no, y->order_no);
}

static int lbare_cmp_balance(const void *a, const void *b)
{
    const lbare_row_t *x = *(const lbare_row_t *const *)a, *y = *(const lbare_row_t *const *)b;
    int c = strcmp(x->merchant_id, y->merchant_id);

    return c ? c : strcmp(x->currency, y->currency);
}

/* ---- the writes ------------------------------------------------------- */

static const char *lbare_field(const lbare_row_t *r, char c)
{
    switch (c) {
    case 'm':
        return r->merchant_id;
    case 'o':
        return r->order_no;
    case 't':
        return r->txn_id;
    case 'c':
        return r->currency;
    case 's':
        return r->status;
    case 'k':
        return r->key;
    default:
        return NULL; /* 'a': the amount */
    }
}

/* Reads the rows RETURNING gives back for rows[0..n) and checks that each
 * is its message's, in order, as the handler does with the ids. */
static void lbare_take(lbare_t *lb, MYSQL_STMT *stmt, lbare_row_t *const *rows, size_t n)
{
    unsigned long long id = 0;
    char key[DD_KEY_MAX + 1];
    unsigned long key_len = 0;
    MYSQL_BIND out[2] = {
        {.buffer_type = MYSQL_TYPE_LONGLONG, .buffer = &id, .is_unsigned = 1},
        {.buffer_type = MYSQL_TYPE_STRING,
         .buffer = key,
         .buffer_length = sizeof(key),
         .length = &key_len},
    };
    size_t i = 0;
    int rc;

    if (mysql_stmt_bind_result(stmt, out) != 0) lbare_die("entries", mysql_stmt_error(stmt));
    while ((rc = mysql_stmt_fetch(stmt)) == 0) {
        if (i >= n || key_len != strlen(rows[i]->key) || memcmp(key, rows[i]->key, key_len) != 0)
            lbare_die("entries", "RETURNING gave a row that is not its message's");
        i++;
    }
    if (rc != MYSQL_NO_DATA) /* the server's error for a row ends the result */
        lbare_die("entries", mysql_stmt_errno(stmt) ? mysql_stmt_error(stmt) : mysql_error(lb->db));
    mysql_stmt_free_result(stmt);
    if (i != n) lbare_die("entries", "RETURNING gave fewer rows than were inserted");
    lb->booked += (long)n;
}

/* Executes stmt for rows[0..n), LBARE_CHUNK rows at a time, its parameters
 * named by spec; with RETURNING, reads what comes back. */
static void lbare_bulk(lbare_t *lb, MYSQL_STMT *stmt, const char *spec, lbare_row_t *const *rows,
                       size_t n, int returning)
{
    size_t cols = strlen(spec);
    MYSQL_BIND bind[LBARE_COLS];

    for (size_t off = 0; off < n; off += LBARE_CHUNK) {
        unsigned int cnt = (unsigned int)(n - off < LBARE_CHUNK ? n - off : LBARE_CHUNK);
        for (size_t c = 0; c < cols; c++) {
            for (size_t i = 0; i < cnt; i++) {
                const char *v = lbare_field(rows[off + i], spec[c]);
                if (!v) {
                    lb->num[i] = rows[off + i]->amount_cents;
                    continue;
                }
                lb->str[c][i] = v;
                lb->len[c][i] = (unsigned long)strlen(v);
            }
            if (spec[c] == 'a')
                bind[c] = (MYSQL_BIND){.buffer_type = MYSQL_TYPE_LONGLONG, .buffer = lb->num};
            else
                bind[c] = (MYSQL_BIND){.buffer_type =
                                           spec[c] == 'k' ? MYSQL_TYPE_BLOB : MYSQL_TYPE_STRING,
                                       .buffer = lb->str[c],
                                       .length = lb->len[c]};
        }
        if (mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &cnt) != 0 ||
            mysql_stmt_bind_param(stmt, bind) != 0 || mysql_stmt_execute(stmt) != 0)
            lbare_die(returning ? "entries" : "orders", mysql_stmt_error(stmt));
        if (returning) lbare_take(lb, stmt, rows + off, cnt);
    }
}

/* The balances, summed per merchant and currency (lb->bal is in that
 * order), as one text statement. */
static void lbare_balances(lbare_t *lb)
{
    size_t len = sizeof(lbare_sql_balances) - 1, i, j;

    memcpy(lb->sql, lbare_sql_balances, len);
    for (i = 0; i < lb->n; i = j) {
        const lbare_row_t *r = lb->bal[i];
        long long sum = 0;
        for (j = i; j < lb->n && lbare_cmp_balance(&lb->bal[i], &lb->bal[j]) == 0; j++)
            sum += lb->bal[j]->amount_cents;
        len += (size_t)sprintf(lb->sql + len, i ? ",('" : "('");
        len += mysql_real_escape_string(lb->db, lb->sql + len, r->merchant_id,
                                        (unsigned long)strlen(r->merchant_id));
        len += (size_t)sprintf(lb->sql + len, "','%s',%lld,%zu)", r->currency, sum, j - i);
    }
    memcpy(lb->sql + len, LBARE_BALANCE_ODKU, sizeof(LBARE_BALANCE_ODKU));
    len += sizeof(LBARE_BALANCE_ODKU) - 1;
    bench_db_exec(lb->db, lb->sql, len);
}

/* The batch's writes in one transaction, in the handler's order. */
static void lbare_flush(lbare_t *lb)
{
    if (!lb->n) return;
    for (size_t i = 0; i < lb->n; i++)
        lb->seq[i] = lb->ord[i] = lb->bal[i] = &lb->rows[i];
    qsort(lb->ord, lb->n, sizeof(*lb->ord), lbare_cmp_order);
    qsort(lb->bal, lb->n, sizeof(*lb->bal), lbare_cmp_balance);
    lbare_bulk(lb, lb->entries, lbare_spec_entries, lb->seq, lb->n, 1);
    lbare_balances(lb);
    lbare_bulk(lb, lb->orders, lbare_spec_orders, lb->ord, lb->n, 0);
    if (mysql_commit(lb->db) != 0) lbare_die("commit", mysql_error(lb->db));
    for (size_t i = 0; i < lb->n; i++)
        cJSON_Delete(lb->rows[i].json);
    lb->n = 0;
}

/* ---- setup ------------------------------------------------------------ */

/* The handler's tables, made by its own migrate(). */
static void lbare_schema(const char *path, MYSQL *db)
{
    dd_handler_t *h = NULL;
    char err[512];

    if (dd_handler_load(&h, path, NULL, 0, err, sizeof(err)) != 0 ||
        dd_handler_migrate(h, db, err, sizeof(err)) != 0)
        lbare_die(path, err);
    dd_handler_destroy(h);
}

static MYSQL_STMT *lbare_prepare(MYSQL *db, const char *sql)
{
    MYSQL_STMT *stmt = mysql_stmt_init(db);

    if (!stmt) lbare_die("prepare", "out of memory");
    if (mysql_stmt_prepare(stmt, sql, (unsigned long)strlen(sql)) != 0)
        lbare_die(sql, mysql_stmt_error(stmt));
    return stmt;
}

static lbare_t *lbare_new(MYSQL *db, size_t cap)
{
    lbare_t *lb = calloc(1, sizeof(*lb));

    if (!lb || !(lb->rows = calloc(cap, sizeof(*lb->rows))) ||
        !(lb->ord = calloc(cap, sizeof(*lb->ord))) || !(lb->bal = calloc(cap, sizeof(*lb->bal))) ||
        !(lb->seq = calloc(cap, sizeof(*lb->seq))) ||
        !(lb->sql = malloc(sizeof(lbare_sql_balances) + cap * LBARE_BALANCE_ROW +
                           sizeof(LBARE_BALANCE_ODKU))))
        lbare_die("setup", "out of memory");
    lb->db = db;
    lb->cap = cap;
    lb->entries = lbare_prepare(db, lbare_sql_entries);
    lb->orders = lbare_prepare(db, lbare_sql_orders);
    return lb;
}

static void lbare_destroy(lbare_t *lb)
{
    mysql_stmt_close(lb->entries);
    mysql_stmt_close(lb->orders);
    free(lb->rows);
    free(lb->ord);
    free(lb->bal);
    free(lb->seq);
    free(lb->sql);
    free(lb);
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    bench_src_t src;
    dd_key_tmpl_t *tmpl = NULL;
    dd_json_doc_t *doc = dd_json_doc_new();
    rd_kafka_message_t *rkm;
    lbare_t *lb;
    MYSQL *db;
    char err[256];
    long bad = 0;
    int64_t t_end;

    bench_args(argc, argv, &o, LBARE_USAGE);
    if (!o.handler) {
        fprintf(stderr, "usage: %s\n", LBARE_USAGE);
        return 2;
    }
    if (dd_key_tmpl_new(&tmpl, o.key, err, sizeof(err))) {
        fprintf(stderr, "bench-ledger-bare: key template: %s\n", err);
        return 2;
    }
    db = bench_db_open(&o);
    lbare_schema(o.handler, db);
    if (mysql_autocommit(db, 0) != 0) lbare_die("autocommit", mysql_error(db));
    lb = lbare_new(db, (size_t)o.batch);
    if (bench_src_open(&src, &o)) return 1;
    while ((rkm = bench_src_next(&src, &o))) {
        lbare_row_t *r = &lb->rows[lb->n];
        size_t key_len;
        if (bench_key(doc, tmpl, rkm, &r->json, r->key, &key_len) == 0 && lbare_parse(r) == 0) {
            lb->n++;
        } else {
            cJSON_Delete(r->json);
            bad++;
        }
        rd_kafka_message_destroy(rkm);
        if (lb->n >= lb->cap) lbare_flush(lb);
    }
    lbare_flush(lb);
    t_end = bench_now_us();
    printf("ledger_bare messages=%ld entries=%ld bad=%ld seconds=%.3f msg_per_s=%.0f\n",
           src.messages, lb->booked, bad, (double)(t_end - src.t_first_us) / 1e6,
           src.messages / ((double)(t_end - src.t_first_us) / 1e6));
    bench_src_close(&src);
    lbare_destroy(lb);
    mysql_close(db);
    dd_key_tmpl_destroy(tmpl);
    dd_json_doc_destroy(doc);
    return 0;
}
