/*
 * The Confluent wire format's header, and Avro binary records decoded into
 * JSON text (see dd_avro.h; the mapping is docs/KEYS.md, Avro).
 *
 * The decoder is written here rather than taken from a library because the
 * mapping must be exact (decimals as decimal digits, never a double; every
 * float as the shortest text that reads back as it) and because every
 * length and count in the input is hostile until checked against the bytes
 * left. It walks the writer schema and the bytes together and writes the
 * JSON text as it goes: nothing is allocated but the text itself.
 */
#include "dd_avro_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "dd_canon.h"
#include "dd_common.h"
#include "dd_utf8.h"

int dd_avro_frame(const void *payload, size_t len, uint32_t *id, const unsigned char **body,
                  size_t *body_len, char *errstr, size_t errstr_size)
{
    const unsigned char *p = payload;

    if (len < DD_AVRO_HEADER_LEN) {
        dd_errstr_set(errstr, errstr_size,
                      "%zu bytes, shorter than the 5-byte header of the Confluent wire format",
                      len);
        return DD_ERR_PERMANENT;
    }
    if (p[0] != 0) {
        dd_errstr_set(errstr, errstr_size,
                      "magic byte 0x%02x at byte 0, not 0x00: not the Confluent wire format", p[0]);
        return DD_ERR_PERMANENT;
    }
    *id = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (*id > 0x7fffffffu) {
        dd_errstr_set(errstr, errstr_size, "schema id %u at byte 1 is 2^31 or more", *id);
        return DD_ERR_PERMANENT;
    }
    *body = p + DD_AVRO_HEADER_LEN;
    *body_len = len - DD_AVRO_HEADER_LEN;
    return DD_OK;
}

/*
 * Decoding
 */

#define DD_AVRO_B64_CHUNK 48 /* bytes base64-encoded at a time: a multiple of 3 */

typedef struct {
    const unsigned char *start, *p, *end;
    dd_canon_w_t w;
    size_t max_text;
    int depth;
    char *errstr;
    size_t errstr_size;
} dd_avro_dec_t;

/* Records the first failure, with the byte it happened at. Returns -1. */
__attribute__((format(printf, 2, 3))) static int dd_avro_bad(dd_avro_dec_t *d, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    dd_errstr_set(d->errstr, d->errstr_size, "%s at byte %zu", what, (size_t)(d->p - d->start));
    return -1;
}

static size_t dd_avro_left(const dd_avro_dec_t *d)
{
    return (size_t)(d->end - d->p);
}

