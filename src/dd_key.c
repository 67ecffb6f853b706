/*
 * Business keys, canonical JSON and request hashes.
 *
 * Why this module exists: deduplication is only as good as the key and the
 * hash. The key must come from business fields (never Kafka coordinates) and
 * a message whose key cannot be built must be refused, not keyed as "". The
 * hash must not change when a producer re-serialises the same payload with
 * other member order, whitespace, escapes or number spelling, or a replay
 * would be reported as a conflict. Both run for every message, so rendering
 * never allocates and hashing streams the canonical text straight into the
 * digest through a small stack buffer instead of building it in memory.
 */
#include "dd_key.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "dd_common.h"

/* Deeper than cJSON's own parse limit (1000), so parsed payloads always fit,
 * while a hand-built pathological tree cannot exhaust the stack. */
#define DD_CANON_MAX_DEPTH 1024
/* Objects up to this many members sort in a stack array; bigger ones malloc. */
#define DD_CANON_SORT_STACK 32
/* Hash mode buffers this much canonical text before each digest update. */
#define DD_CANON_CHUNK 1024
/* Longest number text is "-1.2345678901234567e-308" (24 bytes); 40 also
 * satisfies gcc's -Wformat-truncation bound for precision <= 31. */
#define DD_NUM_BUF 40

/* One step of a path: a member name, or an array index when name is NULL. */
typedef struct {
    const char *name; /* NUL-terminated, points into dd_path_t.names */
    int index;
    size_t end; /* offset in the path text just after this step */
} dd_path_step_t;

typedef struct {
    char *text;  /* the path as written, e.g. "a.b[0].c" */
    char *names; /* member names, NUL-separated at the same offsets as text */
    dd_path_step_t *steps;
    int step_cnt;
} dd_path_t;

/* A template piece: literal bytes ($$ already resolved) or a path. */
typedef struct {
    const char *lit; /* NULL for a path segment */
    size_t lit_len;
    dd_path_t path;
} dd_key_seg_t;

struct dd_key_tmpl_s {
    char *lits; /* all literal bytes; segments point into it */
    dd_key_seg_t *segs;
    int seg_cnt;
};

struct dd_hash_spec_s {
    dd_path_t *paths; /* sorted by text, no duplicates */
    int path_cnt;
};

/* Where canonical text goes: a growing heap buffer (md == NULL) or a fixed
 * chunk flushed into a digest. The first error sticks in err. */
typedef struct {
    char *buf;
    size_t len;
    size_t cap;
    EVP_MD_CTX *md;
    int err;
} dd_canon_t;

/*
 * Paths
 */

static int dd_path_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

static void dd_path_free(dd_path_t *path)
{
    free(path->text);
    free(path->names);
    free(path->steps);
    memset(path, 0, sizeof(*path));
}

/* Explains why src[i] cannot continue a path (i == len: the path ended);
 * col is src[0]'s column. */
static void dd_path_bad_char(const char *src, size_t len, size_t i, size_t col, char *errstr,
                             size_t errstr_size)
{
    unsigned char c = i < len ? (unsigned char)src[i] : '\0';

    if (c == '.' || c == '[' || c == '\0')
        dd_errstr_set(errstr, errstr_size, "empty field name at column %zu", col + i);
    else if (c >= 0x20 && c < 0x7f)
        dd_errstr_set(errstr, errstr_size, "unexpected character '%c' in path at column %zu", c,
                      col + i);
    else
        dd_errstr_set(errstr, errstr_size, "unexpected byte 0x%02x in path at column %zu", c,
                      col + i);
}

/* Parses "[N]" at src[*ip]; N is decimal without leading zeros, <= INT_MAX. */
static int dd_path_parse_index(const char *src, size_t len, size_t *ip, int *index)
{
    size_t i = *ip + 1, start = i;
    long long v = 0;

    while (i < len && src[i] >= '0' && src[i] <= '9') {
        v = v * 10 + (src[i] - '0');
        if (v > INT_MAX) return -1;
        i++;
    }
    if (i == start || i >= len || src[i] != ']') return -1;
    if (src[start] == '0' && i - start > 1)
        return -1; /* "[01]" would be a second spelling of "[1]" */
    *index = (int)v;
    *ip = i + 1;
    return 0;
}

