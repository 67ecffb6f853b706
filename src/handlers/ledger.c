/*
 * Example business handler: payment callbacks into a ledger.
 *
 * Payment providers deliver "order paid" callbacks at least once, sometimes
 * many times, sometimes late. This handler books each callback as a ledger
 * entry, adds it to the merchant's balance and moves the order along a
 * one-way state machine (UNPAID -> anything, never back). It deliberately has
 * no unique index on txn_id: dedupd's claim in the same transaction is what
 * makes the booking happen once, and this handler shows that it suffices.
 *
 * Payload: {merchant_id, order_no, txn_id: strings; amount: number > 0 with
 * at most 2 decimals; currency: 3 upper-case letters; status: e.g. "PAID"}.
 * Bad input is REJECTed (dead-lettered), database errors are RETRY with the
 * server's text so dedupd can classify them and roll back.
 *
 * Round trips: handle() sends the three writes (one statement per table) in
 * a single round trip when the connection allows multi-statements, one each
 * otherwise; the order upsert and its state move are one statement.
 * handle_batch() writes a whole batch with a statement per table (see
 * "batches" below) and leaves anything unusual to handle(). The ledger
 * entries and the orders of a batch go through statements prepared once
 * per connection and executed for arrays of rows, where the server has bulk
 * execution; every other statement is text, built per call. All values are
 * validated, and bound or escaped (keys go in as bytes or hex literals).
 *
 * Config (handler.config): table_prefix = "..." (optional, default "").
 */
#include "dedupd/handler.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEDGER_PREFIX_MAX 32
#define LEDGER_ID_MAX 64       /* VARCHAR(64) columns, checked in bytes */
#define LEDGER_STATUS_MAX 16   /* VARCHAR(16) */
#define LEDGER_AMOUNT_MAX 1e12 /* above this, doubles stop telling cents apart */
#define LEDGER_SQL_MAX 2048

typedef struct ledger_state {
    char prefix[LEDGER_PREFIX_MAX + 1];
    atomic_int autoinc_mode; /* -1 until read (see ledger_autoinc_mode) */
    pthread_key_t conns;     /* each thread's prepared statements (ledger_conn) */
} ledger_state;

/* A validated callback. Strings point into the cJSON payload. */
typedef struct ledger_payment {
    const char *merchant_id, *order_no, *txn_id, *currency, *status;
    long long amount_cents;
} ledger_payment;

/* ---- configuration ---------------------------------------------------- */

