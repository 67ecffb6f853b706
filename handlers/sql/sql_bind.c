/*
 * The binding rules of the SQL handler (docs/SQL.md, "Values"): what
 * parameter each ${...} gives a statement, for every value a payload can
 * hold.
 *
 * Values come from dedupd's own document of the payload (host->path_value),
 * the one the business key and the request hash were built from, so a
 * number is its exact text, never a double. A number is bound as a
 * DECIMAL parameter: the server then computes with it exactly (balance +
 * ${amount}, stock >= ${qty}), which a string parameter would not (it
 * would be converted to a double). DECIMAL holds 65 digits, 38 of them
 * after the point: a number that does not fit is refused, naming the
 * field, rather than rounded. ${json:...} binds a value's JSON text as
 * written, for a JSON column or a number's exact spelling.
 */
#include "sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQL_ARENA_BLOCK 16384

char *sql_arena_alloc(sql_arena **a, size_t n)
{
    sql_arena *b = *a;

    if (!b || b->cap - b->used < n) {
        size_t cap = n > SQL_ARENA_BLOCK ? n : SQL_ARENA_BLOCK;
        if (!(b = malloc(sizeof(*b))) || !(b->block = malloc(cap))) {
            free(b);
            return NULL;
        }
        b->used = 0;
        b->cap = cap;
        b->next = *a;
        *a = b;
    }
    b->used += n;
    return b->block + b->used - n;
}

void sql_arena_free(sql_arena **a)
{
    while (*a) {
        sql_arena *next = (*a)->next;
        free((*a)->block);
        free(*a);
        *a = next;
    }
}