/* Parses one step (name or index) at src[*ip] into step. */
static int dd_path_parse_step(dd_path_t *path, dd_path_step_t *step, const char *src, size_t len,
                              size_t *ip, size_t col, char *errstr, size_t errstr_size)
{
    size_t i = *ip, start = i;

    if (src[i] == '[') {
        if (dd_path_parse_index(src, len, ip, &step->index) < 0) {
            dd_errstr_set(errstr, errstr_size, "bad array index at column %zu (expected [N])",
                          col + start);
            return -1;
        }
        step->name = NULL;
        step->end = *ip;
        return 0;
    }
    while (i < len && dd_path_name_char(src[i]))
        i++;
    if (i == start) {
        dd_path_bad_char(src, len, i, col, errstr, errstr_size);
        return -1;
    }
    memcpy(path->names + start, src + start, i - start);
    path->names[i] = '\0'; /* the delimiter's slot: '.', '[' or the end */
    step->name = path->names + start;
    step->end = *ip = i;
    return 0;
}

/* Compiles src[0..len) into path. col is the 1-based column of src[0] in
 * whatever the user wrote, for error messages. */
static int dd_path_parse(dd_path_t *path, const char *src, size_t len, size_t col, char *errstr,
                         size_t errstr_size)
{
    size_t i = 0;
    int rc = DD_ERR_CONFIG;

    memset(path, 0, sizeof(*path));
    if (len == 0) {
        dd_errstr_set(errstr, errstr_size, "empty path at column %zu", col);
        goto out;
    }
    path->text = strndup(src, len);
    path->names = malloc(len + 1);
    path->steps = calloc(len, sizeof(*path->steps));
    if (!path->text || !path->names || !path->steps) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
        goto out;
    }
    while (i < len) {
        if (dd_path_parse_step(path, &path->steps[path->step_cnt], src, len, &i, col, errstr,
                               errstr_size) < 0)
            goto out;
        path->step_cnt++;
        if (i < len && src[i] == '.') {
            i++;
            if (i == len || !dd_path_name_char(src[i])) {
                dd_path_bad_char(src, len, i, col, errstr, errstr_size);
                goto out;
            }
        } else if (i < len && src[i] != '[') {
            dd_path_bad_char(src, len, i, col, errstr, errstr_size);
            goto out;
        }
    }
    rc = 0;
out:
    if (rc) dd_path_free(path);
    return rc;
}

/* Follows the first steps_max steps of path from json. Returns NULL when a
 * step finds nothing; *failed_at then says which. */
static const cJSON *dd_path_walk(const dd_path_t *path, int steps_max, const cJSON *json,
                                 int *failed_at)
{
    const cJSON *cur = json;
    int k;

    for (k = 0; k < steps_max && cur; k++) {
        const dd_path_step_t *step = &path->steps[k];
        const cJSON *next = NULL;

        if (step->name && cJSON_IsObject(cur))
            next = cJSON_GetObjectItemCaseSensitive(cur, step->name);
        else if (!step->name && cJSON_IsArray(cur))
            next = cJSON_GetArrayItem(cur, step->index);
        if (!next && failed_at) *failed_at = k;
        cur = next;
    }
    return cur;
}

static const cJSON *dd_path_lookup(const dd_path_t *path, const cJSON *json, int *failed_at)
{
    return dd_path_walk(path, path->step_cnt, json, failed_at);
}

/*
 * Numbers
 */

/* Writes |v| in decimal, with a leading '-' when neg. */
static size_t dd_num_format_int(uint64_t v, int neg, char *buf)
{
    char tmp[24];
    size_t n = 0, len = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (neg) buf[len++] = '-';
    while (n)
        buf[len++] = tmp[--n];
    buf[len] = '\0';
    return len;
}

/* Fast path for the common "12.34" kind of value, 1e-4 <= |x| < 1e15 and
 * at most 15 significant digits: finds the fewest decimals k for which
 * y = round(x * 10^k) divided by 10^k is x again (that division is correctly
 * rounded, so it is exactly what strtod would make of the text). With <= 15
 * digits the decimal grid is coarser than 4 ulps, so those digits are the
 * only ones that read back and equal what "%.15g" prints (%g uses fixed
 * notation in this range). Returns 0 when the fast path does not apply. */
