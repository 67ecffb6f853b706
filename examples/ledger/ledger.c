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
 * This file is the business: the rules of a payment, the tables, and
 * handle(), one payment at a time, which defines what the ledger does.
 * ledger_bulk.c writes whole batches the same way, fast (handle_batch);
 * ledger_sql.c has the round trips both share. handle() sends its three
 * writes (one statement per table) in a single round trip when the
 * connection allows multi-statements, one each otherwise; the order upsert
 * and its state move are one statement. All values are validated, and
 * escaped (keys go in as hex literals).
 *
 * Config (handler.config): table_prefix = "..." (optional, default "");
 * emit_topic = "..." (optional): each booked payment also emits the event
 * payment.booked to that topic, keyed by the merchant, in the same
 * transaction (host->emit, ABI 6; dedupd's outbox.enabled must be on: with
 * host version 3, init refuses to start without it).
 * Privileges of the runtime user: sql/grants.sql, section [ledger].
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "ledger.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (name && strcmp(name, "emit_topic") == 0) {
        if (config_setting_type(s) != CONFIG_TYPE_STRING ||
            strlen(config_setting_get_string(s)) > LEDGER_TOPIC_MAX) {
            snprintf(err, errlen, "%s:%u: handler.config.emit_topic must be a topic name", file,
                     line);
            return -1;
        }
        strcpy(st->emit_topic, config_setting_get_string(s));
        return 0;
    }
    if (!name || strcmp(name, "table_prefix") != 0) {
        snprintf(err, errlen,
                 "%s:%u: unknown setting handler.config.%s (ledger knows: table_prefix, "
                 "emit_topic)",
                 file, line, name ? name : "?");
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

/* init_host (ABI 3): the handler's settings come with the host API. */
static int ledger_init(void **statep, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    const config_setting_t *conf = host->config;
    ledger_state *st = calloc(1, sizeof(*st));
    int i, n;

    if (!st) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    atomic_init(&st->autoinc_mode, -1);
    if (conf && !config_setting_is_group(conf)) {
        snprintf(errstr, errstr_size, "%s:%u: handler.config must be a group { ... }",
                 config_setting_source_file(conf) ? config_setting_source_file(conf) : "config",
                 config_setting_source_line(conf));
        free(st);
        return -1;
    }
    n = conf ? config_setting_length(conf) : 0;
    for (i = 0; i < n; i++) {
        if (ledger_conf_one(st, config_setting_get_elem(conf, (unsigned)i), errstr, errstr_size) !=
            0) {
            free(st);
            return -1;
        }
    }
    if (st->emit_topic[0] && host->version < 2) {
        snprintf(errstr, errstr_size, "handler.config.emit_topic needs a dedupd with host->emit");
        free(st);
        return -1;
    }
    /* Each booked payment emits: without the outbox every one would fail. */
    if (st->emit_topic[0] && host->version >= 3 && !host->outbox) {
        snprintf(errstr, errstr_size,
                 "handler.config.emit_topic = \"%s\" emits an event per payment through the "
                 "outbox, which is off: set outbox.enabled = true (and run dedupd migrate), or "
                 "remove emit_topic",
                 st->emit_topic);
        free(st);
        return -1;
    }
    st->host = host;
    *statep = st;
    return 0;
}

/* dedupd has closed every connection (conn_fini) by now. */
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

int ledger_parse(const cJSON *json, ledger_payment *p, char *err, size_t errlen)
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

/* ---- one payment --------------------------------------------------------- */

/* The three writes of one payment, and the read of its order's status when
 * the upsert's count does not tell it. The batch path writes the same rows
 * with the same clauses (LEDGER_*_ODKU). */
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

/* ---- the event ------------------------------------------------------- */

/* The payload carries its own event id, so a consumer whose key template
 * reads only the payload (a downstream dedupd) deduplicates by it. */
dedupd_status ledger_emit_booked(const ledger_state *st, MYSQL *db, const dedupd_msg *msg,
                                 const ledger_payment *p, unsigned long long ledger_id,
                                 dedupd_result *res)
{
    static const char type[] = "payment.booked";
    const dedupd_header hdr = {.name = "type", .value = type, .value_len = sizeof(type) - 1};
    char id[DEDUPD_EVENT_ID_SIZE], m[6 * LEDGER_ID_MAX + 1], o[6 * LEDGER_ID_MAX + 1];
    char t[6 * LEDGER_ID_MAX + 1], value[1024];
    int n;

    if (!st->emit_topic[0]) return DEDUPD_OK;
    if (st->host->event_id(st->host, msg, id, sizeof(id)) != 0) {
        snprintf(res->error, sizeof(res->error),
                 "ledger: host->event_id failed (is dedupd's outbox.enabled on?)");
        return DEDUPD_REJECT;
    }
    ledger_json_str(p->merchant_id, m, sizeof(m));
    ledger_json_str(p->order_no, o, sizeof(o));
    ledger_json_str(p->txn_id, t, sizeof(t));
    n = snprintf(value, sizeof(value),
                 "{\"event_id\":\"%s\",\"type\":\"%s\",\"merchant_id\":\"%s\",\"order_no\":\"%s\","
                 "\"txn_id\":\"%s\",\"amount_cents\":%lld,\"currency\":\"%s\",\"ledger_id\":%llu}",
                 id, type, m, o, t, p->amount_cents, p->currency, ledger_id);
    if (st->host->emit(st->host, db, msg, st->emit_topic, p->merchant_id, strlen(p->merchant_id),
                       value, (size_t)n, &hdr, 1, res->error, sizeof(res->error)) != 0)
        return DEDUPD_RETRY; /* the server's error, if any, is on db */
    return DEDUPD_OK;
}

char *ledger_response(unsigned long long ledger_id, const char *order_status)
{
    char json_status[6 * 64], resp[512];

    ledger_json_str(order_status, json_status, sizeof(json_status));
    snprintf(resp, sizeof(resp), "{\"ledger_id\":%llu,\"order_status\":\"%s\"}", ledger_id,
             json_status);
    return strdup(resp);
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
    dedupd_status rc;

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
    if ((rc = ledger_emit_booked(state, db, msg, &p, q[0].insert_id, res)) != DEDUPD_OK) return rc;
    res->response = ledger_response(q[0].insert_id, status);
    return DEDUPD_OK;
}

/* ---- the descriptor --------------------------------------------------- */

static const dedupd_handler ledger_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "ledger",
    .init_host = ledger_init,
    .migrate = ledger_migrate,
    .handle = ledger_handle,
    .fini = ledger_fini,
    .conn_init = ledger_conn_init,
    .conn_fini = ledger_conn_fini,
    .handle_batch_conn = ledger_handle_batch,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &ledger_handler;
}
