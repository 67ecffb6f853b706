/*
 * The outbox table (see dd_outbox.h): its DDL and the event namespace in
 * its comment, the insert host->emit() runs in the handler's transaction,
 * the event ids and the encoding of an event's headers in its row.
 *
 * The insert is one multi-row text statement for the events of a handler
 * call, the key, value and headers as hex literals: binary-safe whatever
 * the connection's character set, and no prepared statement to keep per
 * connection (the lanes reconnect on their own). An event's size is
 * bounded by the relay's message.max.bytes, which the caller checked
 * first; the database's max_allowed_packet must hold twice that, and the
 * caller sends a statement once it passes 1 MB.
 */
#include "dd_outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_text.h"

/* The table's comment: the event namespace, read back at start. */
static int dd_outbox_comment(MYSQL *db, char *out, size_t out_size, int *found, char *errstr,
                             size_t errstr_size)
{
    static const char sql[] = "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE "
                              "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '" DD_OUTBOX_TABLE "'";
    MYSQL_RES *res;
    MYSQL_ROW row;

    *found = 0;
    out[0] = '\0';
    if (mysql_real_query(db, sql, sizeof(sql) - 1) != 0 || !(res = mysql_store_result(db))) {
        dd_errstr_set(errstr, errstr_size, "reading the comment of " DD_OUTBOX_TABLE ": %u: %s",
                      mysql_errno(db), mysql_error(db));
        return mysql_errno(db) ? dd_db_classify(mysql_errno(db)) : DD_ERR_RETRIABLE;
    }
    if ((row = mysql_fetch_row(res))) {
        *found = 1;
        snprintf(out, out_size, "%s", row[0] ? row[0] : "");
    }
    mysql_free_result(res);
    return DD_OK;
}

/* The namespace in a comment: DD_OUTBOX_NS_LEN hex digits after the tag. */
static int dd_outbox_ns_parse(const char *comment, char ns[DD_OUTBOX_NS_LEN + 1])
{
    const char *tag = strstr(comment, DD_OUTBOX_NS_TAG);

    if (!tag) return -1;
    tag += strlen(DD_OUTBOX_NS_TAG);
    if (strspn(tag, "0123456789abcdef") != DD_OUTBOX_NS_LEN) return -1;
    memcpy(ns, tag, DD_OUTBOX_NS_LEN);
    ns[DD_OUTBOX_NS_LEN] = '\0';
    return 0;
}

int dd_outbox_namespace(MYSQL *db, char ns[DD_OUTBOX_NS_LEN + 1], char *errstr, size_t errstr_size)
{
    char comment[2100];
    int found, rc = dd_outbox_comment(db, comment, sizeof(comment), &found, errstr, errstr_size);

    if (rc) return rc;
    if (!found) {
        dd_errstr_set(errstr, errstr_size,
                      "the database has no table " DD_OUTBOX_TABLE
                      " that the user may see: run `dedupd migrate` with outbox.enabled, then "
                      "grant sql/grants.sql's [outbox] line");
        return DD_ERR_CONFIG;
    }
    if (dd_outbox_ns_parse(comment, ns) != 0) {
        dd_errstr_set(errstr, errstr_size,
                      DD_OUTBOX_TABLE " records no event namespace (the part of every event "
                                      "id that is this database's): run `dedupd migrate` "
                                      "with this configuration, which records one");
        return DD_ERR_CONFIG;
    }
    return DD_OK;
}

/* Records ns (NULL: a random one) on a table that records none. */
static int dd_outbox_record_ns(MYSQL *db, const char *ns, char *errstr, size_t errstr_size)
{
    unsigned char raw[DD_OUTBOX_NS_LEN / 2];
    char comment[2100], have[DD_OUTBOX_NS_LEN + 1], fresh[DD_OUTBOX_NS_LEN + 1];
    dd_buf_t sql = {0}, text = {0};
    int found, rc = dd_outbox_comment(db, comment, sizeof(comment), &found, errstr, errstr_size);

    if (rc || dd_outbox_ns_parse(comment, have) == 0) return rc;
    if (!ns) {
        if (RAND_bytes(raw, sizeof(raw)) != 1) {
            dd_errstr_set(errstr, errstr_size, "no random bytes for the event namespace");
            return DD_ERR_FATAL;
        }
        dd_text_hex(fresh, raw, sizeof(raw), 0);
        fresh[DD_OUTBOX_NS_LEN] = '\0';
        ns = fresh;
    }
    /* what the comment says already stays */
    dd_buf_printf(&text, "%s%s" DD_OUTBOX_NS_TAG "%s", comment, comment[0] ? " " : "", ns);
    dd_buf_puts(&sql, "ALTER TABLE `" DD_OUTBOX_TABLE "` COMMENT = ");
    if (!text.oom) dd_db_quote(&sql, db, text.p, text.len);
    rc = sql.oom || text.oom ? DD_ERR_NOMEM : dd_db_exec_raw(db, sql.p, errstr, errstr_size);
    dd_buf_release(&sql);
    dd_buf_release(&text);
    return rc;
}