static size_t dd_num_format_fixed(double x, char buf[DD_NUM_BUF])
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                                 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19};
    double ax = fabs(x);
    int k;

    if (ax < 1e-4 || ax >= 1e15) return 0;
    for (k = 1; k < (int)DD_ARRAY_LEN(p10); k++) {
        double y = nearbyint(ax * p10[k]);
        uint64_t u, scale = 1;
        size_t len;
        int d;

        if (y >= 1e15) return 0;
        if (y / p10[k] != ax) continue;
        u = (uint64_t)y;
        for (d = 0; d < k; d++)
            scale *= 10;
        len = dd_num_format_int(u / scale, x < 0, buf);
        buf[len++] = '.';
        for (d = k - 1; d >= 0; d--) {
            buf[len + (size_t)d] = (char)('0' + u % 10);
            u /= 10;
        }
        len += (size_t)k;
        buf[len] = '\0';
        return len;
    }
    return 0;
}

/* Formats a finite double canonically (see dd_key.h); returns the length.
 *
 * Outside the fast path the shortest round-tripping "%.*g" is found by
 * trying 15, 16, 17 only: if some precision p <= 15 reads back, x is within
 * half an ulp (< 1.2e-16 x) of those p digits, closer than half a unit in the
 * 15th digit (>= 5e-16 x), so "%.15g" rounds to the same digits and, as %g
 * drops trailing zeros and picks the same notation, prints the same text.
 * Subnormals have a coarser relative ulp, so they search from 1. */
static size_t dd_num_format(double x, char buf[DD_NUM_BUF])
{
    int prec, len = 0;
    size_t fixed_len;

    if (x == 0) return dd_num_format_int(0, 0, buf); /* also -0 */
    if (fabs(x) <= 9007199254740992.0 && x == trunc(x))
        return dd_num_format_int((uint64_t)fabs(x), x < 0, buf);
    if ((fixed_len = dd_num_format_fixed(x, buf))) return fixed_len;
    for (prec = fabs(x) < DBL_MIN ? 1 : 15; prec <= 17; prec++) {
        len = snprintf(buf, DD_NUM_BUF, "%.*g", prec & 31, x); /* mask: bound for gcc */
        if (prec == 17 || strtod(buf, NULL) == x) break;
    }
    return (size_t)len;
}

/*
 * Key templates
 */

void dd_key_tmpl_destroy(dd_key_tmpl_t *tmpl)
{
    int i;

    if (!tmpl) return;
    for (i = 0; i < tmpl->seg_cnt; i++)
        dd_path_free(&tmpl->segs[i].path);
    free(tmpl->segs);
    free(tmpl->lits);
    free(tmpl);
}

/* Appends one literal byte, extending the last segment when it is literal. */
static void dd_key_tmpl_add_byte(dd_key_tmpl_t *tmpl, size_t *lit_used, char c)
{
    dd_key_seg_t *last = tmpl->seg_cnt ? &tmpl->segs[tmpl->seg_cnt - 1] : NULL;

    if (!last || !last->lit) {
        last = &tmpl->segs[tmpl->seg_cnt++];
        last->lit = tmpl->lits + *lit_used;
        last->lit_len = 0;
    }
    tmpl->lits[(*lit_used)++] = c;
    last->lit_len++;
}

/* Compiles the "${path}" starting at text[*ip] into a new segment. */
static int dd_key_tmpl_add_path(dd_key_tmpl_t *tmpl, const char *text, size_t *ip, char *errstr,
                                size_t errstr_size)
{
    const char *start = text + *ip + 2;
    const char *close = strchr(start, '}');
    dd_key_seg_t *seg = &tmpl->segs[tmpl->seg_cnt];
    int rc;

    if (!close) {
        dd_errstr_set(errstr, errstr_size, "unclosed ${ at column %zu", *ip + 1);
        return DD_ERR_CONFIG;
    }
    rc = dd_path_parse(&seg->path, start, (size_t)(close - start), *ip + 3, errstr, errstr_size);
    if (rc) return rc;
    seg->lit = NULL;
    tmpl->seg_cnt++;
    *ip = (size_t)(close - text) + 1;
    return 0;
}

/* Splits text into literal and path segments. */
static int dd_key_tmpl_parse(dd_key_tmpl_t *tmpl, const char *text, char *errstr,
                             size_t errstr_size)
{
    size_t i = 0, lit_used = 0;
    int rc;

    while (text[i]) {
        if (text[i] != '$') {
            dd_key_tmpl_add_byte(tmpl, &lit_used, text[i++]);
        } else if (text[i + 1] == '$') {
            dd_key_tmpl_add_byte(tmpl, &lit_used, '$');
            i += 2;
        } else if (text[i + 1] == '{') {
            if ((rc = dd_key_tmpl_add_path(tmpl, text, &i, errstr, errstr_size))) return rc;
        } else {
            dd_errstr_set(errstr, errstr_size,
                          "lone '$' at column %zu (write $$ for a literal '$', ${path} for a "
                          "field)",
                          i + 1);
            return DD_ERR_CONFIG;
        }
    }
    if (lit_used > DD_KEY_MAX) {
        dd_errstr_set(errstr, errstr_size, "literal text is %zu bytes, keys are at most %d",
                      lit_used, DD_KEY_MAX);
        return DD_ERR_CONFIG;
    }
    return 0;
}