static int ledger_prefix_valid(const char *s)
{
    size_t n = strlen(s), i;

    if (n > LEDGER_PREFIX_MAX) return 0;
    for (i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

/* Reads one setting of handler.config; unknown names are errors so a typo
 * does not silently fall back to a default. */
static int ledger_conf_one(ledger_state *st, const config_setting_t *s, char *err, size_t errlen)
{
    const char *name = config_setting_name(s), *file = config_setting_source_file(s);
    unsigned line = config_setting_source_line(s);

    if (!file) file = "config";
    if (!name || strcmp(name, "table_prefix") != 0) {
        snprintf(err, errlen,
                 "%s:%u: unknown setting handler.config.%s (ledger knows: table_prefix)", file,
                 line, name ? name : "?");
        return -1;
    }
    if (config_setting_type(s) != CONFIG_TYPE_STRING ||
        !ledger_prefix_valid(config_setting_get_string(s))) {
        snprintf(err, errlen,
                 "%s:%u: handler.config.table_prefix must be a string of at most %d letters, "
                 "digits or '_'",
                 file, line, LEDGER_PREFIX_MAX);
        return -1;
    }
    strcpy(st->prefix, config_setting_get_string(s));
    return 0;
}

static void ledger_conn_free(void *p);

static int ledger_init(void **statep, const config_setting_t *conf, char *err, size_t errlen)
{
    ledger_state *st = calloc(1, sizeof(*st));
    int i, n;

    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    atomic_init(&st->autoinc_mode, -1);
    if (conf && !config_setting_is_group(conf)) {
        snprintf(err, errlen, "%s:%u: handler.config must be a group { ... }",
                 config_setting_source_file(conf) ? config_setting_source_file(conf) : "config",
                 config_setting_source_line(conf));
        free(st);
        return -1;
    }
    n = conf ? config_setting_length(conf) : 0;
    for (i = 0; i < n; i++) {
        if (ledger_conf_one(st, config_setting_get_elem(conf, (unsigned)i), err, errlen) != 0) {
            free(st);
            return -1;
        }
    }
    if (pthread_key_create(&st->conns, ledger_conn_free) != 0) {
        snprintf(err, errlen, "out of thread-specific keys");
        free(st);
        return -1;
    }
    *statep = st;
    return 0;
}

/* dedupd has joined its lanes by now (their statements went with them, see
 * ledger_conn_free); the calling thread's are freed here. */
static void ledger_fini(void *state)
{
    ledger_state *st = state;

    ledger_conn_free(pthread_getspecific(st->conns));
    pthread_setspecific(st->conns, NULL);
    pthread_key_delete(st->conns);
    free(st);
}

/* ---- schema ----------------------------------------------------------- */

/* utf8mb4_bin: merchant and order ids are compared exactly ("A1" != "a1"). */
static int ledger_migrate(void *state, MYSQL *db, char *err, size_t errlen)
{
    const ledger_state *st = state;
    static const char *const tmpl[] = {
        "CREATE TABLE IF NOT EXISTS `%sledger_entry` ("
        " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
        " merchant_id VARCHAR(64) NOT NULL, order_no VARCHAR(64) NOT NULL,"
        " txn_id VARCHAR(64) NOT NULL, amount_cents BIGINT NOT NULL, currency CHAR(3) NOT NULL,"
        " biz_key VARBINARY(255) NOT NULL,"
        " created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
        " KEY idx_merchant (merchant_id)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        "CREATE TABLE IF NOT EXISTS `%smerchant_balance` ("
        " merchant_id VARCHAR(64) NOT NULL, currency CHAR(3) NOT NULL,"
        " balance_cents BIGINT NOT NULL, entries BIGINT NOT NULL,"
        " PRIMARY KEY (merchant_id, currency)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        "CREATE TABLE IF NOT EXISTS `%spayment_order` ("
        " merchant_id VARCHAR(64) NOT NULL, order_no VARCHAR(64) NOT NULL,"
        " status VARCHAR(16) NOT NULL, txn_id VARCHAR(64) NULL, amount_cents BIGINT NULL,"
        " updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
        "  ON UPDATE CURRENT_TIMESTAMP(6),"
        " PRIMARY KEY (merchant_id, order_no)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    };
    char sql[LEDGER_SQL_MAX];
    size_t i;

    for (i = 0; i < sizeof(tmpl) / sizeof(tmpl[0]); i++) {
        snprintf(sql, sizeof(sql), tmpl[i], st->prefix);
        if (mysql_query(db, sql) != 0) {
            snprintf(err, errlen, "ledger migrate: %s (%u)", mysql_error(db), mysql_errno(db));
            return -1;
        }
    }
    return 0;
}

/* ---- payload validation ----------------------------------------------- */

/* Length of the UTF-8 sequence starting at p, or 0 when invalid (overlong,
 * surrogate, out of range or truncated). */
static size_t ledger_utf8_len(const unsigned char *p)
{
    size_t n, i;
    unsigned long cp;

    if (p[0] < 0x80) return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2, cp = p[0] & 0x1f;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, cp = p[0] & 0x0f;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, cp = p[0] & 0x07;
    else
        return 0;
    for (i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

/* Identifiers must survive the database unchanged: valid UTF-8, no control
 * characters, no leading/trailing spaces (PAD SPACE collations ignore them). */
static int ledger_text_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n;

    if (*p == ' ' || (*s && s[strlen(s) - 1] == ' ')) return 0;
    for (; *p; p += n) {
        if (*p < 0x20 || *p == 0x7f || !(n = ledger_utf8_len(p))) return 0;
    }
    return 1;
}

static const char *ledger_get_str(const cJSON *json, const char *name, size_t maxlen, char *err,
                                  size_t errlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(json, name);
    size_t n;

    if (!f || cJSON_IsNull(f)) {
        snprintf(err, errlen, "missing field %s", name);
        return NULL;
    }
    if (!cJSON_IsString(f) || !f->valuestring) {
        snprintf(err, errlen, "%s must be a string", name);
        return NULL;
    }
    n = strlen(f->valuestring);
    if (n == 0 || n > maxlen) {
        snprintf(err, errlen, "%s must be 1 to %zu bytes long, got %zu", name, maxlen, n);
        return NULL;
    }
    if (!ledger_text_ok(f->valuestring)) {
        snprintf(err, errlen,
                 "%s must be UTF-8 without control characters or leading/trailing spaces", name);
        return NULL;
    }
    return f->valuestring;
}

/* 1 when every character of s is in set (an upper-case code like "USD"). */
static int ledger_chars_in(const char *s, const char *set)
{
    return s[strspn(s, set)] == '\0';
}

/* Converts amount to integer cents without floating error. An amount with
 * at most 2 decimals is the double nearest to a whole number of cents c
 * over 100; times 100 it is within a few ulps of c (exact below 2^53, which
 * LEDGER_AMOUNT_MAX keeps it under), so rounding gives c, and c / 100 gives
 * the amount back. Any other amount does not come back. (This accepts the
 * same amounts as printing with 2 decimals and reading that back.) */
static int ledger_amount(const cJSON *json, long long *cents, char *err, size_t errlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(json, "amount");
    double x;
    long long c;

    if (!f || cJSON_IsNull(f)) {
        snprintf(err, errlen, "missing field amount");
        return -1;
    }
    if (!cJSON_IsNumber(f)) {
        snprintf(err, errlen, "amount must be a number");
        return -1;
    }
    x = f->valuedouble;
    if (!isfinite(x) || x <= 0) {
        snprintf(err, errlen, "amount must be positive, got %.15g", x);
        return -1;
    }
    if (x > LEDGER_AMOUNT_MAX) {
        snprintf(err, errlen, "amount must be at most %.0f, got %.15g", LEDGER_AMOUNT_MAX, x);
        return -1;
    }
    c = llround(x * 100.0);
    if ((double)c / 100.0 != x) {
        snprintf(err, errlen, "amount must have at most 2 decimals, got %.15g", x);
        return -1;
    }
    *cents = c;
    return 0;
}

static int ledger_parse(const cJSON *json, ledger_payment *p, char *err, size_t errlen)
{
    static const char upper[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static const char code[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";

    if (!cJSON_IsObject(json)) {
        snprintf(err, errlen, "payload must be a JSON object");
        return -1;
    }
    if (!(p->merchant_id = ledger_get_str(json, "merchant_id", LEDGER_ID_MAX, err, errlen)) ||
        !(p->order_no = ledger_get_str(json, "order_no", LEDGER_ID_MAX, err, errlen)) ||
        !(p->txn_id = ledger_get_str(json, "txn_id", LEDGER_ID_MAX, err, errlen)) ||
        ledger_amount(json, &p->amount_cents, err, errlen) != 0 ||
        !(p->currency = ledger_get_str(json, "currency", 3, err, errlen)) ||
        !(p->status = ledger_get_str(json, "status", LEDGER_STATUS_MAX, err, errlen)))
        return -1;
    if (strlen(p->currency) != 3 || !ledger_chars_in(p->currency, upper)) {
        snprintf(err, errlen, "currency must be 3 upper-case letters (ISO 4217), got \"%s\"",
                 p->currency);
        return -1;
    }
    if (!ledger_chars_in(p->status, code)) {
        snprintf(err, errlen, "status must be upper-case letters, digits or '_', got \"%s\"",
                 p->status);
        return -1;
    }
    return 0;
}

/* ---- database --------------------------------------------------------- */

/* One statement of a round trip. text is NUL-terminated. */
typedef struct ledger_sql {
    const char *text;
    int want_rows;                          /* a SELECT: keep its result in rows */
    MYSQL_RES *rows;                        /* filled in by ledger_run */
    unsigned long long affected, insert_id; /* filled in by ledger_run */
    long long updated; /* "Duplicates:" of mysql_info(), or -1 when not given */
} ledger_sql;

/* Single-quoted, escaped literal of s (at most LEDGER_ID_MAX bytes). */
static void ledger_quote(MYSQL *db, const char *s, char out[2 * LEDGER_ID_MAX + 3])
{
    unsigned long n;

    out[0] = '\'';
    n = mysql_real_escape_string(db, out + 1, s, (unsigned long)strlen(s));
    out[n + 1] = '\'';
    out[n + 2] = '\0';
}

/* X'..' literal: the key's bytes, exactly, whatever the connection charset. */
static void ledger_hex(const char *s, char *out)
{
    static const char digits[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s;

    *out++ = 'X';
    *out++ = '\'';
    for (; *p; p++) {
        *out++ = digits[*p >> 4];
        *out++ = digits[*p & 15];
    }
    *out++ = '\'';
    *out = '\0';
}

static int ledger_conn_has(MYSQL *db, unsigned long flag)
{
    unsigned long caps = 0;

    if (mariadb_get_infov(db, MARIADB_CONNECTION_CLIENT_CAPABILITIES, &caps) != 0) return 0;
    return (caps & flag) != 0;
}

/* The "Duplicates: N" of a multi-row INSERT's info text: with ON DUPLICATE
 * KEY UPDATE, the rows that existed and were changed. -1 when the text is
 * missing or not in the expected (English) form. */
static long long ledger_info_updated(const char *info)
{
    const char *p = info ? strstr(info, "Duplicates: ") : NULL;

    return p ? strtoll(p + strlen("Duplicates: "), NULL, 10) : -1;
}

/* Collects one statement's result: a result set only where one is wanted. */
static int ledger_collect(MYSQL *db, ledger_sql *q)
{
    if (mysql_field_count(db) != 0) {
        MYSQL_RES *r = mysql_store_result(db);
        if (!q->want_rows || !r) {
            mysql_free_result(r);
            return -1;
        }
        q->rows = r;
        return 0;
    }
    if (q->want_rows) return -1;
    q->affected = mysql_affected_rows(db);
    q->insert_id = mysql_insert_id(db);
    q->updated = ledger_info_updated(mysql_info(db));
    return 0;
}

static void ledger_free_rows(ledger_sql *q, int n)
{
    for (int i = 0; i < n; i++) {
        mysql_free_result(q[i].rows);
        q[i].rows = NULL;
    }
}

/* Runs the statements in order, stopping at the first error. With
 * multi-statements they go out in one round trip; a failing statement stops
 * the server from running the rest, and every result is read so the
 * connection is left in sync for dedupd. On failure mysql_errno(db) says
 * why, unless it is 0 (out of memory, or an unexpected result). */
static int ledger_run(MYSQL *db, ledger_sql *q, int n)
{
    size_t len = 0, off = 0;
    char *all;
    int i, rc = 0;

    for (i = 0; i < n; i++)
        q[i].rows = NULL;
    if (!ledger_conn_has(db, CLIENT_MULTI_STATEMENTS)) {
        for (i = 0; i < n && rc == 0; i++)
            if (mysql_query(db, q[i].text) != 0 || ledger_collect(db, &q[i]) != 0) rc = -1;
        if (rc) ledger_free_rows(q, n);
        return rc;
    }
    for (i = 0; i < n; i++)
        len += strlen(q[i].text) + 1;
    if (!(all = malloc(len + 1))) return -1;
    for (i = 0; i < n; i++) {
        size_t k = strlen(q[i].text);
        if (i) all[off++] = ';';
        memcpy(all + off, q[i].text, k);
        off += k;
    }
    all[off] = '\0';
    rc = mysql_real_query(db, all, (unsigned long)off) != 0 ? -1 : 0;
    free(all);
    if (rc) return -1;
    for (i = 0; i < n && rc == 0; i++) {
        if (i > 0 && mysql_next_result(db) != 0) {
            rc = -1; /* the server stopped at this statement's error */
            break;
        }
        rc = ledger_collect(db, &q[i]);
    }
    while (mysql_more_results(db) && mysql_next_result(db) == 0)
        mysql_free_result(mysql_store_result(db));
    if (rc) ledger_free_rows(q, n);
    return rc;
}

/* The three writes of one payment. A new order row goes straight to the
 * target state; an existing one moves only from UNPAID ("create as UNPAID,
 * then move out of UNPAID" in one statement). ODKU assigns left to right,
 * so status must be tested last. The batch path writes the same rows with
 * the same clauses (LEDGER_*_ODKU). */
#define LEDGER_BALANCE_ODKU                                                                        \
    " ON DUPLICATE KEY UPDATE balance_cents = balance_cents + VALUES(balance_cents),"              \
    " entries = entries + VALUES(entries)"
#define LEDGER_ORDER_ODKU                                                                          \
    " ON DUPLICATE KEY UPDATE"                                                                     \
    " txn_id = IF(status = 'UNPAID', VALUES(txn_id), txn_id),"                                     \
    " amount_cents = IF(status = 'UNPAID', VALUES(amount_cents), amount_cents),"                   \
    " status = IF(status = 'UNPAID', VALUES(status), status)"

typedef struct ledger_one_sql {
    char text[4][LEDGER_SQL_MAX]; /* the three writes, then the status read */
} ledger_one_sql;

static void ledger_build(const ledger_state *st, MYSQL *db, const dedupd_msg *msg,
                         const ledger_payment *p, ledger_one_sql *b)
{
    char m[2 * LEDGER_ID_MAX + 3], o[2 * LEDGER_ID_MAX + 3], t[2 * LEDGER_ID_MAX + 3];
    char key[2 * 255 + 4];
    const char *pre = st->prefix;

    ledger_quote(db, p->merchant_id, m);
    ledger_quote(db, p->order_no, o);
    ledger_quote(db, p->txn_id, t);
    ledger_hex(msg->biz_key, key);
    snprintf(b->text[0], LEDGER_SQL_MAX,
             "INSERT INTO `%sledger_entry` (merchant_id, order_no, txn_id, amount_cents, currency,"
             " biz_key) VALUES (%s, %s, %s, %lld, '%s', %s)",
             pre, m, o, t, p->amount_cents, p->currency, key);
    snprintf(b->text[1], LEDGER_SQL_MAX,
             "INSERT INTO `%smerchant_balance` (merchant_id, currency, balance_cents, entries)"
             " VALUES (%s, '%s', %lld, 1)" LEDGER_BALANCE_ODKU,
             pre, m, p->currency, p->amount_cents);
    snprintf(b->text[2], LEDGER_SQL_MAX,
             "INSERT INTO `%spayment_order` (merchant_id, order_no, status, txn_id, amount_cents)"
             " VALUES (%s, %s, '%s', %s, %lld)" LEDGER_ORDER_ODKU,
             pre, m, o, p->status, t, p->amount_cents);
    snprintf(b->text[3], LEDGER_SQL_MAX,
             "SELECT status FROM `%spayment_order` WHERE merchant_id = %s AND order_no = %s", pre,
             m, o);
}

/* status as JSON string contents: ours is validated, but one read back from
 * the table may have been written by another system. */
static void ledger_json_str(const char *s, char *out, size_t outlen)
{
    size_t o = 0;

    for (; *s && o + 7 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, outlen - o, "\\%c", c);
        else if (c < 0x20)
            o += (size_t)snprintf(out + o, outlen - o, "\\u%04x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
}

/* The response snapshot: the same text on the single and the batch path. */
static char *ledger_response(unsigned long long ledger_id, const char *order_status)
{
    char json_status[6 * 64], resp[512];

    ledger_json_str(order_status, json_status, sizeof(json_status));
    snprintf(resp, sizeof(resp), "{\"ledger_id\":%llu,\"order_status\":\"%s\"}", ledger_id,
             json_status);
    return strdup(resp);
}

static dedupd_status ledger_db_fail(MYSQL *db, dedupd_result *res)
{
    if (mysql_errno(db))
        snprintf(res->error, sizeof(res->error), "ledger: %s (%u)", mysql_error(db),
                 mysql_errno(db));
    else
        snprintf(res->error, sizeof(res->error), "ledger: out of memory or unexpected result");
    return DEDUPD_RETRY;
}

static dedupd_status ledger_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                   dedupd_result *res)
{
    ledger_payment p;
    ledger_one_sql b;
    ledger_sql q[4] = {{.text = b.text[0]},
                       {.text = b.text[1]},
                       {.text = b.text[2]},
                       {.text = b.text[3], .want_rows = 1}};
    char status[64];
    unsigned long long up;
    MYSQL_ROW row;

    if (ledger_parse(msg->json, &p, res->error, sizeof(res->error)) != 0) return DEDUPD_REJECT;
    if (strlen(msg->biz_key) > 255) {
        snprintf(res->error, sizeof(res->error), "biz_key longer than 255 bytes");
        return DEDUPD_REJECT;
    }
    ledger_build(state, db, msg, &p, &b);
    if (ledger_run(db, q, 3) != 0) return ledger_db_fail(db, res);
    /* Affected rows of the order upsert: 1 inserted, 2 moved from UNPAID,
     * 0 left alone. CLIENT_FOUND_ROWS reports "left alone" as 1 too, so
     * then (and only then) 1 is ambiguous and we ask the table (our upsert
     * holds the row's lock). */
    up = q[2].affected;
    if (up == 2 || (up == 1 && !ledger_conn_has(db, CLIENT_FOUND_ROWS))) {
        snprintf(status, sizeof(status), "%s", p.status);
    } else {
        if (ledger_run(db, &q[3], 1) != 0) return ledger_db_fail(db, res);
        row = mysql_fetch_row(q[3].rows);
        snprintf(status, sizeof(status), "%s", row && row[0] ? row[0] : "");
        mysql_free_result(q[3].rows);
        if (!status[0]) {
            snprintf(res->error, sizeof(res->error), "ledger: order row vanished");
            return DEDUPD_RETRY;
        }
    }
    res->response = ledger_response(q[0].insert_id, status);
    return DEDUPD_OK;
}

/* ---- batches --------------------------------------------------------- */

/* handle_batch: the same rows as handle() for every payment, with one
 * statement per table whatever the batch size:
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
 * same order. */

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

/* The prepared statements of one thread on its connection. dedupd never
 * hands a connection from one thread to another, so a thread that comes
 * with another connection (dedupd reconnected) has closed the old one, and
 * Connector/C has detached its statements: closing them only frees them. */
typedef struct ledger_conn {
    MYSQL *db;
    unsigned long thread_id;
    MYSQL_STMT *stmt[LEDGER_STMTS];
    MYSQL_STMT *dead; /* failed to prepare: closed at the next call, since
                         closing it now would clear the error dedupd reads */
} ledger_conn;

static void ledger_conn_reset(ledger_conn *c)
{
    for (int i = 0; i < LEDGER_STMTS; i++) {
        if (c->stmt[i]) mysql_stmt_close(c->stmt[i]);
        c->stmt[i] = NULL;
    }
    if (c->dead) mysql_stmt_close(c->dead);
    c->dead = NULL;
}

/* Thread-exit destructor of the per-thread statements. */
static void ledger_conn_free(void *p)
{
    if (!p) return;
    ledger_conn_reset(p);
    free(p);
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

/* The calling thread's statement `which` on db, prepared on first use. */
static MYSQL_STMT *ledger_stmt(ledger_state *st, MYSQL *db, int which, dedupd_result *res)
{
    ledger_conn *c = pthread_getspecific(st->conns);
    unsigned long id = mysql_thread_id(db);
    char sql[LEDGER_SQL_MAX];
    MYSQL_STMT *stmt;

    if (!c) {
        if (!(c = calloc(1, sizeof(*c))) || pthread_setspecific(st->conns, c) != 0) {
            free(c);
            snprintf(res[0].error, sizeof(res[0].error), "ledger: out of memory");
            return NULL;
        }
    }
    if (c->db != db || c->thread_id != id) {
        ledger_conn_reset(c);
        c->db = db;
        c->thread_id = id;
    }
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
static int ledger_bulk_run(ledger_state *st, MYSQL *db, int which, ledger_item *const *rows,
                           size_t n, ledger_sql *q, dedupd_result *res)
{
    const char *spec = ledger_stmt_params[which];
    MYSQL_STMT *stmt = ledger_stmt(st, db, which, res);
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
static dedupd_status ledger_batch_bulk(ledger_state *st, MYSQL *db, ledger_item *items,
                                       ledger_item **ord, ledger_item **bal, size_t n,
                                       dedupd_result *res)
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
    if (ledger_bulk_run(st, db, LEDGER_STMT_ENTRIES, seq, n, NULL, res) != 0) goto out;
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
    if (ledger_bulk_run(st, db, LEDGER_STMT_ORDERS, ord, n, &orders, res) != 0) goto out;
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

static dedupd_status ledger_handle_batch(void *state, MYSQL *db, const dedupd_msg *const *msgs,
                                         size_t n, dedupd_result *res)
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
    rc = ledger_has_bulk(db) ? ledger_batch_bulk(st, db, items, ord, bal, n, res)
                             : ledger_batch_text(st, db, items, ord, bal, n, res);
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

static const dedupd_handler ledger_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "ledger",
    .init = ledger_init,
    .migrate = ledger_migrate,
    .handle = ledger_handle,
    .fini = ledger_fini,
    .handle_batch = ledger_handle_batch,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &ledger_handler;
}
