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
 * Round trips: the three writes are separate statements (one per table), sent
 * in a single round trip when the connection allows multi-statements, one
 * each otherwise. The order upsert and its state move are one statement. No
 * statement is cached, so nothing here is tied to a connection or a thread;
 * all values are validated and escaped (keys go in as hex literals).
 *
 * Config (handler.config): table_prefix = "..." (optional, default "").
 */
#include "dedupd/handler.h"

#include <math.h>
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

static int ledger_init(void **statep, const config_setting_t *conf, char *err, size_t errlen)
{
    ledger_state *st = calloc(1, sizeof(*st));
    int i, n;

    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
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
    *statep = st;
    return 0;
}

static void ledger_fini(void *state)
{
    free(state);
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

/* Converts amount to integer cents without floating error: the amount is
 * accepted only if printing it with 2 decimals and reading that back gives
 * the very same double, and the cents are then read from those digits. */
static int ledger_amount(const cJSON *json, long long *cents, char *err, size_t errlen)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(json, "amount");
    char buf[64], *dot;
    double x;

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
    snprintf(buf, sizeof(buf), "%.2f", x);
    if (strtod(buf, NULL) != x) {
        snprintf(err, errlen, "amount must have at most 2 decimals, got %.15g", x);
        return -1;
    }
    dot = strchr(buf, '.');
    memmove(dot, dot + 1, strlen(dot)); /* "12.34" -> "1234" */
    *cents = strtoll(buf, NULL, 10);
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

typedef struct ledger_sql {
    char text[LEDGER_SQL_MAX];
    unsigned long long affected, insert_id; /* filled in by ledger_run */
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

/* Collects one statement's result; fails if it produced a result set. */
static int ledger_collect(MYSQL *db, ledger_sql *q)
{
    if (mysql_field_count(db) != 0) {
        mysql_free_result(mysql_store_result(db));
        return -1;
    }
    q->affected = mysql_affected_rows(db);
    q->insert_id = mysql_insert_id(db);
    return 0;
}

/* Runs the statements in order, stopping at the first error. With
 * multi-statements they go out in one round trip; a failing statement stops
 * the server from running the rest, and every result is read so the
 * connection is left in sync for dedupd. */
static int ledger_run(MYSQL *db, ledger_sql *q, int n)
{
    char all[4 * LEDGER_SQL_MAX];
    size_t len = 0;
    int i, rc = 0;

    if (!ledger_conn_has(db, CLIENT_MULTI_STATEMENTS)) {
        for (i = 0; i < n; i++)
            if (mysql_query(db, q[i].text) != 0 || ledger_collect(db, &q[i]) != 0) return -1;
        return 0;
    }
    for (i = 0; i < n; i++)
        len += (size_t)snprintf(all + len, sizeof(all) - len, "%s%s", i ? ";" : "", q[i].text);
    if (mysql_real_query(db, all, (unsigned long)len) != 0) return -1;
    for (i = 0; i < n && rc == 0; i++) {
        if (i > 0 && mysql_next_result(db) != 0)
            return -1; /* the server stopped at this statement's error */
        rc = ledger_collect(db, &q[i]);
    }
    while (mysql_more_results(db) && mysql_next_result(db) == 0)
        mysql_free_result(mysql_store_result(db));
    return rc;
}

/* The order's current status, for the response when our upsert did not
 * set it (the order had already left UNPAID). Our upsert holds its lock. */
static int ledger_order_status(MYSQL *db, const char *table_sql, char *out, size_t outlen)
{
    MYSQL_RES *r;
    MYSQL_ROW row;
    int rc = -1;

    if (mysql_query(db, table_sql) != 0 || !(r = mysql_store_result(db))) return -1;
    if ((row = mysql_fetch_row(r)) && row[0]) {
        snprintf(out, outlen, "%s", row[0]);
        rc = 0;
    }
    mysql_free_result(r);
    return rc;
}

static void ledger_build(const ledger_state *st, MYSQL *db, const dedupd_msg *msg,
                         const ledger_payment *p, ledger_sql q[3], char *select, size_t selectlen)
{
    char m[2 * LEDGER_ID_MAX + 3], o[2 * LEDGER_ID_MAX + 3], t[2 * LEDGER_ID_MAX + 3];
    char key[2 * 255 + 4];
    const char *pre = st->prefix;

    ledger_quote(db, p->merchant_id, m);
    ledger_quote(db, p->order_no, o);
    ledger_quote(db, p->txn_id, t);
    ledger_hex(msg->biz_key, key);
    snprintf(q[0].text, sizeof(q[0].text),
             "INSERT INTO `%sledger_entry` (merchant_id, order_no, txn_id, amount_cents, currency,"
             " biz_key) VALUES (%s, %s, %s, %lld, '%s', %s)",
             pre, m, o, t, p->amount_cents, p->currency, key);
    snprintf(q[1].text, sizeof(q[1].text),
             "INSERT INTO `%smerchant_balance` (merchant_id, currency, balance_cents, entries)"
             " VALUES (%s, '%s', %lld, 1) ON DUPLICATE KEY UPDATE"
             " balance_cents = balance_cents + VALUES(balance_cents), entries = entries + 1",
             pre, m, p->currency, p->amount_cents);
    /* "Create as UNPAID, then move out of UNPAID" in one statement: a new row
     * goes straight to the target state; an existing one moves only from
     * UNPAID. ODKU assigns left to right, so status must be tested last. */
    snprintf(q[2].text, sizeof(q[2].text),
             "INSERT INTO `%spayment_order` (merchant_id, order_no, status, txn_id, amount_cents)"
             " VALUES (%s, %s, '%s', %s, %lld) ON DUPLICATE KEY UPDATE"
             " txn_id = IF(status = 'UNPAID', VALUES(txn_id), txn_id),"
             " amount_cents = IF(status = 'UNPAID', VALUES(amount_cents), amount_cents),"
             " status = IF(status = 'UNPAID', VALUES(status), status)",
             pre, m, o, p->status, t, p->amount_cents);
    snprintf(select, selectlen,
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

static dedupd_status ledger_db_fail(MYSQL *db, dedupd_result *res)
{
    snprintf(res->error, sizeof(res->error), "ledger: %s (%u)", mysql_error(db), mysql_errno(db));
    return DEDUPD_RETRY;
}

static dedupd_status ledger_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                   dedupd_result *res)
{
    ledger_payment p;
    ledger_sql q[3];
    char select[LEDGER_SQL_MAX], status[64], json_status[6 * sizeof(status)], resp[512];
    unsigned long long up;

    if (ledger_parse(msg->json, &p, res->error, sizeof(res->error)) != 0) return DEDUPD_REJECT;
    if (strlen(msg->biz_key) > 255) {
        snprintf(res->error, sizeof(res->error), "biz_key longer than 255 bytes");
        return DEDUPD_REJECT;
    }
    ledger_build(state, db, msg, &p, q, select, sizeof(select));
    if (ledger_run(db, q, 3) != 0) return ledger_db_fail(db, res);
    /* Affected rows of the order upsert: 1 inserted, 2 moved from UNPAID,
     * 0 left alone. CLIENT_FOUND_ROWS reports "left alone" as 1 too, so
     * then (and only then) 1 is ambiguous and we ask the table. */
    up = q[2].affected;
    if (up == 2 || (up == 1 && !ledger_conn_has(db, CLIENT_FOUND_ROWS)))
        snprintf(status, sizeof(status), "%s", p.status);
    else if (ledger_order_status(db, select, status, sizeof(status)) != 0)
        return ledger_db_fail(db, res);
    ledger_json_str(status, json_status, sizeof(json_status));
    snprintf(resp, sizeof(resp), "{\"ledger_id\":%llu,\"order_status\":\"%s\"}", q[0].insert_id,
             json_status);
    res->response = strdup(resp);
    return DEDUPD_OK;
}

static const dedupd_handler ledger_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "ledger",
    .init = ledger_init,
    .migrate = ledger_migrate,
    .handle = ledger_handle,
    .fini = ledger_fini,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &ledger_handler;
}