static int dd_key_tmpl_has_path(const dd_key_tmpl_t *tmpl)
{
    int i;

    for (i = 0; i < tmpl->seg_cnt; i++)
        if (!tmpl->segs[i].lit) return 1;
    return 0;
}

int dd_key_tmpl_new(dd_key_tmpl_t **tmplp, const char *text, char *errstr, size_t errstr_size)
{
    dd_key_tmpl_t *tmpl = NULL;
    size_t len = text ? strlen(text) : 0;
    int rc = DD_ERR_CONFIG;

    *tmplp = NULL;
    if (len == 0) {
        dd_errstr_set(errstr, errstr_size, "key template is empty");
        goto out;
    }
    tmpl = calloc(1, sizeof(*tmpl));
    if (tmpl) {
        tmpl->lits = malloc(len);
        tmpl->segs = calloc(len, sizeof(*tmpl->segs)); /* at most one per byte */
    }
    if (!tmpl || !tmpl->lits || !tmpl->segs) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
        goto out;
    }
    if ((rc = dd_key_tmpl_parse(tmpl, text, errstr, errstr_size))) goto out;
    if (!dd_key_tmpl_has_path(tmpl)) {
        dd_errstr_set(errstr, errstr_size,
                      "key template has no ${path} placeholder: every message would get "
                      "the same key");
        rc = DD_ERR_CONFIG;
        goto out;
    }
    *tmplp = tmpl;
    tmpl = NULL;
out:
    dd_key_tmpl_destroy(tmpl);
    return rc;
}

/*
 * Rendering
 */

static const char *dd_json_type_name(const cJSON *item)
{
    if (!item) return "absent";
    switch (item->type & 0xff) {
    case cJSON_False:
    case cJSON_True:
        return "a boolean";
    case cJSON_NULL:
        return "null";
    case cJSON_Number:
        return "a number";
    case cJSON_String:
        return "a string";
    case cJSON_Array:
        return "an array";
    case cJSON_Object:
        return "an object";
    }
    return "not a JSON value";
}

/* Says why path found nothing at step k (error path only: re-walks). */
static void dd_key_why_missing(const dd_path_t *path, const cJSON *json, int k, char *why,
                               size_t why_size)
{
    const cJSON *parent = dd_path_walk(path, k, json, NULL);
    const dd_path_step_t *step = &path->steps[k];
    int prefix = k ? (int)path->steps[k - 1].end : 0;
    const char *pname = k ? path->text : "the payload";

    if (k == 0) prefix = (int)strlen(pname);
    if (step->name ? !cJSON_IsObject(parent) : !cJSON_IsArray(parent))
        dd_errstr_set(why, why_size, "field %s is missing (%.*s is %s)", path->text, prefix, pname,
                      dd_json_type_name(parent));
    else if (!step->name)
        dd_errstr_set(why, why_size, "field %s is missing (%.*s has %d elements)", path->text,
                      prefix, pname, cJSON_GetArraySize(parent));
    else
        dd_errstr_set(why, why_size, "field %s is missing", path->text);
}

/* Finds the bytes a path segment renders to (*valp, *lenp); numbers are
 * formatted into num. */
static dd_key_status_t dd_key_render_value(const dd_path_t *path, const cJSON *json,
                                           char num[DD_NUM_BUF], const char **valp, size_t *lenp,
                                           char *why, size_t why_size)
{
    int failed_at = 0;
    const cJSON *v = dd_path_lookup(path, json, &failed_at);

    if (!v) {
        dd_key_why_missing(path, json, failed_at, why, why_size);
        return DD_KEY_MISSING;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        *valp = v->valuestring;
        *lenp = strlen(v->valuestring);
    } else if (cJSON_IsNumber(v) && isfinite(v->valuedouble)) {
        *lenp = dd_num_format(v->valuedouble, num);
        *valp = num;
    } else if (cJSON_IsBool(v)) {
        *valp = cJSON_IsTrue(v) ? "true" : "false";
        *lenp = strlen(*valp);
    } else {
        dd_errstr_set(why, why_size, "field %s is %s", path->text,
                      cJSON_IsNumber(v) ? "not a finite number" : dd_json_type_name(v));
        return DD_KEY_MISSING;
    }
    return DD_KEY_OK;
}