int dd_outbox_migrate(MYSQL *db, const char *ns, char *errstr, size_t errstr_size)
{
    /* id orders (and the relay reads by (state, id)); event_id identifies;
     * an event's bytes are bounded by message.max.bytes (1 MB by default,
     * up to 1 GB: LONGBLOB). created: for the age of the oldest unsent.
     * The comment records the event namespace. */
    int rc = dd_db_exec_raw(db,
                            "CREATE TABLE IF NOT EXISTS `" DD_OUTBOX_TABLE "` ("
                            " id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
                            " event_id CHAR(32) CHARACTER SET ascii NOT NULL,"
                            " topic VARCHAR(249) CHARACTER SET ascii NOT NULL,"
                            " msg_key LONGBLOB NULL, msg_value LONGBLOB NULL,"
                            " headers LONGBLOB NULL,"
                            " state TINYINT NOT NULL DEFAULT 0,"
                            " error VARCHAR(512) NULL,"
                            " created DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
                            " UNIQUE KEY uk_event_id (event_id),"
                            " KEY idx_state_id (state, id)"
                            ") ENGINE=InnoDB",
                            errstr, errstr_size);

    return rc ? rc : dd_outbox_record_ns(db, ns, errstr, errstr_size);
}

void dd_outbox_event_id(const char *ns, const char *scope, const char *biz_key, unsigned n,
                        char out[DD_OUTBOX_ID_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    char seq[16];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok;

    snprintf(seq, sizeof(seq), "%u", n);
    /* The NULs keep the parts apart: ("a", "b\0...") never meets ("a\0b", ...). */
    ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
         EVP_DigestUpdate(ctx, ns, strlen(ns) + 1) &&
         EVP_DigestUpdate(ctx, scope, strlen(scope) + 1) &&
         EVP_DigestUpdate(ctx, biz_key, strlen(biz_key) + 1) &&
         EVP_DigestUpdate(ctx, seq, strlen(seq)) && EVP_DigestFinal_ex(ctx, md, &md_len) &&
         md_len >= DD_OUTBOX_ID_LEN / 2;
    EVP_MD_CTX_free(ctx);
    if (!ok) memset(md, 0, sizeof(md)); /* out of memory: the insert meets the duplicate */
    dd_text_hex(out, md, DD_OUTBOX_ID_LEN / 2, 0);
    out[DD_OUTBOX_ID_LEN] = '\0';
}

int dd_outbox_topic_valid(const char *topic)
{
    size_t n = topic ? strlen(topic) : 0;

    if (n == 0 || n > 249 || strcmp(topic, ".") == 0 || strcmp(topic, "..") == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = topic[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

size_t dd_outbox_event_size(const dd_outbox_event_t *ev)
{
    size_t n = ev->key_len + ev->value_len + DD_OUTBOX_RESERVE;

    for (size_t i = 0; i < ev->header_cnt; i++)
        n +=
            (ev->headers[i].name ? strlen(ev->headers[i].name) : 0) + ev->headers[i].value_len + 10;
    return n;
}

int dd_outbox_max_bytes(const dd_conf_t *conf, size_t *max, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    char val[32], err[512];
    size_t len = sizeof(val);
    int rc = DD_ERR_FATAL;

    for (int i = 0; i < conf->kafka.property_cnt; i++) {
        const char *p = conf->kafka.properties[i];
        if (strncmp(p, "message.max.bytes=", 18) == 0 &&
            dd_conf_kafka_set_prop(kconf, p, err, sizeof(err)) != 0) {
            dd_errstr_set(errstr, errstr_size, "outbox: %s", err);
            goto out;
        }
    }
    if (rd_kafka_conf_get(kconf, "message.max.bytes", val, &len) != RD_KAFKA_CONF_OK) {
        dd_errstr_set(errstr, errstr_size, "outbox: cannot read message.max.bytes");
        goto out;
    }
    *max = (size_t)strtoull(val, NULL, 10);
    rc = DD_OK;
out:
    rd_kafka_conf_destroy(kconf);
    return rc;
}

static void dd_outbox_put_u32(dd_buf_t *b, uint32_t v)
{
    unsigned char p[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};

    dd_buf_put(b, p, 4);
}

void dd_outbox_headers_encode(dd_buf_t *b, const dedupd_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *name = h[i].name ? h[i].name : "";
        dd_outbox_put_u32(b, (uint32_t)strlen(name));
        dd_buf_puts(b, name);
        dd_outbox_put_u32(b, h[i].value ? (uint32_t)h[i].value_len : 0xffffffffu);
        if (h[i].value) dd_buf_put(b, h[i].value, h[i].value_len);
    }
}

static int dd_outbox_get_u32(const unsigned char **p, const unsigned char *end, uint32_t *v)
{
    if (end - *p < 4) return -1;
    *v = (uint32_t)(*p)[0] << 24 | (uint32_t)(*p)[1] << 16 | (uint32_t)(*p)[2] << 8 | (*p)[3];
    *p += 4;
    return 0;
}

int dd_outbox_headers_each(const void *blob, size_t len,
                           void (*fn)(void *arg, const char *name, size_t name_len,
                                      const void *value, size_t value_len),
                           void *arg)
{
    const unsigned char *p = blob, *end = p + len;
    uint32_t nl, vl;

    while (p < end) {
        const unsigned char *name;
        if (dd_outbox_get_u32(&p, end, &nl) || (size_t)(end - p) < nl) return -1;
        name = p;
        p += nl;
        if (dd_outbox_get_u32(&p, end, &vl)) return -1;
        if (vl == 0xffffffffu) {
            fn(arg, (const char *)name, nl, NULL, 0);
            continue;
        }
        if ((size_t)(end - p) < vl) return -1;
        fn(arg, (const char *)name, nl, p, vl);
        p += vl;
    }
    return 0;
}

/* X'..' of the bytes, or NULL for none. */
static void dd_outbox_blob(dd_buf_t *b, const void *data, size_t n, int null)
{
    if (null)
        dd_buf_puts(b, "NULL");
    else
        dd_db_hex(b, data, n);
}

int dd_outbox_append(dd_buf_t *stmt, size_t row, const dd_outbox_event_t *ev, char *errstr,
                     size_t errstr_size)
{
    dd_buf_t hdr = {0};
    int oom;

    if (row == 0)
        dd_buf_puts(stmt, "INSERT INTO `" DD_OUTBOX_TABLE
                          "` (event_id, topic, msg_key, msg_value, headers) VALUES ");
    dd_outbox_headers_encode(&hdr, ev->headers, ev->header_cnt);
    dd_buf_printf(stmt, "%s('%s', '%s', ", row ? ", " : "", ev->event_id, ev->topic);
    dd_outbox_blob(stmt, ev->key, ev->key_len, ev->key == NULL);
    dd_buf_puts(stmt, ", ");
    dd_outbox_blob(stmt, ev->value, ev->value_len, ev->value == NULL);
    dd_buf_puts(stmt, ", ");
    dd_outbox_blob(stmt, hdr.p, hdr.len, ev->header_cnt == 0);
    dd_buf_puts(stmt, ")");
    oom = stmt->oom || hdr.oom;
    dd_buf_release(&hdr);
    if (oom) {
        stmt->oom = 1;
        dd_errstr_set(errstr, errstr_size, "emit: out of memory");
        return -1;
    }
    return 0;
}

int dd_outbox_insert(MYSQL *db, const dd_buf_t *stmt, char *errstr, size_t errstr_size)
{
    if (stmt->oom) {
        dd_errstr_set(errstr, errstr_size, "emit: out of memory");
        return -1;
    }
    if (mysql_real_query(db, stmt->p, (unsigned long)stmt->len) != 0) {
        dd_errstr_set(errstr, errstr_size, "emit: inserting into " DD_OUTBOX_TABLE ": %u: %s",
                      mysql_errno(db), mysql_error(db));
        return -1;
    }
    return 0;
}

int dd_outbox_count(MYSQL *db, dd_outbox_count_t *out, char *errstr, size_t errstr_size)
{
    static const char sql[] =
        "SELECT (SELECT COUNT(*) FROM `" DD_OUTBOX_TABLE "` WHERE state = 0),"
        " (SELECT COUNT(*) FROM `" DD_OUTBOX_TABLE "` WHERE state = 1),"
        " COALESCE((SELECT TIMESTAMPDIFF(MICROSECOND, created, NOW(6)) FROM `" DD_OUTBOX_TABLE
        "` WHERE state = 0 ORDER BY id LIMIT 1), 0)";
    MYSQL_RES *res;
    MYSQL_ROW row;

    memset(out, 0, sizeof(*out));
    if (mysql_real_query(db, sql, sizeof(sql) - 1) != 0 || !(res = mysql_store_result(db))) {
        dd_errstr_set(errstr, errstr_size, "counting " DD_OUTBOX_TABLE ": %u: %s", mysql_errno(db),
                      mysql_error(db));
        return mysql_errno(db) ? dd_db_classify(mysql_errno(db)) : DD_ERR_RETRIABLE;
    }
    if ((row = mysql_fetch_row(res)) && row[0] && row[1] && row[2]) {
        out->pending = strtoll(row[0], NULL, 10);
        out->parked = strtoll(row[1], NULL, 10);
        out->oldest_s = strtod(row[2], NULL) / 1e6;
    }
    mysql_free_result(res);
    return DD_OK;
}
