/*
 * The strict JSON parser (see dd_json.h).
 *
 * Why our own: cJSON reads numbers into doubles (9007199254740993 becomes
 * ...992), stops strings at NUL, accepts raw control characters, leading
 * zeros and "7.", and keeps every duplicate member. Each of those let two
 * different payments share a business key or a request hash. cJSON still
 * builds the tree handlers read, so what it cannot hold as it is, a NUL in
 * a string or a name, is refused here: the handler would read less than
 * the key and hash saw.
 *
 * The parser is iterative (an explicit stack of open containers, bounded by
 * DD_JSON_MAX_DEPTH) and writes nodes into one growable array per document,
 * so a parse allocates nothing once the document has grown to the size of
 * the messages it sees. Each object's members are sorted by name when the
 * object closes: that finds duplicates, and gives lookups a binary search
 * and the canonical writer its order without sorting again per hash.
 */
#include "dd_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_text.h"
#include "dd_utf8.h"

/* Buffers larger than this are given back when a much smaller text comes,
 * so one huge payload does not pin its memory for the life of a thread. */
#define DD_JSON_KEEP_BYTES (1024 * 1024)
/* Member lists up to this long are sorted by insertion; longer ones merge. */
#define DD_JSON_ISORT_MAX 16

struct dd_json_doc_s {
    dd_json_node_t *nodes;
    uint32_t node_cnt, node_cap;
    uint32_t *order; /* each object's member node indexes, sorted by name */
    uint32_t order_cnt, order_cap;
    uint32_t *members; /* members of the objects still open, then sort scratch */
    uint32_t member_cnt, member_cap;
    char *strs; /* decoded strings that had escapes; never moves during a parse */
    size_t strs_cap;
    size_t strs_len;  /* bytes of strs the last parse used */
    const char *text; /* the text of the last parse, text_len bytes */
    size_t text_len;
    int ok; /* the last parse succeeded */
};

typedef struct {
    dd_json_doc_t *doc;
    const unsigned char *text, *p, *end;
    size_t strs_len;
    char *errstr;
    size_t errstr_size;
    int err;
    const char *name; /* member name waiting for its value */
    uint32_t name_len, name_at;
    int in_name; /* the string being scanned is a member name */
    uint32_t depth;
    uint32_t open[DD_JSON_MAX_DEPTH];  /* node index of each open container */
    uint32_t mbase[DD_JSON_MAX_DEPTH]; /* an open object's first entry in doc->members */
} dd_json_parser_t;

/* 1 for the bytes a string holds as they are: not '"', '\\' or a control. */
#define DD_JSON_PLAIN16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
static const unsigned char dd_json_plain[256] = {0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0, /* 0x00: controls */
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0,
                                                 0, /* 0x10: controls */
                                                 1,
                                                 1,
                                                 0,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1, /* 0x20: '"' */
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16, /* 0x30, 0x40 */
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 1,
                                                 0,
                                                 1,
                                                 1,
                                                 1, /* 0x50: '\\' */
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16,
                                                 DD_JSON_PLAIN16};
#undef DD_JSON_PLAIN16

/*
 * Document memory
 */

dd_json_doc_t *dd_json_doc_new(void)
{
    return calloc(1, sizeof(dd_json_doc_t));
}

void dd_json_doc_destroy(dd_json_doc_t *doc)
{
    if (!doc) return;
    free(doc->nodes);
    free(doc->order);
    free(doc->members);
    free(doc->strs);
    free(doc);
}

/* Drops buffers far bigger than a text of len bytes can need (a text has
 * at most len / 2 + 1 values, and no more decoded string bytes than len). */
static void dd_json_doc_trim(dd_json_doc_t *doc, size_t len)
{
    if ((size_t)doc->node_cap * sizeof(*doc->nodes) > DD_JSON_KEEP_BYTES && doc->node_cap > len) {
        free(doc->nodes);
        free(doc->order);
        free(doc->members);
        doc->nodes = NULL;
        doc->order = doc->members = NULL;
        doc->node_cap = doc->order_cap = doc->member_cap = 0;
    }
    if (doc->strs_cap > DD_JSON_KEEP_BYTES && doc->strs_cap / 4 > len) {
        free(doc->strs);
        doc->strs = NULL;
        doc->strs_cap = 0;
    }
}