dd_key_status_t dd_key_render(const dd_key_tmpl_t *tmpl, const cJSON *json,
                              char out[DD_KEY_MAX + 1], size_t *out_len, char *why, size_t why_size)
{
    size_t len = 0; /* full rendered length, may pass DD_KEY_MAX */
    int i;

    for (i = 0; i < tmpl->seg_cnt; i++) {
        const dd_key_seg_t *seg = &tmpl->segs[i];
        char num[DD_NUM_BUF];
        const char *val = seg->lit;
        size_t n = seg->lit_len, room = len < DD_KEY_MAX ? DD_KEY_MAX - len : 0;

        if (!val && dd_key_render_value(&seg->path, json, num, &val, &n, why, why_size)) {
            out[0] = '\0';
            *out_len = 0;
            return DD_KEY_MISSING;
        }
        memcpy(out + (len < DD_KEY_MAX ? len : DD_KEY_MAX), val, n < room ? n : room);
        len += n;
    }
    *out_len = len < DD_KEY_MAX ? len : DD_KEY_MAX;
    out[*out_len] = '\0';
    if (len > DD_KEY_MAX) {
        dd_errstr_set(why, why_size, "key is %zu bytes, at most %d", len, DD_KEY_MAX);
        return DD_KEY_TOO_LONG;
    }
    return DD_KEY_OK;
}

/*
 * Canonical writer
 */

/* Records the first error. With cap 0 every later put takes the slow path,
 * which drops it, so the fast path needs no error test. */
static void dd_canon_fail(dd_canon_t *cw, int err)
{
    cw->err = err;
    cw->len = 0;
    cw->cap = 0;
}

static int dd_canon_grow(dd_canon_t *cw, size_t n)
{
    size_t cap = cw->cap ? cw->cap : 256;
    char *buf;

    while (cap < cw->len + n)
        cap *= 2;
    if (!(buf = realloc(cw->buf, cap))) return -1;
    cw->buf = buf;
    cw->cap = cap;
    return 0;
}

/* The chunk is full (hash mode: digest it, or p itself when p is bigger
 * than a chunk) or the buffer must grow (text mode). */
static void dd_canon_put_slow(dd_canon_t *cw, const void *p, size_t n)
{
    if (cw->err) return;
    if (cw->md) {
        if (cw->len && !EVP_DigestUpdate(cw->md, cw->buf, cw->len)) {
            dd_canon_fail(cw, DD_ERR_FATAL);
            return;
        }
        cw->len = 0;
        if (n > cw->cap) {
            if (!EVP_DigestUpdate(cw->md, p, n)) dd_canon_fail(cw, DD_ERR_FATAL);
            return;
        }
    } else if (dd_canon_grow(cw, n) < 0) {
        dd_canon_fail(cw, DD_ERR_NOMEM);
        return;
    }
    memcpy(cw->buf + cw->len, p, n);
    cw->len += n;
}

static inline void dd_canon_put(dd_canon_t *cw, const void *p, size_t n)
{
    if (n <= cw->cap - cw->len) { /* len <= cap always holds */
        memcpy(cw->buf + cw->len, p, n);
        cw->len += n;
    } else {
        dd_canon_put_slow(cw, p, n);
    }
}

static inline void dd_canon_putc(dd_canon_t *cw, char c)
{
    if (cw->len < cw->cap)
        cw->buf[cw->len++] = c;
    else
        dd_canon_put_slow(cw, &c, 1);
}

/* Writes the escape for c (a byte that needs one) into esc; returns its
 * length. Short forms where JSON has them, else \u00XX. */
static size_t dd_canon_escape(unsigned char c, char esc[6])
{
    static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt", hex[] = "0123456789abcdef";
    const char *f = memchr(from, c, sizeof(from) - 1);

    esc[0] = '\\';
    if (f) {
        esc[1] = to[f - from];
        return 2;
    }
    memcpy(esc + 1, "u00", 3);
    esc[4] = hex[c >> 4];
    esc[5] = hex[c & 0xf];
    return 6;
}