/* A zigzag varint of up to 64 bits. */
static int dd_avro_long(dd_avro_dec_t *d, int64_t *v)
{
    const unsigned char *at = d->p;
    uint64_t u = 0;

    for (int shift = 0;; shift += 7) {
        unsigned char b;
        if (d->p >= d->end) {
            d->p = at;
            return dd_avro_bad(d, "truncated: a number runs past the end");
        }
        b = *d->p++;
        if (shift == 63 && (b & 0xfe)) {
            d->p = at;
            return dd_avro_bad(d, "a number of more than 64 bits");
        }
        u |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

static int dd_avro_int(dd_avro_dec_t *d, int64_t *v)
{
    const unsigned char *at = d->p;

    if (dd_avro_long(d, v)) return -1;
    if (*v < INT32_MIN || *v > INT32_MAX) {
        d->p = at;
        return dd_avro_bad(d, "int %lld out of the 32-bit range", (long long)*v);
    }
    return 0;
}

/* A length (>= 0) of a string or bytes that must fit in the bytes left. */
static int dd_avro_len(dd_avro_dec_t *d, const char *what, size_t *n)
{
    const unsigned char *at = d->p;
    size_t left;
    int64_t v;

    if (dd_avro_long(d, &v)) return -1;
    left = dd_avro_left(d);
    if (v < 0) {
        d->p = at;
        return dd_avro_bad(d, "negative length %lld of a %s", (long long)v, what);
    }
    if ((uint64_t)v > left) {
        d->p = at;
        return dd_avro_bad(d, "%s of %lld bytes declared, only %zu bytes left", what, (long long)v,
                           left);
    }
    *n = (size_t)v;
    return 0;
}

static void dd_avro_puts(dd_avro_dec_t *d, const char *s)
{
    dd_canon_put(&d->w, s, strlen(s));
}

/* The shortest text that reads back as the same value. */
static int dd_avro_real(dd_avro_dec_t *d, int is_float)
{
    unsigned char b[8];
    size_t n = is_float ? 4 : 8;
    char text[40];
    double v;

    if (dd_avro_left(d) < n)
        return dd_avro_bad(d, "truncated: a %s needs %zu bytes", is_float ? "float" : "double", n);
    for (size_t i = 0; i < n; i++)
        b[i] = d->p[i];
    if (is_float) {
        uint32_t u =
            (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        float f;
        memcpy(&f, &u, sizeof(f));
        v = f;
    } else {
        uint64_t u = 0;
        for (int i = 7; i >= 0; i--)
            u = u << 8 | b[i];
        memcpy(&v, &u, sizeof(v));
    }
    if (!isfinite(v))
        return dd_avro_bad(d, "%s %s (JSON has no such number)", is_float ? "float" : "double",
                           isnan(v) ? "NaN" : "infinite");
    d->p += n;
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(text, sizeof(text), "%.*g", prec, v);
        if (is_float ? strtof(text, NULL) == (float)v : strtod(text, NULL) == v) break;
    }
    dd_avro_puts(d, text);
    return 0;
}

static int dd_avro_string(dd_avro_dec_t *d)
{
    const unsigned char *nul;
    size_t n, bad;

    if (dd_avro_len(d, "string", &n)) return -1;
    bad = dd_utf8_check(d->p, n);
    if ((nul = memchr(d->p, 0, bad))) { /* handlers' cJSON would cut the string there */
        d->p = nul;
        return dd_avro_bad(d, "NUL (U+0000) in a string");
    }
    if (bad < n) {
        d->p += bad;
        return dd_avro_bad(d, "invalid UTF-8 in a string");
    }
    dd_canon_string(&d->w, (const char *)d->p, n);
    d->p += n;
    return 0;
}

/* Bytes as a string of their standard base64 with padding (RFC 4648, 4):
 * no NUL, no escape, and one text per value. Encoded 48 bytes at a time,
 * which are 64 characters without padding, so only the last piece pads. */
static void dd_avro_put_bytes(dd_avro_dec_t *d, const unsigned char *s, size_t n)
{
    unsigned char b64[DD_AVRO_B64_CHUNK / 3 * 4 + 1];

    dd_canon_putc(&d->w, '"');
    for (size_t i = 0; i < n; i += DD_AVRO_B64_CHUNK) {
        size_t k = n - i < DD_AVRO_B64_CHUNK ? n - i : DD_AVRO_B64_CHUNK;
        int len = EVP_EncodeBlock(b64, s + i, (int)k);
        dd_canon_put(&d->w, b64, (size_t)len);
    }
    dd_canon_putc(&d->w, '"');
}

/* A decimal: the two's-complement big-endian unscaled value of n bytes,
 * written in decimal with exactly scale digits after the point. */
static int dd_avro_put_decimal(dd_avro_dec_t *d, const unsigned char *s, size_t n, int scale)
{
    unsigned char mag[DD_AVRO_MAX_DECIMAL_BYTES];
    char digits[DD_AVRO_MAX_DECIMAL_BYTES * 3 + 2];
    size_t nd = 0, start = 0;
    int neg = n && (s[0] & 0x80);

    if (n == 0) return dd_avro_bad(d, "a decimal of 0 bytes");
    if (n > DD_AVRO_MAX_DECIMAL_BYTES)
        return dd_avro_bad(d, "a decimal of %zu bytes, at most %d", n, DD_AVRO_MAX_DECIMAL_BYTES);
    for (size_t i = 0; i < n; i++)
        mag[i] = neg ? (unsigned char)~s[i] : s[i];
    for (size_t i = n; neg && i-- > 0;) /* two's complement: invert, add one */
        if (++mag[i] != 0) break;
    while (start < n) { /* divide by 10 until nothing is left: the digits, last first */
        unsigned rem = 0;
        for (size_t i = start; i < n; i++) {
            unsigned cur = rem << 8 | mag[i];
            mag[i] = (unsigned char)(cur / 10);
            rem = cur % 10;
        }
        digits[nd++] = (char)('0' + rem);
        while (start < n && mag[start] == 0)
            start++;
    }
    if (!nd) digits[nd++] = '0';
    if (neg) dd_canon_putc(&d->w, '-');
    if ((size_t)scale >= nd) {
        dd_avro_puts(d, "0.");
        for (size_t i = nd; i < (size_t)scale; i++)
            dd_canon_putc(&d->w, '0');
    }
    for (size_t i = nd; i-- > 0;) {
        dd_canon_putc(&d->w, digits[i]);
        if (i == (size_t)scale && i > 0) dd_canon_putc(&d->w, '.');
    }
    return 0;
}

static int dd_avro_value(dd_avro_dec_t *d, const dd_avro_node_t *node);

static int dd_avro_bytes(dd_avro_dec_t *d, const dd_avro_node_t *node)
{
    size_t n = node->size;

    if (node->type == DD_AVRO_BYTES && dd_avro_len(d, "bytes value", &n)) return -1;
    if (n > dd_avro_left(d))
        return dd_avro_bad(d, "fixed of %zu bytes, only %zu bytes left", n, dd_avro_left(d));
    if (node->decimal) {
        if (dd_avro_put_decimal(d, d->p, n, node->scale)) return -1;
    } else {
        dd_avro_put_bytes(d, d->p, n);
    }
    d->p += n;
    return 0;
}

static int dd_avro_record(dd_avro_dec_t *d, const dd_avro_node_t *node)
{
    dd_canon_putc(&d->w, '{');
    for (size_t i = 0; i < node->cnt; i++) {
        if (i) dd_canon_putc(&d->w, ',');
        dd_canon_putc(&d->w, '"');
        dd_canon_put(&d->w, node->fields[i].name, node->fields[i].name_len);
        dd_canon_put(&d->w, "\":", 2);
        if (dd_avro_value(d, node->fields[i].type)) return -1;
    }
    dd_canon_putc(&d->w, '}');
    return 0;
}

/* Arrays and maps: blocks of items, each a count (negative: its absolute
 * value, then the block's size in bytes), ended by a count of 0. */
static int dd_avro_blocks(dd_avro_dec_t *d, const dd_avro_node_t *node)
{
    int map = node->type == DD_AVRO_MAP;
    size_t min = map ? 1 + node->items->min_size : node->items->min_size, n, first = 1;

    dd_canon_putc(&d->w, map ? '{' : '[');
    for (;;) {
        const unsigned char *at = d->p;
        int64_t cnt, size;
        if (dd_avro_long(d, &cnt)) return -1;
        if (cnt == 0) break;
        if (cnt == INT64_MIN) {
            d->p = at;
            return dd_avro_bad(d, "block count out of range");
        }
        if (cnt < 0) {
            if (dd_avro_long(d, &size)) return -1;
            if (size < 0) {
                d->p = at;
                return dd_avro_bad(d, "negative block size %lld", (long long)size);
            }
            cnt = -cnt;
        }
        if (min && (uint64_t)cnt > dd_avro_left(d) / min) {
            size_t left = dd_avro_left(d);
            d->p = at;
            return dd_avro_bad(d, "%s of %lld items declared, only %zu bytes left",
                               map ? "map block" : "array block", (long long)cnt, left);
        }
        for (n = (size_t)cnt; n > 0; n--, first = 0) {
            if (!first) dd_canon_putc(&d->w, ',');
            if (map && (dd_avro_string(d) || (dd_canon_putc(&d->w, ':'), 0))) return -1;
            if (dd_avro_value(d, node->items)) return -1;
        }
    }
    dd_canon_putc(&d->w, map ? '}' : ']');
    return 0;
}

static int dd_avro_branch(dd_avro_dec_t *d, const dd_avro_node_t *node, int64_t *idx)
{
    const unsigned char *at = d->p;

    if (dd_avro_long(d, idx)) return -1;
    if (*idx < 0 || (uint64_t)*idx >= node->cnt) {
        d->p = at;
        return dd_avro_bad(d, "%s index %lld, the %s has %zu",
                           node->type == DD_AVRO_ENUM ? "enum symbol" : "union branch",
                           (long long)*idx, node->type == DD_AVRO_ENUM ? "enum" : "union",
                           node->cnt);
    }
    return 0;
}

/* A union's value: as it is, or {"branch name": value} when the union is
 * tagged (null is null either way). */
static int dd_avro_union(dd_avro_dec_t *d, const dd_avro_node_t *node, const dd_avro_node_t *branch)
{
    if (!node->tagged || branch->type == DD_AVRO_NULL) return dd_avro_value(d, branch);
    dd_avro_puts(d, "{\"");
    dd_avro_puts(d, dd_avro_branch_name(branch));
    dd_avro_puts(d, "\":");
    if (dd_avro_value(d, branch)) return -1;
    dd_canon_putc(&d->w, '}');
    return 0;
}

static int dd_avro_nested(dd_avro_dec_t *d, const dd_avro_node_t *node)
{
    int64_t idx;
    int rc;

    if (++d->depth > DD_AVRO_MAX_DEPTH)
        return dd_avro_bad(d, "nesting deeper than %d records, arrays, maps and unions",
                           DD_AVRO_MAX_DEPTH);
    switch (node->type) {
    case DD_AVRO_RECORD:
        rc = dd_avro_record(d, node);
        break;
    case DD_AVRO_UNION:
        rc = dd_avro_branch(d, node, &idx) ? -1 : dd_avro_union(d, node, node->branches[idx]);
        break;
    default:
        rc = dd_avro_blocks(d, node);
        break;
    }
    d->depth--;
    return rc;
}

static int dd_avro_value(dd_avro_dec_t *d, const dd_avro_node_t *node)
{
    char num[24];
    int64_t v;

    if (d->w.err) return dd_avro_bad(d, "out of memory");
    if (d->w.len > d->max_text)
        return dd_avro_bad(d, "the record's JSON text is longer than %zu bytes", d->max_text);
    switch (node->type) {
    case DD_AVRO_NULL:
        dd_avro_puts(d, "null");
        return 0;
    case DD_AVRO_BOOLEAN:
        if (!dd_avro_left(d)) return dd_avro_bad(d, "truncated: a boolean runs past the end");
        if (*d->p > 1) return dd_avro_bad(d, "boolean byte 0x%02x, not 0 or 1", *d->p);
        dd_avro_puts(d, *d->p++ ? "true" : "false");
        return 0;
    case DD_AVRO_INT:
    case DD_AVRO_LONG:
        if (node->type == DD_AVRO_INT ? dd_avro_int(d, &v) : dd_avro_long(d, &v)) return -1;
        snprintf(num, sizeof(num), "%lld", (long long)v);
        dd_avro_puts(d, num);
        return 0;
    case DD_AVRO_FLOAT:
    case DD_AVRO_DOUBLE:
        return dd_avro_real(d, node->type == DD_AVRO_FLOAT);
    case DD_AVRO_STRING:
        return dd_avro_string(d);
    case DD_AVRO_BYTES:
    case DD_AVRO_FIXED:
        return dd_avro_bytes(d, node);
    case DD_AVRO_ENUM:
        if (dd_avro_branch(d, node, &v)) return -1;
        dd_canon_string(&d->w, node->symbols[v], node->symbol_lens[v]);
        return 0;
    default:
        return dd_avro_nested(d, node);
    }
}

int dd_avro_decode(const dd_avro_schema_t *schema, const unsigned char *body, size_t len, size_t at,
                   size_t max_text, char **textp, size_t *text_len, char *errstr,
                   size_t errstr_size)
{
    dd_avro_dec_t d = {.start = body - at,
                       .p = body,
                       .end = body + len,
                       .max_text = max_text,
                       .errstr = errstr,
                       .errstr_size = errstr_size};
    int rc = DD_ERR_PERMANENT;

    *textp = NULL;
    *text_len = 0;
    if (dd_avro_value(&d, schema->root)) {
        if (d.w.err) rc = DD_ERR_NOMEM;
        goto out;
    }
    if (d.p != d.end) {
        dd_avro_bad(&d, "%zu bytes left after the record", dd_avro_left(&d));
        goto out;
    }
    if (d.w.len > max_text) {
        dd_avro_bad(&d, "the record's JSON text is longer than %zu bytes", max_text);
        goto out;
    }
    dd_canon_putc(&d.w, '\0');
    if (d.w.err) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
        goto out;
    }
    *textp = d.w.buf;
    *text_len = d.w.len - 1;
    d.w.buf = NULL;
    rc = DD_OK;
out:
    free(d.w.buf);
    return rc;
}