/* Makes room for need uint32_t in *arr (capacity *cap), doubling. */
static int dd_json_grow_u32(uint32_t **arr, uint32_t *cap, uint32_t need)
{
    uint32_t n = *cap ? *cap : 64;
    uint32_t *p;

    while (n < need)
        n *= 2;
    if (n == *cap) return 0;
    if (!(p = realloc(*arr, (size_t)n * sizeof(*p)))) return -1;
    *arr = p;
    *cap = n;
    return 0;
}

/*
 * Errors
 */

static int dd_json_fail(dd_json_parser_t *ps, const unsigned char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the first error: what, then " at byte N". */
static int dd_json_fail(dd_json_parser_t *ps, const unsigned char *at, const char *fmt, ...)
{
    char what[160];
    va_list ap;

    if (ps->err) return ps->err;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    dd_errstr_set(ps->errstr, ps->errstr_size, "%s at byte %zu", what, (size_t)(at - ps->text));
    ps->err = DD_ERR_PERMANENT;
    return ps->err;
}

static int dd_json_nomem(dd_json_parser_t *ps)
{
    if (!ps->err) {
        dd_errstr_set(ps->errstr, ps->errstr_size, "out of memory parsing JSON");
        ps->err = DD_ERR_NOMEM;
    }
    return ps->err;
}

/* "unexpected character 'x'" or "unexpected byte 0xc3", or end of text. */
static int dd_json_unexpected(dd_json_parser_t *ps, const char *expected)
{
    const unsigned char *p = ps->p;

    if (p >= ps->end) return dd_json_fail(ps, p, "unexpected end of text (expected %s)", expected);
    if ((*p == '+' || *p == '.') && !strcmp(expected, "a value"))
        return dd_json_fail(ps, p, "a number cannot start with '%c'", *p);
    if (*p > 0x20 && *p < 0x7f)
        return dd_json_fail(ps, p, "unexpected character '%c' (expected %s)", *p, expected);
    return dd_json_fail(ps, p, "unexpected byte 0x%02x (expected %s)", *p, expected);
}

/*
 * Scanning
 */

static inline void dd_json_ws(dd_json_parser_t *ps)
{
    const unsigned char *p = ps->p, *end = ps->end;

    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    ps->p = p;
}

static inline int dd_json_digit(const unsigned char *p, const unsigned char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

static int dd_json_hex4(const unsigned char *p, const unsigned char *end, uint32_t *out)
{
    uint32_t v = 0;
    int i;

    if (end - p < 4) return -1;
    for (i = 0; i < 4; i++) {
        unsigned char c = p[i];

        if (c >= '0' && c <= '9')
            v = v * 16 + (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v = v * 16 + (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t dd_json_utf8_put(char *dst, uint32_t cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xe0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Decodes the \u escape at p (p[0] == '\\', p[1] == 'u') into dst; a high
 * surrogate must be followed by an escaped low one. Returns the bytes
 * written, or 0 after recording the error. */
static size_t dd_json_unicode(dd_json_parser_t *ps, const unsigned char **pp, char *dst)
{
    const unsigned char *p = *pp;
    uint32_t cp, lo;

    if (dd_json_hex4(p + 2, ps->end, &cp) < 0) {
        dd_json_fail(ps, p, "invalid \\u escape (expected 4 hex digits)");
        return 0;
    }
    if (cp == 0) {
        /* cJSON, whose tree handlers read, ends a string at a NUL: a
         * handler would read another value than the key was built from. */
        dd_json_fail(ps, p, "NUL (\\u0000) in a %s", ps->in_name ? "member name" : "string");
        return 0;
    }
    if (cp >= 0xdc00 && cp <= 0xdfff) {
        dd_json_fail(ps, p, "lone low surrogate \\u%04x in a \\u escape", cp);
        return 0;
    }
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (ps->end - p < 12 || p[6] != '\\' || p[7] != 'u' ||
            dd_json_hex4(p + 8, ps->end, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff) {
            dd_json_fail(ps, p, "lone high surrogate \\u%04x in a \\u escape", cp);
            return 0;
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        p += 6;
    }
    *pp = p + 6;
    return dd_json_utf8_put(dst, cp);
}

/* The rest of a string whose first escape is at p: decoded into doc->strs
 * from the bytes start..p already scanned. */
static int dd_json_string_escaped(dd_json_parser_t *ps, const unsigned char *start,
                                  const unsigned char *p, const char **out, uint32_t *out_len)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    dd_json_doc_t *doc = ps->doc;
    const unsigned char *end = ps->end;
    char *dst0, *dst;

    /* Decoded text is never longer than its escaped form, so a buffer the
     * size of the whole text holds every string of it: allocated at the
     * first escape of a parse, before anything points into it. */
    if (doc->strs_cap < (size_t)(end - ps->text)) {
        char *s = realloc(doc->strs, (size_t)(end - ps->text));

        if (!s) return dd_json_nomem(ps);
        doc->strs = s;
        doc->strs_cap = (size_t)(end - ps->text);
    }
    dst0 = dst = doc->strs + ps->strs_len;
    memcpy(dst, start, (size_t)(p - start));
    dst += p - start;
    for (;;) {
        const unsigned char *run = p;
        const char *f;

        while (p < end && dd_json_plain[*p])
            p++;
        memcpy(dst, run, (size_t)(p - run));
        dst += p - run;
        if (p >= end) return dd_json_fail(ps, start - 1, "unterminated string");
        if (*p == '"') break;
        if (*p < 0x20) return dd_json_fail(ps, p, "raw control character 0x%02x in a string", *p);
        /* *p == '\\' */
        if (p + 1 >= end) return dd_json_fail(ps, start - 1, "unterminated string");
        if (p[1] == 'u') {
            size_t n = dd_json_unicode(ps, &p, dst);

            if (!n) return ps->err;
            dst += n;
        } else if (p[1] != '\0' && (f = strchr(from, p[1]))) {
            *dst++ = to[f - from];
            p += 2;
        } else if (p[1] > 0x20 && p[1] < 0x7f) {
            return dd_json_fail(ps, p, "invalid escape \\%c in a string", p[1]);
        } else {
            return dd_json_fail(ps, p, "invalid escape (byte 0x%02x after \\) in a string", p[1]);
        }
    }
    ps->p = p + 1;
    ps->strs_len += (size_t)(dst - dst0);
    *out = dst0;
    *out_len = (uint32_t)(dst - dst0);
    return 0;
}

/* The string at ps->p (on its '"'). Without escapes it stays in the text. */
static int dd_json_string(dd_json_parser_t *ps, const char **out, uint32_t *out_len)
{
    const unsigned char *start = ps->p + 1, *p = start, *end = ps->end;

    while (p < end && dd_json_plain[*p])
        p++;
    if (p < end && *p == '"') {
        *out = (const char *)start;
        *out_len = (uint32_t)(p - start);
        ps->p = p + 1;
        return 0;
    }
    if (p >= end) return dd_json_fail(ps, start - 1, "unterminated string");
    if (*p < 0x20) return dd_json_fail(ps, p, "raw control character 0x%02x in a string", *p);
    return dd_json_string_escaped(ps, start, p, out, out_len);
}

/* Scans the number at ps->p (on '-' or a digit) against RFC 8259's
 * grammar and the exponent limits. */
static int dd_json_number(dd_json_parser_t *ps, uint32_t *len)
{
    const unsigned char *start = ps->p, *p = start, *end = ps->end;
    int has_exp = 0;

    if (*p == '-') p++;
    if (!dd_json_digit(p, end)) return dd_json_fail(ps, start, "no digit after '-' in a number");
    if (*p == '0') {
        p++;
        if (dd_json_digit(p, end)) return dd_json_fail(ps, start, "leading zero in a number");
    } else {
        while (dd_json_digit(p, end))
            p++;
    }
    if (p < end && *p == '.') {
        p++;
        if (!dd_json_digit(p, end))
            return dd_json_fail(ps, start, "no digit after '.' in a number");
        while (dd_json_digit(p, end))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        const unsigned char *sig;

        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!dd_json_digit(p, end))
            return dd_json_fail(ps, start, "no digit in the exponent of a number");
        while (p < end && *p == '0')
            p++;
        sig = p;
        while (dd_json_digit(p, end))
            p++;
        if (p - sig > DD_JSON_MAX_EXP_DIGITS)
            return dd_json_fail(ps, start, "exponent out of range in a number (at most %d digits)",
                                DD_JSON_MAX_EXP_DIGITS);
        has_exp = 1;
    }
    /* Without an exponent part |e| is below the text's length. */
    if (has_exp || p - start > DD_JSON_MAX_EXP) {
        dd_json_num_t num;

        dd_json_num_parts((const char *)start, (size_t)(p - start), &num);
        if (num.exp > DD_JSON_MAX_EXP || num.exp < -DD_JSON_MAX_EXP)
            return dd_json_fail(ps, start,
                                "number out of range (its exponent, for an integer "
                                "significand, is beyond +-%d)",
                                DD_JSON_MAX_EXP);
    }
    *len = (uint32_t)(p - start);
    ps->p = p;
    return 0;
}

/*
 * Building the document
 */

/* A new node for the value at ps->p, as a child of the open container. */
static dd_json_node_t *dd_json_node_new(dd_json_parser_t *ps, dd_json_type_t type)
{
    dd_json_doc_t *doc = ps->doc;
    dd_json_node_t *n;
    uint32_t idx = doc->node_cnt;

    if (idx == doc->node_cap) {
        uint32_t cap = doc->node_cap ? doc->node_cap * 2 : 64;
        dd_json_node_t *nodes = realloc(doc->nodes, (size_t)cap * sizeof(*nodes));

        if (!nodes) {
            dd_json_nomem(ps);
            return NULL;
        }
        doc->nodes = nodes;
        doc->node_cap = cap;
    }
    n = &doc->nodes[doc->node_cnt++];
    n->str = NULL;
    n->name = NULL;
    n->len = n->name_len = n->order = 0;
    n->skip = 1;
    n->at = (uint32_t)(ps->p - ps->text);
    n->type = (uint8_t)type;
    if (ps->depth > 0) {
        dd_json_node_t *parent = &doc->nodes[ps->open[ps->depth - 1]];

        parent->len++;
        if (parent->type == DD_JSON_OBJECT) {
            if (doc->member_cnt == doc->member_cap &&
                dd_json_grow_u32(&doc->members, &doc->member_cap, doc->member_cnt + 1) < 0) {
                dd_json_nomem(ps);
                return NULL;
            }
            doc->members[doc->member_cnt++] = idx;
            n->name = ps->name;
            n->name_len = ps->name_len;
            n->at = ps->name_at;
        }
    }
    return n;
}

static int dd_json_member_cmp(const dd_json_node_t *nodes, uint32_t x, uint32_t y)
{
    const dd_json_node_t *a = &nodes[x], *b = &nodes[y];

    /* Names mostly differ in their first byte: settle those without a call. */
    if (a->name_len && b->name_len && a->name[0] != b->name[0])
        return (unsigned char)a->name[0] - (unsigned char)b->name[0];
    return dd_text_cmp(a->name, a->name_len, b->name, b->name_len);
}

static void dd_json_isort(const dd_json_node_t *nodes, uint32_t *m, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        uint32_t k = m[i], j;

        for (j = i; j > 0 && dd_json_member_cmp(nodes, m[j - 1], k) > 0; j--)
            m[j] = m[j - 1];
        m[j] = k;
    }
}

/* Merge sort of m[0..n) with tmp[0..n); stable, though names are unique
 * by the time it matters. */
static void dd_json_msort(const dd_json_node_t *nodes, uint32_t *m, uint32_t *tmp, uint32_t n)
{
    uint32_t mid = n / 2, i = 0, j = mid, o = 0;

    if (n <= DD_JSON_ISORT_MAX) {
        dd_json_isort(nodes, m, n);
        return;
    }
    dd_json_msort(nodes, m, tmp, mid);
    dd_json_msort(nodes, m + mid, tmp, n - mid);
    if (dd_json_member_cmp(nodes, m[mid - 1], m[mid]) <= 0) return; /* already in order */
    while (i < mid && j < n)
        tmp[o++] = dd_json_member_cmp(nodes, m[j], m[i]) < 0 ? m[j++] : m[i++];
    while (i < mid)
        tmp[o++] = m[i++];
    memcpy(m, tmp, (size_t)o * sizeof(*m));
}

static int dd_json_printable(const char *s, size_t n)
{
    if (n > 40) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\') return 0;
    return 1;
}

/* Sorts the closing object's members by name, refuses duplicates, and
 * files the order under the object. */
static int dd_json_object_close(dd_json_parser_t *ps, uint32_t idx)
{
    dd_json_doc_t *doc = ps->doc;
    uint32_t base = ps->mbase[ps->depth - 1], n = doc->member_cnt - base, *m;

    if (n == 0) { /* an empty object may come before any member was allocated */
        doc->nodes[idx].order = doc->order_cnt;
        return 0;
    }
    if (n > DD_JSON_ISORT_MAX &&
        dd_json_grow_u32(&doc->members, &doc->member_cap, doc->member_cnt + n) < 0)
        return dd_json_nomem(ps);
    if (doc->order_cap - doc->order_cnt < n &&
        dd_json_grow_u32(&doc->order, &doc->order_cap, doc->order_cnt + n) < 0)
        return dd_json_nomem(ps);
    m = doc->members + base;
    dd_json_msort(doc->nodes, m, m + n, n);
    for (uint32_t i = 1; i < n; i++) {
        const dd_json_node_t *a = &doc->nodes[m[i - 1]], *b = &doc->nodes[m[i]];

        if (dd_json_member_cmp(doc->nodes, m[i - 1], m[i]) == 0) {
            uint32_t first = a->at < b->at ? a->at : b->at, second = a->at ^ b->at ^ first;

            if (dd_json_printable(a->name, a->name_len))
                return dd_json_fail(ps, ps->text + second,
                                    "duplicate member name \"%.*s\" (first at byte %u)",
                                    (int)a->name_len, a->name, first);
            return dd_json_fail(ps, ps->text + second, "duplicate member name (first at byte %u)",
                                first);
        }
    }
    memcpy(doc->order + doc->order_cnt, m, (size_t)n * sizeof(*m));
    doc->nodes[idx].order = doc->order_cnt;
    doc->order_cnt += n;
    doc->member_cnt = base;
    return 0;
}

static int dd_json_close(dd_json_parser_t *ps)
{
    uint32_t idx = ps->open[ps->depth - 1];
    dd_json_doc_t *doc = ps->doc;

    ps->p++;
    doc->nodes[idx].skip = doc->node_cnt - idx;
    if (doc->nodes[idx].type == DD_JSON_OBJECT && dd_json_object_close(ps, idx)) return ps->err;
    ps->depth--;
    return 0;
}

/* A member name and its ':' (ps->p on the name's '"'). */
static int dd_json_member_name(dd_json_parser_t *ps)
{
    if (ps->p >= ps->end || *ps->p != '"')
        return dd_json_unexpected(ps, "a member name in double quotes");
    ps->name_at = (uint32_t)(ps->p - ps->text);
    ps->in_name = 1;
    if (dd_json_string(ps, &ps->name, &ps->name_len)) return ps->err;
    ps->in_name = 0;
    dd_json_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') return dd_json_unexpected(ps, "':' after a member name");
    ps->p++;
    dd_json_ws(ps);
    return 0;
}

static int dd_json_open(dd_json_parser_t *ps, dd_json_type_t type)
{
    dd_json_node_t *n;

    if (ps->depth == DD_JSON_MAX_DEPTH)
        return dd_json_fail(ps, ps->p, "nesting deeper than %d arrays and objects",
                            DD_JSON_MAX_DEPTH);
    if (!(n = dd_json_node_new(ps, type))) return ps->err;
    ps->open[ps->depth] = (uint32_t)(n - ps->doc->nodes);
    ps->mbase[ps->depth] = ps->doc->member_cnt;
    ps->depth++;
    ps->p++;
    dd_json_ws(ps);
    if (ps->p < ps->end && *ps->p == (type == DD_JSON_OBJECT ? '}' : ']')) return dd_json_close(ps);
    if (type == DD_JSON_OBJECT && dd_json_member_name(ps)) return ps->err;
    return 1;
}

static int dd_json_literal(dd_json_parser_t *ps, const char *word, dd_json_type_t type)
{
    size_t n = strlen(word);

    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return dd_json_unexpected(ps, "a value");
    if (!dd_json_node_new(ps, type)) return ps->err;
    ps->p += n;
    return 0;
}

/* One value at ps->p. Returns 0 when it is complete, 1 when it opened a
 * container whose first value comes next, or a negative dd_err_t. */
static int dd_json_value(dd_json_parser_t *ps)
{
    dd_json_node_t *n;
    const char *s;
    uint32_t len;

    if (ps->p >= ps->end) return dd_json_unexpected(ps, "a value");
    switch (*ps->p) {
    case '{':
        return dd_json_open(ps, DD_JSON_OBJECT);
    case '[':
        return dd_json_open(ps, DD_JSON_ARRAY);
    case '"':
        if (!(n = dd_json_node_new(ps, DD_JSON_STRING))) return ps->err;
        if (dd_json_string(ps, &s, &len)) return ps->err; /* moves no node */
        n->str = s;
        n->len = len;
        return 0;
    case 't':
        return dd_json_literal(ps, "true", DD_JSON_TRUE);
    case 'f':
        return dd_json_literal(ps, "false", DD_JSON_FALSE);
    case 'n':
        return dd_json_literal(ps, "null", DD_JSON_NULL);
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
            const unsigned char *start = ps->p;

            if (dd_json_number(ps, &len)) return ps->err;
            ps->p = start; /* the node records where the number starts */
            if (!(n = dd_json_node_new(ps, DD_JSON_NUMBER))) return ps->err;
            n->str = (const char *)start;
            n->len = len;
            ps->p = start + len;
            return 0;
        }
        return dd_json_unexpected(ps, "a value");
    }
}

/* After a value: closes the containers it ends and stops before the next
 * value (after a ',' and, in an object, the next member's name). Returns 1
 * when the top-level value is complete, 0 when a value comes next, -1 on
 * an error. */
static int dd_json_after_value(dd_json_parser_t *ps)
{
    while (ps->depth > 0) {
        int obj = ps->doc->nodes[ps->open[ps->depth - 1]].type == DD_JSON_OBJECT;

        dd_json_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            dd_json_ws(ps);
            if (obj && dd_json_member_name(ps)) return -1;
            return 0;
        }
        if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
            if (dd_json_close(ps)) return -1;
            continue;
        }
        dd_json_unexpected(ps, obj ? "',' or '}'" : "',' or ']'");
        return -1;
    }
    return 1;
}

static int dd_json_prepare(dd_json_parser_t *ps, const unsigned char *text, size_t len)
{
    size_t bad;

    if (len == 0) return dd_json_fail(ps, text, "no JSON value (empty text)");
    if (len >= DD_JSON_MAX_LEN)
        return dd_json_fail(ps, text, "text of %zu bytes is too long to parse", len);
    if ((bad = dd_utf8_check(text, len)) < len)
        return dd_json_fail(ps, text + bad, "invalid UTF-8");
    if (len >= 3 && text[0] == 0xef && text[1] == 0xbb && text[2] == 0xbf)
        return dd_json_fail(ps, text, "byte-order mark (not allowed before JSON text)");
    return 0;
}

int dd_json_parse(dd_json_doc_t *doc, const void *text, size_t len, char *errstr,
                  size_t errstr_size)
{
    dd_json_parser_t ps;
    int rc;

    ps.doc = doc;
    ps.text = ps.p = text;
    ps.end = ps.text + len;
    ps.strs_len = 0;
    ps.errstr = errstr;
    ps.errstr_size = errstr_size;
    ps.err = 0;
    ps.depth = 0;
    ps.name = NULL;
    ps.name_len = ps.name_at = 0;
    ps.in_name = 0;
    doc->ok = 0;
    doc->node_cnt = doc->order_cnt = doc->member_cnt = 0;
    if (!text) len = 0;
    dd_json_doc_trim(doc, len);
    if (dd_json_prepare(&ps, ps.text, len)) return ps.err;
    dd_json_ws(&ps);
    for (;;) {
        if ((rc = dd_json_value(&ps)) == 1) continue;
        if (rc < 0 || (rc = dd_json_after_value(&ps)) < 0) {
            doc->node_cnt = 0;
            return ps.err;
        }
        if (rc == 1) break;
    }
    dd_json_ws(&ps);
    if (ps.p < ps.end) {
        doc->node_cnt = 0;
        return dd_json_fail(&ps, ps.p, "trailing data after the JSON value");
    }
    doc->strs_len = ps.strs_len;
    doc->text = text;
    doc->text_len = len;
    doc->ok = 1;
    return 0;
}

/*
 * Reading
 */

const dd_json_node_t *dd_json_root(const dd_json_doc_t *doc)
{
    return doc->ok ? doc->nodes : NULL;
}

const dd_json_node_t *dd_json_index(const dd_json_node_t *arr, uint32_t i)
{
    const dd_json_node_t *c = arr + 1;

    if (arr->type != DD_JSON_ARRAY || i >= arr->len) return NULL;
    while (i--)
        c = dd_json_next(c);
    return c;
}

const dd_json_node_t *dd_json_member_sorted(const dd_json_doc_t *doc, const dd_json_node_t *obj,
                                            uint32_t i)
{
    return &doc->nodes[doc->order[obj->order + i]];
}

const dd_json_node_t *dd_json_member(const dd_json_doc_t *doc, const dd_json_node_t *obj,
                                     const char *name, size_t name_len)
{
    const uint32_t *m;
    uint32_t lo = 0, hi;

    if (obj->type != DD_JSON_OBJECT) return NULL;
    m = doc->order + obj->order;
    hi = obj->len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const dd_json_node_t *c = &doc->nodes[m[mid]];
        int r = dd_text_cmp(c->name, c->name_len, name, name_len);

        if (r == 0) return c;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/*
 * Copies and the text of values
 */

/* Sizes rounded up to what malloc aligns to, so the parts of a copy laid
 * out one after another in one block stay aligned. */
static size_t dd_json_round(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

size_t dd_json_doc_copy_size(const dd_json_doc_t *doc)
{
    if (!doc->ok) return 0;
    return dd_json_round(sizeof(dd_json_doc_t)) +
           dd_json_round((size_t)doc->node_cnt * sizeof(dd_json_node_t)) +
           dd_json_round((size_t)doc->order_cnt * sizeof(uint32_t)) + doc->strs_len;
}

/* A pointer of a node into the decoded strings of doc, moved to the same
 * place in strs; a pointer into the text stays. */
static const char *dd_json_relocate(const dd_json_doc_t *doc, const char *p, char *strs)
{
    if (p && doc->strs_len && p >= doc->strs && p < doc->strs + doc->strs_len)
        return strs + (p - doc->strs);
    return p;
}

const dd_json_doc_t *dd_json_doc_copy(const dd_json_doc_t *doc, void *mem)
{
    dd_json_doc_t *c = mem;
    char *at = mem;
    size_t nodes = (size_t)doc->node_cnt * sizeof(dd_json_node_t);
    size_t order = (size_t)doc->order_cnt * sizeof(uint32_t);

    if (!doc->ok || !mem) return NULL;
    memset(c, 0, sizeof(*c));
    at += dd_json_round(sizeof(*c));
    c->nodes = (dd_json_node_t *)(void *)at;
    at += dd_json_round(nodes);
    c->order = (uint32_t *)(void *)at;
    at += dd_json_round(order);
    c->strs = at;
    memcpy(c->nodes, doc->nodes, nodes);
    if (order) memcpy(c->order, doc->order, order);
    if (doc->strs_len) memcpy(c->strs, doc->strs, doc->strs_len);
    for (uint32_t i = 0; doc->strs_len && i < doc->node_cnt; i++) {
        c->nodes[i].str = dd_json_relocate(doc, c->nodes[i].str, c->strs);
        c->nodes[i].name = dd_json_relocate(doc, c->nodes[i].name, c->strs);
    }
    c->node_cnt = c->node_cap = doc->node_cnt;
    c->order_cnt = c->order_cap = doc->order_cnt;
    c->strs_len = c->strs_cap = doc->strs_len;
    c->text = doc->text;
    c->text_len = doc->text_len;
    c->ok = 1;
    return c;
}

/* Offset just after the JSON string whose '"' is at i (the text is one
 * the parser accepted: the string is closed). */
static size_t dd_json_skip_string(const char *t, size_t i)
{
    for (i++; t[i] != '"'; i++)
        if (t[i] == '\\') i++;
    return i + 1;
}

static size_t dd_json_skip_ws(const char *t, size_t i, size_t len)
{
    while (i < len && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
        i++;
    return i;
}

/* Offset just after the array or object whose bracket is at i. */
static size_t dd_json_skip_container(const char *t, size_t i)
{
    size_t depth = 0;

    for (;; i++) {
        if (t[i] == '"')
            i = dd_json_skip_string(t, i) - 1;
        else if (t[i] == '[' || t[i] == '{')
            depth++;
        else if ((t[i] == ']' || t[i] == '}') && --depth == 0)
            return i + 1;
    }
}

void dd_json_value_text(const dd_json_doc_t *doc, const dd_json_node_t *node, const char **text,
                        size_t *len)
{
    const char *t = doc->text;
    size_t i = node->at, end;

    if (node->name) { /* at is its name's: the value is after the ':' */
        i = dd_json_skip_ws(t, dd_json_skip_string(t, i), doc->text_len);
        i = dd_json_skip_ws(t, i + 1, doc->text_len);
    }
    switch (node->type) {
    case DD_JSON_STRING:
        end = dd_json_skip_string(t, i);
        break;
    case DD_JSON_NUMBER:
        end = i + node->len;
        break;
    case DD_JSON_ARRAY:
    case DD_JSON_OBJECT:
        end = dd_json_skip_container(t, i);
        break;
    default: /* true, false, null */
        end = i + (node->type == DD_JSON_FALSE ? 5 : 4);
    }
    *text = t + i;
    *len = end - i;
}

/*
 * Numbers
 */

void dd_json_num_parts(const char *text, size_t len, dd_json_num_t *num)
{
    const char *p = text, *end = text + len, *ip, *fp = NULL, *ie;
    size_t ni, nf = 0, lead = 0, trail = 0;
    int64_t e = 0;
    int eneg = 0;

    num->neg = *p == '-';
    if (num->neg) p++;
    ip = p;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    ie = p;
    ni = (size_t)(ie - ip);
    if (p < end && *p == '.') {
        fp = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        nf = (size_t)(p - fp);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (*p == '+' || *p == '-') eneg = *p++ == '-';
        /* At most DD_JSON_MAX_EXP_DIGITS significant digits: no overflow. */
        for (; p < end; p++)
            e = e * 10 + (*p - '0');
        if (eneg) e = -e;
    }
    /* Leading zeros of the digits I F, then trailing zeros. */
    while (lead < ni && ip[lead] == '0')
        lead++;
    if (lead == ni)
        while (lead < ni + nf && fp[lead - ni] == '0')
            lead++;
    if (lead == ni + nf) { /* zero */
        num->neg = 0;
        num->d1 = num->d2 = text;
        num->n1 = num->n2 = 0;
        num->exp = 0;
        return;
    }
    while (trail < nf && fp[nf - 1 - trail] == '0')
        trail++;
    if (trail == nf)
        while (ip[ni - 1 - (trail - nf)] == '0')
            trail++;
    /* The digits kept: positions lead .. ni + nf - trail of I F. */
    if (lead < ni) {
        num->d1 = ip + lead;
        num->n1 = ni - lead - (trail > nf ? trail - nf : 0);
        num->d2 = fp ? fp : ie;
        num->n2 = trail < nf ? nf - trail : 0;
    } else {
        num->d1 = fp + (lead - ni);
        num->n1 = nf - trail - (lead - ni);
        num->d2 = fp + nf;
        num->n2 = 0;
    }
    /* The last kept digit has weight 10^(e - nf + trail). */
    num->exp = e - (int64_t)nf + (int64_t)trail;
}