/* 1 for the bytes a string copies as they are; 0 for the end (NUL) and for
 * those needing an escape: '"', '\\' and the controls below 0x20. A table,
 * because this scan runs over every string byte of every message. */
#define DD_CANON_PLAIN16(b) 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
static const unsigned char dd_canon_plain[] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00: NUL, controls */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10: controls */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20: '"' */
    DD_CANON_PLAIN16(0x30), DD_CANON_PLAIN16(0x40),
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50: '\\' */
    DD_CANON_PLAIN16(0x60), DD_CANON_PLAIN16(0x70), DD_CANON_PLAIN16(0x80),
    DD_CANON_PLAIN16(0x90), DD_CANON_PLAIN16(0xa0), DD_CANON_PLAIN16(0xb0),
    DD_CANON_PLAIN16(0xc0), DD_CANON_PLAIN16(0xd0), DD_CANON_PLAIN16(0xe0),
    DD_CANON_PLAIN16(0xf0)};
#undef DD_CANON_PLAIN16
_Static_assert(sizeof(dd_canon_plain) == 256, "one entry per byte value");

/* Copies runs of bytes that need no escape in one go. */
static void dd_canon_string(dd_canon_t *cw, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : ""), *run = p;

    dd_canon_putc(cw, '"');
    for (;;) {
        char esc[6];

        while (dd_canon_plain[*p])
            p++;
        if (!*p) break;
        dd_canon_put(cw, run, (size_t)(p - run));
        dd_canon_put(cw, esc, dd_canon_escape(*p, esc));
        run = ++p;
    }
    dd_canon_put(cw, run, (size_t)(p - run));
    dd_canon_putc(cw, '"');
}

static void dd_canon_number(dd_canon_t *cw, double x)
{
    char num[DD_NUM_BUF];

    if (!isfinite(x)) {
        dd_canon_put(cw, "null", 4); /* JSON has no inf; cJSON prints it so too */
        return;
    }
    dd_canon_put(cw, num, dd_num_format(x, num));
}

/*
 * Member sorting: stable, bytewise by name.
 */

static int dd_canon_name_cmp(const cJSON *a, const cJSON *b)
{
    const unsigned char *x = (const unsigned char *)(a->string ? a->string : "");
    const unsigned char *y = (const unsigned char *)(b->string ? b->string : "");

    /* Member names mostly differ in their first byte: settle those without
     * a call. strcmp compares as unsigned char too. */
    if (*x != *y || !*x) return (int)*x - (int)*y;
    return strcmp((const char *)x + 1, (const char *)y + 1);
}

static void dd_canon_isort(const cJSON **kids, size_t n)
{
    size_t i, j;

    for (i = 1; i < n; i++) {
        const cJSON *k = kids[i];

        for (j = i; j > 0 && dd_canon_name_cmp(kids[j - 1], k) > 0; j--)
            kids[j] = kids[j - 1];
        kids[j] = k;
    }
}

/* Top-down merge sort of kids[0..n) using tmp[0..n); stable. */
static void dd_canon_msort(const cJSON **kids, const cJSON **tmp, size_t n)
{
    size_t mid = n / 2, i = 0, j = mid, o = 0;

    if (n <= DD_CANON_SORT_STACK) {
        dd_canon_isort(kids, n);
        return;
    }
    dd_canon_msort(kids, tmp, mid);
    dd_canon_msort(kids + mid, tmp, n - mid);
    if (dd_canon_name_cmp(kids[mid - 1], kids[mid]) <= 0)
        return; /* already in order: common for producers that sort */
    while (i < mid && j < n)
        tmp[o++] = dd_canon_name_cmp(kids[j], kids[i]) < 0 ? kids[j++] : kids[i++];
    while (i < mid)
        tmp[o++] = kids[i++];
    memcpy(kids, tmp, o * sizeof(*kids)); /* kids[j..n) are already in place */
}

/*
 * Tree walk
 */

static void dd_canon_value(dd_canon_t *cw, const cJSON *item, int depth);

