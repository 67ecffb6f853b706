/*
 * Canonical numbers and canonical JSON (see dd_canon.h).
 *
 * Everything runs for every message (the request hash covers the whole
 * payload by default), so the writer copies runs of plain bytes in one go
 * and takes each object's member order from the document, where the parser
 * left it sorted: canonicalising allocates nothing.
 */
#include "dd_canon.h"

#include <stdint.h>
#include <stdlib.h>

#include "dd_common.h"
#include "dd_text.h"

/* Integers keep their trailing zeros up to this exponent, decimals their
 * leading zeros down to its negative; beyond, the text uses 'e'. */
#define DD_CANON_PLAIN_EXP 32

static const char dd_canon_zeros[DD_CANON_PLAIN_EXP + 1] = "00000000000000000000000000000000";

/*
 * Writer
 */

static void dd_canon_fail(dd_canon_w_t *w, int err)
{
    w->err = err;
    w->len = 0;
    w->cap = 0; /* every later put takes the slow path, which drops it */
}

static int dd_canon_grow(dd_canon_w_t *w, size_t n)
{
    size_t cap = w->cap ? w->cap : 256;
    char *buf;

    while (cap < w->len + n)
        cap *= 2;
    if (!(buf = realloc(w->buf, cap))) return -1;
    w->buf = buf;
    w->cap = cap;
    return 0;
}

void dd_canon_put_slow(dd_canon_w_t *w, const void *p, size_t n)
{
    int rc;

    if (!n || w->err) return;
    if (w->drain) {
        if (w->len && (rc = w->drain(w, w->buf, w->len))) {
            dd_canon_fail(w, rc);
            return;
        }
        w->len = 0;
        if (n > w->cap) {
            if ((rc = w->drain(w, p, n))) dd_canon_fail(w, rc);
            return;
        }
    } else if (dd_canon_grow(w, n) < 0) {
        dd_canon_fail(w, DD_ERR_NOMEM);
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

/*
 * Numbers
 */

/* Digits [from, to) of D, which are d1 then d2. */
static void dd_canon_digits(dd_canon_w_t *w, const dd_json_num_t *num, size_t from, size_t to)
{
    if (from < num->n1) dd_canon_put(w, num->d1 + from, (to < num->n1 ? to : num->n1) - from);
    if (to > num->n1) {
        size_t s = from > num->n1 ? from - num->n1 : 0;

        dd_canon_put(w, num->d2 + s, to - num->n1 - s);
    }
}

static void dd_canon_int64(dd_canon_w_t *w, int64_t v)
{
    char tmp[24];
    size_t n = sizeof(tmp);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

    do {
        tmp[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) tmp[--n] = '-';
    dd_canon_put(w, tmp + n, sizeof(tmp) - n);
}

void dd_canon_number(dd_canon_w_t *w, const char *text, size_t len)
{
    dd_json_num_t num;
    size_t nd;

    dd_json_num_parts(text, len, &num);
    nd = num.n1 + num.n2;
    if (nd == 0) {
        dd_canon_putc(w, '0');
        return;
    }
    if (num.neg) dd_canon_putc(w, '-');
    if (num.exp >= 0 && num.exp <= DD_CANON_PLAIN_EXP) {
        dd_canon_digits(w, &num, 0, nd);
        dd_canon_put(w, dd_canon_zeros, (size_t)num.exp);
    } else if (num.exp < 0 && num.exp >= -DD_CANON_PLAIN_EXP) {
        size_t frac = (size_t)-num.exp; /* digits after the point */

        if (nd > frac) {
            dd_canon_digits(w, &num, 0, nd - frac);
            dd_canon_putc(w, '.');
            dd_canon_digits(w, &num, nd - frac, nd);
        } else {
            dd_canon_put(w, "0.", 2);
            dd_canon_put(w, dd_canon_zeros, frac - nd);
            dd_canon_digits(w, &num, 0, nd);
        }
    } else {
        dd_canon_digits(w, &num, 0, nd);
        dd_canon_putc(w, 'e');
        dd_canon_int64(w, num.exp);
    }
}

/*
 * Strings
 */

void dd_canon_string(dd_canon_w_t *w, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len, *run;

    dd_canon_putc(w, '"');
    for (;;) {
        char esc[6];

        run = p;
        while (p < end && dd_text_json_plain[*p])
            p++;
        dd_canon_put(w, run, (size_t)(p - run));
        if (p == end) break;
        dd_canon_put(w, esc, dd_text_json_escape(*p++, esc));
    }
    dd_canon_putc(w, '"');
}

/*
 * Values. The recursion is bounded by DD_JSON_MAX_DEPTH: dd_json refuses
 * deeper documents.
 */

void dd_canon_value(dd_canon_w_t *w, const dd_json_doc_t *doc, const dd_json_node_t *node)
{
    const dd_json_node_t *c;
    uint32_t i;

    switch ((dd_json_type_t)node->type) {
    case DD_JSON_NULL:
        dd_canon_put(w, "null", 4);
        break;
    case DD_JSON_FALSE:
        dd_canon_put(w, "false", 5);
        break;
    case DD_JSON_TRUE:
        dd_canon_put(w, "true", 4);
        break;
    case DD_JSON_NUMBER:
        dd_canon_number(w, node->str, node->len);
        break;
    case DD_JSON_STRING:
        dd_canon_string(w, node->str, node->len);
        break;
    case DD_JSON_ARRAY:
        dd_canon_putc(w, '[');
        for (i = 0, c = node + 1; i < node->len && !w->err; i++, c = dd_json_next(c)) {
            if (i) dd_canon_putc(w, ',');
            dd_canon_value(w, doc, c);
        }
        dd_canon_putc(w, ']');
        break;
    case DD_JSON_OBJECT:
        dd_canon_putc(w, '{');
        for (i = 0; i < node->len && !w->err; i++) {
            c = dd_json_member_sorted(doc, node, i);
            if (i) dd_canon_putc(w, ',');
            dd_canon_string(w, c->name, c->name_len);
            dd_canon_putc(w, ':');
            dd_canon_value(w, doc, c);
        }
        dd_canon_putc(w, '}');
        break;
    }
}

int dd_canon_text(const dd_json_doc_t *doc, const dd_json_node_t *node, char **outp,
                  size_t *out_len)
{
    dd_canon_w_t w = {0};

    *outp = NULL;
    if (out_len) *out_len = 0;
    dd_canon_value(&w, doc, node);
    dd_canon_putc(&w, '\0');
    if (w.err) {
        free(w.buf);
        return w.err;
    }
    *outp = w.buf;
    if (out_len) *out_len = w.len - 1;
    return 0;
}