void sql_buf_put(sql_buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (!(p = realloc(b->p, cap))) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

size_t sql_json_escape(const char *s, size_t n, char *out)
{
    size_t o = 0;

    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, 7, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    return o;
}

int sql_json_value(const dedupd_value *v, sql_buf *b)
{
    char *tmp;

    if (v->type != DEDUPD_VALUE_STRING) {
        sql_buf_put(b, v->text, v->len);
        return b->oom ? -1 : 0;
    }
    if (!(tmp = malloc(6 * v->len + 2))) return -1;
    sql_buf_put(b, tmp, sql_json_escape(v->text, v->len, tmp));
    free(tmp);
    return b->oom ? -1 : 0;
}

/* The k-th digit of a number's digits ip[0..ni) fp[0..nf), '0' outside. */
static char sql_digit(const char *ip, size_t ni, const char *fp, size_t nf, long long k)
{
    if (k < 0 || k >= (long long)(ni + nf)) return '0';
    return k < (long long)ni ? ip[k] : fp[k - (long long)ni];
}

size_t sql_decimal(const char *num, size_t len, char *out)
{
    const char *p = num, *end = num + len, *ip, *fp = NULL;
    size_t ni, nf = 0, o = 0;
    long long e = 0, point, nd, from = 0, to, scale;
    int neg = p < end && *p == '-', eneg = 0;

    p += neg;
    for (ip = p; p < end && *p >= '0' && *p <= '9'; p++)
        ;
    ni = (size_t)(p - ip);
    if (p < end && *p == '.')
        for (fp = ++p; p < end && *p >= '0' && *p <= '9'; p++)
            nf++;
    if (p < end && (*p == 'e' || *p == 'E')) {
        if (++p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        for (; p < end; p++)
            if (e < 1000000000000LL) e = e * 10 + (*p - '0');
    }
    nd = (long long)(ni + nf);
    point = (long long)ni + (eneg ? -e : e); /* digits before the point */
    while (from < nd && sql_digit(ip, ni, fp, nf, from) == '0')
        from++;
    if (from == nd || from > point) from = point; /* the integer part's first digit, or none */
    to = nd > point ? nd : point;
    while (to - point > SQL_DEC_SCALE && sql_digit(ip, ni, fp, nf, to - 1) == '0')
        to--;
    scale = to > point ? to - point : 0;
    if (scale > SQL_DEC_SCALE || (point > from ? point - from : 0) + scale > SQL_DEC_DIGITS)
        return 0;
    if (neg) out[o++] = '-';
    if (point <= from) out[o++] = '0';
    for (long long k = from; k < point; k++)
        out[o++] = sql_digit(ip, ni, fp, nf, k);
    if (scale) out[o++] = '.';
    for (long long k = point; k < to; k++)
        out[o++] = sql_digit(ip, ni, fp, nf, k);
    return o;
}

/* A number as a DECIMAL parameter: its own text when it is plain (no
 * exponent) and fits, else its plain text written into the arena. */
static int sql_bind_number(const dedupd_value *v, sql_param *p, sql_arena **arena)
{
    char buf[SQL_DEC_TEXT], *out;
    size_t n = sql_decimal(v->text, v->len, buf);

    if (!n) return -1;
    p->type = SQL_P_DECIMAL;
    if (n == v->len && memcmp(buf, v->text, n) == 0) {
        p->text = v->text;
        p->len = n;
        return 0;
    }
    if (!(out = sql_arena_alloc(arena, n))) return -2;
    memcpy(out, buf, n);
    p->text = out;
    p->len = n;
    return 0;
}

/* A placeholder that reads the message, not its payload (${@key}, ...). */
static int sql_bind_meta(const sql_ph *ph, const dedupd_msg *msg, sql_param *p, sql_arena **arena)
{
    char *out;

    switch (ph->meta) {
    case SQL_META_KEY:
        *p = (sql_param){SQL_P_STRING, msg->biz_key, strlen(msg->biz_key)};
        return 0;
    case SQL_META_TOPIC:
        *p = (sql_param){SQL_P_STRING, msg->topic, strlen(msg->topic)};
        return 0;
    default: /* partition, offset */
        if (!(out = sql_arena_alloc(arena, 24))) return -1;
        p->len = (size_t)snprintf(out, 24, "%lld",
                                  ph->meta == SQL_META_PARTITION ? (long long)msg->partition
                                                                 : (long long)msg->offset);
        p->type = SQL_P_DECIMAL;
        p->text = out;
        return 0;
    }
}

/* The value v of a scalar placeholder (not ${json:...}). */
static int sql_bind_scalar(const sql_ph *ph, const char *src, const dedupd_value *v, sql_param *p,
                           sql_arena **arena, char *err, size_t err_size)
{
    int rc;

    switch (v->type) {
    case DEDUPD_VALUE_NULL:
        *p = (sql_param){SQL_P_NULL, NULL, 0};
        return 0;
    case DEDUPD_VALUE_TRUE:
    case DEDUPD_VALUE_FALSE:
        *p = (sql_param){SQL_P_DECIMAL, v->type == DEDUPD_VALUE_TRUE ? "1" : "0", 1};
        return 0;
    case DEDUPD_VALUE_STRING:
        *p = (sql_param){SQL_P_STRING, v->text, v->len};
        return 0;
    case DEDUPD_VALUE_NUMBER:
        if ((rc = sql_bind_number(v, p, arena)) == 0) return 0;
        if (rc == -2)
            snprintf(err, err_size, "out of memory");
        else
            snprintf(err, err_size,
                     "field %.*s: the number %.*s%s does not fit a DECIMAL (%d digits, %d after "
                     "the point)",
                     (int)ph->len, src + ph->at, (int)(v->len > 40 ? 40 : v->len), v->text,
                     v->len > 40 ? "..." : "", SQL_DEC_DIGITS, SQL_DEC_SCALE);
        return -1;
    default:
        snprintf(err, err_size, "field %.*s is %s: ${json:%.*s} binds its JSON text", (int)ph->len,
                 src + ph->at, v->type == DEDUPD_VALUE_ARRAY ? "an array" : "an object",
                 (int)ph->len, src + ph->at);
        return -1;
    }
}

int sql_bind(const sql_state *st, const char *src, const sql_ph *ph, const dedupd_msg *msg,
             sql_param *p, sql_arena **arena, char *err, size_t err_size)
{
    dedupd_value v;

    if (ph->meta) {
        if (sql_bind_meta(ph, msg, p, arena) == 0) return 0;
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    if (st->host->path_value(st->host, msg, ph->path, &v, err, err_size) != 0) return -1;
    if (v.type == DEDUPD_VALUE_MISSING) {
        if (!ph->optional) return -1; /* err says why */
        *p = (sql_param){SQL_P_NULL, NULL, 0};
        return 0;
    }
    if (ph->json && v.type != DEDUPD_VALUE_STRING) {
        *p = (sql_param){SQL_P_STRING, v.text, v.len};
        return 0;
    }
    if (ph->json) { /* a string's JSON text: written again, with its quotes */
        char *out = sql_arena_alloc(arena, 6 * v.len + 2);
        if (!out) {
            snprintf(err, err_size, "out of memory");
            return -1;
        }
        *p = (sql_param){SQL_P_STRING, out, sql_json_escape(v.text, v.len, out)};
        return 0;
    }
    return sql_bind_scalar(ph, src, &v, p, arena, err, err_size);
}

int sql_bind_all(const sql_state *st, const sql_text *t, const dedupd_msg *msg, sql_param *p,
                 sql_arena **arena, char *err, size_t err_size)
{
    for (size_t k = 0; k < t->ph_cnt; k++)
        if (sql_bind(st, t->src, &t->ph[k], msg, &p[k], arena, err, err_size)) return -1;
    return 0;
}