static void dd_canon_object(dd_canon_t *cw, const cJSON *obj, int depth)
{
    const cJSON *stack[DD_CANON_SORT_STACK];
    const cJSON **kids = stack;
    const cJSON *c;
    size_t n = 0, i;

    for (c = obj->child; c; c = c->next)
        n++;
    if (n > DD_CANON_SORT_STACK && !(kids = malloc(2 * n * sizeof(*kids)))) {
        dd_canon_fail(cw, DD_ERR_NOMEM);
        return;
    }
    for (c = obj->child, i = 0; c; c = c->next)
        kids[i++] = c;
    dd_canon_msort(kids, kids + n, n);
    dd_canon_putc(cw, '{');
    for (i = 0; i < n && !cw->err; i++) {
        if (i) dd_canon_putc(cw, ',');
        dd_canon_string(cw, kids[i]->string);
        dd_canon_putc(cw, ':');
        dd_canon_value(cw, kids[i], depth + 1);
    }
    dd_canon_putc(cw, '}');
    if (kids != stack) free(kids);
}

static void dd_canon_array(dd_canon_t *cw, const cJSON *arr, int depth)
{
    const cJSON *c;

    dd_canon_putc(cw, '[');
    for (c = arr->child; c && !cw->err; c = c->next) {
        if (c != arr->child) dd_canon_putc(cw, ',');
        dd_canon_value(cw, c, depth + 1);
    }
    dd_canon_putc(cw, ']');
}

static void dd_canon_value(dd_canon_t *cw, const cJSON *item, int depth)
{
    if (depth > DD_CANON_MAX_DEPTH) {
        dd_canon_fail(cw, DD_ERR_ARG);
        return;
    }
    switch (item->type & 0xff) {
    case cJSON_False:
        dd_canon_put(cw, "false", 5);
        break;
    case cJSON_True:
        dd_canon_put(cw, "true", 4);
        break;
    case cJSON_NULL:
        dd_canon_put(cw, "null", 4);
        break;
    case cJSON_Number:
        dd_canon_number(cw, item->valuedouble);
        break;
    case cJSON_String:
        dd_canon_string(cw, item->valuestring);
        break;
    case cJSON_Array:
        dd_canon_array(cw, item, depth);
        break;
    case cJSON_Object:
        dd_canon_object(cw, item, depth);
        break;
    default: /* cJSON_Raw or invalid: not something a parser produces */
        dd_canon_fail(cw, DD_ERR_ARG);
    }
}

/* The hashed document for a spec: {"<path>": value-or-null, ...}; the
 * paths are sorted already, so this object is canonical as written. */
static void dd_canon_spec(dd_canon_t *cw, const dd_hash_spec_t *spec, const cJSON *json)
{
    int i;

    dd_canon_putc(cw, '{');
    for (i = 0; i < spec->path_cnt; i++) {
        const cJSON *v = dd_path_lookup(&spec->paths[i], json, NULL);

        if (i) dd_canon_putc(cw, ',');
        dd_canon_string(cw, spec->paths[i].text);
        dd_canon_putc(cw, ':');
        if (v)
            dd_canon_value(cw, v, 1);
        else
            dd_canon_put(cw, "null", 4);
    }
    dd_canon_putc(cw, '}');
}

int dd_json_canonical(const cJSON *json, char **outp, size_t *out_len)
{
    dd_canon_t cw = {0};

    *outp = NULL;
    if (out_len) *out_len = 0;
    if (!json) return DD_ERR_ARG;
    dd_canon_value(&cw, json, 0);
    dd_canon_putc(&cw, '\0');
    if (cw.err) {
        free(cw.buf);
        return cw.err;
    }
    *outp = cw.buf;
    if (out_len) *out_len = cw.len - 1;
    return 0;
}

/*
 * Hashing
 */

/* SHA-256 fetched once: an implicit fetch on every EVP_DigestInit_ex would
 * take OpenSSL's method-store lock for every message in every worker. */
static EVP_MD *dd_sha256_fetched;
static pthread_once_t dd_sha256_once = PTHREAD_ONCE_INIT;

