/*
 * Canonical text of JSON values, from a strict dd_json document: what the
 * request hash covers and what a number in a business key renders as.
 *
 * Equal values give the same text and different values different texts, so
 * a producer that re-serialises a payload (member order, whitespace,
 * escapes, number spelling) does not turn a duplicate into a conflict, and
 * no two different payloads share a hash. The rules (docs/KEYS.md):
 *
 * Numbers, by exact decimal value (never a double): with the value written
 * +-D x 10^e, D an integer without leading or trailing zeros,
 *   - zero (0, -0, 0.0, 0e5) is "0";
 *   - 0 <= e <= 32: the digits of D and e zeros ("7" for 7, 7.0, 7e0 and
 *     0.7e1; "9007199254740993" stays exact);
 *   - -32 <= e < 0: a plain decimal ("1.5", "0.001", "-123.45");
 *   - otherwise D, 'e', then e in decimal ("1e400", "-1e400", "15e-301",
 *     "1e33");
 *   - a '-' in front of a negative value.
 * JSON: objects with members in bytewise order of their decoded names, arrays
 * in order, no whitespace, true/false/null, numbers as above, strings with
 * every code point kept (NUL too): '"' and '\' as \" and \\, code points
 * below 0x20 as \b \f \n \r \t or \u00XX (lower-case hex), everything else
 * raw UTF-8. The canonical text is itself accepted by dd_json and is its
 * own canonical form.
 */
#ifndef DD_CANON_H
#define DD_CANON_H

#include <stddef.h>
#include <string.h>

#include "dd_json.h"

/* Where canonical text goes: bytes gather in buf (cap bytes); when the next
 * piece does not fit, drain gets the buffered bytes and then, if it is
 * bigger than the buffer, the piece itself. Without drain the buffer grows
 * on the heap (malloc'd text). The first error sticks in err and drops
 * everything after it. */
typedef struct dd_canon_w_s {
    char *buf;
    size_t len, cap;
    int (*drain)(struct dd_canon_w_s *w, const void *p, size_t n); /* 0 or a dd_err_t */
    void *ctx;
    int err;
} dd_canon_w_t;

void dd_canon_put_slow(dd_canon_w_t *w, const void *p, size_t n);

static inline void dd_canon_put(dd_canon_w_t *w, const void *p, size_t n)
{
    /* 1 <= n <= cap - len (len <= cap always holds); an empty piece takes
     * the slow path, so buf may be NULL while nothing is written. */
    if (n - 1 < w->cap - w->len) {
        memcpy(w->buf + w->len, p, n);
        w->len += n;
    } else {
        dd_canon_put_slow(w, p, n);
    }
}

static inline void dd_canon_putc(dd_canon_w_t *w, char c)
{
    if (w->len < w->cap)
        w->buf[w->len++] = c;
    else
        dd_canon_put_slow(w, &c, 1);
}

/* The canonical text of a number accepted by dd_json (a NUMBER node's text). */
void dd_canon_number(dd_canon_w_t *w, const char *text, size_t len);

/* A string's decoded bytes as a canonical JSON string, quotes included. */
void dd_canon_string(dd_canon_w_t *w, const char *s, size_t len);

/* The canonical JSON of node (a value of doc). */
void dd_canon_value(dd_canon_w_t *w, const dd_json_doc_t *doc, const dd_json_node_t *node);

/* The canonical JSON of node as malloc'd text, NUL-terminated (*out_len
 * bytes before it; canonical text never holds a raw NUL, strings escape
 * it). Returns 0 or DD_ERR_NOMEM. */
int dd_canon_text(const dd_json_doc_t *doc, const dd_json_node_t *node, char **outp,
                  size_t *out_len);

#endif /* DD_CANON_H */