static void dd_sha256_init(void)
{
    dd_sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *dd_sha256(void)
{
    pthread_once(&dd_sha256_once, dd_sha256_init);
    return dd_sha256_fetched ? dd_sha256_fetched : EVP_sha256();
}

int dd_key_hash(const dd_hash_spec_t *spec, const cJSON *json, unsigned char out[DD_HASH_LEN])
{
    char chunk[DD_CANON_CHUNK];
    dd_canon_t cw = {chunk, 0, sizeof(chunk), NULL, 0};
    unsigned int md_len = 0;
    int rc = DD_ERR_FATAL;

    if (!json) return DD_ERR_ARG;
    if (!(cw.md = EVP_MD_CTX_new())) return DD_ERR_NOMEM;
    if (!EVP_DigestInit_ex(cw.md, dd_sha256(), NULL)) goto out;
    if (spec && spec->path_cnt > 0)
        dd_canon_spec(&cw, spec, json);
    else
        dd_canon_value(&cw, json, 0);
    if (!cw.err && cw.len && !EVP_DigestUpdate(cw.md, cw.buf, cw.len)) goto out;
    if (cw.err) {
        rc = cw.err;
        goto out;
    }
    if (!EVP_DigestFinal_ex(cw.md, out, &md_len) || md_len != DD_HASH_LEN) goto out;
    rc = 0;
out:
    EVP_MD_CTX_free(cw.md);
    return rc;
}

void dd_key_hash_hex(const unsigned char hash[DD_HASH_LEN], char out[DD_HASH_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    int i;

    for (i = 0; i < DD_HASH_LEN; i++) {
        out[2 * i] = hex[hash[i] >> 4];
        out[2 * i + 1] = hex[hash[i] & 0xf];
    }
    out[DD_HASH_HEX_LEN] = '\0';
}

/*
 * Hash specs
 */

static int dd_path_text_cmp(const void *a, const void *b)
{
    return strcmp(((const dd_path_t *)a)->text, ((const dd_path_t *)b)->text);
}

void dd_hash_spec_destroy(dd_hash_spec_t *spec)
{
    int i;

    if (!spec) return;
    for (i = 0; i < spec->path_cnt; i++)
        dd_path_free(&spec->paths[i]);
    free(spec->paths);
    free(spec);
}

/* Sorts the paths and drops repeats: the hashed object needs unique,
 * ordered names. */
static void dd_hash_spec_sort(dd_hash_spec_t *spec)
{
    int i, kept = 0;

    if (spec->path_cnt == 0) return; /* paths is NULL: qsort must not see it */
    qsort(spec->paths, (size_t)spec->path_cnt, sizeof(*spec->paths), dd_path_text_cmp);
    for (i = 0; i < spec->path_cnt; i++) {
        if (kept && !strcmp(spec->paths[kept - 1].text, spec->paths[i].text))
            dd_path_free(&spec->paths[i]);
        else
            spec->paths[kept++] = spec->paths[i];
    }
    spec->path_cnt = kept;
}

int dd_hash_spec_new(dd_hash_spec_t **specp, char *const *paths, int path_cnt, char *errstr,
                     size_t errstr_size)
{
    dd_hash_spec_t *spec = NULL;
    char why[128];
    int rc = DD_ERR_NOMEM, i;

    *specp = NULL;
    if (path_cnt < 0 || (path_cnt > 0 && !paths)) {
        dd_errstr_set(errstr, errstr_size, "invalid hash path list");
        return DD_ERR_ARG;
    }
    spec = calloc(1, sizeof(*spec));
    if (!spec || (path_cnt && !(spec->paths = calloc((size_t)path_cnt, sizeof(*spec->paths))))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        goto out;
    }
    for (i = 0; i < path_cnt; i++) {
        const char *p = paths[i] ? paths[i] : "";

        if ((rc = dd_path_parse(&spec->paths[i], p, strlen(p), 1, why, sizeof(why)))) {
            dd_errstr_set(errstr, errstr_size, "hash path \"%s\": %s", p, why);
            goto out;
        }
        spec->path_cnt++;
    }
    dd_hash_spec_sort(spec);
    *specp = spec;
    spec = NULL;
    rc = 0;
out:
    dd_hash_spec_destroy(spec);
    return rc;
}

/*
 * UTF-8
 */

/* Length of the valid multi-byte sequence at s (lead byte s[0] >= 0x80), or
 * 0. The second-byte ranges are what exclude overlongs (E0, F0), surrogates
 * (ED) and code points above U+10FFFF (F4). */
static size_t dd_utf8_seq(const unsigned char *s, size_t left)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t n, i;

    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0; /* stray continuation, overlong C0/C1, or F5..FF */
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (left < n || s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

int dd_utf8_valid(const void *buf, size_t len)
{
    const unsigned char *s = buf;
    size_t i = 0;

    while (i < len) {
        uint64_t w = 0x80;

        /* Payloads are mostly ASCII: skip 8 bytes at a time. */
        if (len - i >= 8) memcpy(&w, s + i, 8);
        if ((w & 0x8080808080808080ULL) == 0) {
            i += 8;
        } else if (s[i] < 0x80) {
            i++;
        } else {
            size_t n = dd_utf8_seq(s + i, len - i);

            if (!n) return 0;
            i += n;
        }
    }
    return 1;
}
