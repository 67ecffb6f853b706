/*
 * Business key templates: compile, escape, render (see dd_key.h).
 *
 * Why this module exists: deduplication is only as good as the key. It
 * must come from business fields (never Kafka coordinates), a message whose
 * key cannot be built must be refused rather than keyed as "", and two
 * different payments must never render the same key: values are taken
 * exactly (strict JSON, exact numbers, strings with their length) and
 * escaped so that no value can imitate the template's separators.
 *
 * Why the escaping is injective. Write the template as
 *     L0 ${p1} L1 ${p2} ... L(n-1) ${pn} Ln
 * where L1..L(n-1) are not empty (a compile error otherwise) and L0, Ln may
 * be. Let S be the escape set: '%', 0x00-0x1F, 0x7F and every byte of
 * L1..Ln. E(v) writes each byte of v that is in S as %XX and every other
 * byte as itself; E is injective (%XX decodes back to one byte). The key is
 *     K = L0 E(v1) L1 E(v2) ... L(n-1) E(vn) Ln.
 * No literal holds '%' (a compile error), and a value's own '%' is escaped,
 * so every '%' in K starts an escape: K reads unambiguously as a sequence of
 * tokens, each an escape "%XX" or one raw byte. Given K, drop the known
 * prefix L0. E(v1) is made of escapes and raw bytes outside S, while L1
 * starts with a raw byte inside S (its first byte, which is in S and is not
 * '%'), so E(v1) is exactly the tokens before the first raw token in S. Drop
 * E(v1) and L1 and repeat; E(vn) is what precedes Ln, or the rest when Ln is
 * empty. Decoding each E(vi) gives back vi. So K determines (v1..vn): two
 * different tuples of value bytes never give the same key. (The argument
 * needs only the first byte of each of L1..Ln in S; escaping all their
 * bytes is the simpler rule to state and to check.)
 */
#include "dd_key.h"

#include <stdlib.h>
#include <string.h>

#include "dd_canon.h"
#include "dd_common.h"
#include "dd_jpath.h"
#include "dd_text.h"

/* A template piece: literal bytes ($$ already resolved) or a path. */
typedef struct {
    const char *lit; /* NULL for a path segment */
    size_t lit_len;
    dd_jpath_t path;
} dd_key_seg_t;

struct dd_key_tmpl_s {
    char *lits; /* all literal bytes; segments point into it */
    dd_key_seg_t *segs;
    int seg_cnt;
    unsigned char esc[256]; /* 1: a value writes this byte as %XX */
};

/* The key being rendered: out holds the first DD_KEY_MAX bytes, len counts
 * them all. */
typedef struct {
    char *out;
    size_t len;
    const unsigned char *esc;
} dd_key_out_t;

/*
 * Compiling
 */

void dd_key_tmpl_destroy(dd_key_tmpl_t *tmpl)
{
    int i;

    if (!tmpl) return;
    for (i = 0; i < tmpl->seg_cnt; i++)
        if (!tmpl->segs[i].lit) dd_jpath_release(&tmpl->segs[i].path);
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
    if (tmpl->seg_cnt && !tmpl->segs[tmpl->seg_cnt - 1].lit) {
        dd_errstr_set(errstr, errstr_size,
                      "${ at column %zu follows another placeholder with nothing between them: "
                      "their values could not be told apart (put a separator such as ':' "
                      "between them)",
                      *ip + 1);
        return DD_ERR_CONFIG;
    }
    rc = dd_jpath_parse(&seg->path, start, (size_t)(close - start), *ip + 3, errstr, errstr_size);
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
        if (text[i] == '%') {
            dd_errstr_set(errstr, errstr_size,
                          "'%%' at column %zu: dedupd escapes bytes of key values as %%XX, so "
                          "the template's literal text cannot contain '%%'",
                          i + 1);
            return DD_ERR_CONFIG;
        } else if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
            dd_errstr_set(errstr, errstr_size,
                          "control byte 0x%02x at column %zu: keys hold no control bytes",
                          (unsigned char)text[i], i + 1);
            return DD_ERR_CONFIG;
        } else if (text[i] != '$') {
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

/* The escape set (see the top of this file). 0 when there is no path. */
static int dd_key_tmpl_escapes(dd_key_tmpl_t *tmpl)
{
    int i, seen_path = 0;

    for (i = 0; i < 0x20; i++)
        tmpl->esc[i] = 1;
    tmpl->esc[0x7f] = 1;
    tmpl->esc['%'] = 1;
    for (i = 0; i < tmpl->seg_cnt; i++) {
        const dd_key_seg_t *seg = &tmpl->segs[i];

        if (!seg->lit)
            seen_path = 1;
        else if (seen_path)
            for (size_t j = 0; j < seg->lit_len; j++)
                tmpl->esc[(unsigned char)seg->lit[j]] = 1;
    }
    return seen_path;
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
    if (!dd_key_tmpl_escapes(tmpl)) {
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
 * What a template is made of
 */

int dd_key_tmpl_path_cnt(const dd_key_tmpl_t *tmpl)
{
    int n = 0;

    for (int i = 0; i < tmpl->seg_cnt; i++)
        n += !tmpl->segs[i].lit;
    return n;
}

const dd_jpath_t *dd_key_tmpl_path(const dd_key_tmpl_t *tmpl, int i)
{
    for (int s = 0; s < tmpl->seg_cnt; s++)
        if (!tmpl->segs[s].lit && i-- == 0) return &tmpl->segs[s].path;
    return NULL;
}

const dd_jpath_t *dd_key_tmpl_outside(const dd_key_tmpl_t *sub, const dd_key_tmpl_t *key)
{
    for (int i = 0; i < dd_key_tmpl_path_cnt(sub); i++) {
        const dd_jpath_t *p = dd_key_tmpl_path(sub, i);
        int found = 0;

        for (int k = 0; !found && k < dd_key_tmpl_path_cnt(key); k++)
            found = dd_jpath_equal(p, dd_key_tmpl_path(key, k));
        if (!found) return p;
    }
    return NULL;
}

int dd_key_tmpl_literal_outside(const dd_key_tmpl_t *tmpl, const char *accept)
{
    for (int i = 0; i < tmpl->seg_cnt; i++)
        for (size_t j = 0; tmpl->segs[i].lit && j < tmpl->segs[i].lit_len; j++)
            if (!strchr(accept, tmpl->segs[i].lit[j])) return (unsigned char)tmpl->segs[i].lit[j];
    return -1;
}

/* Appends n bytes of p at *len of out (what fits; *len counts them all). */
static void dd_key_text_put(char *out, size_t out_size, size_t *len, const char *p, size_t n)
{
    if (*len < out_size) memcpy(out + *len, p, n < out_size - *len ? n : out_size - *len);
    *len += n;
}

size_t dd_key_tmpl_text(const dd_key_tmpl_t *tmpl, char *out, size_t out_size)
{
    size_t len = 0;

    for (int i = 0; i < tmpl->seg_cnt; i++) {
        const dd_key_seg_t *seg = &tmpl->segs[i];

        if (!seg->lit) {
            dd_key_text_put(out, out_size, &len, "${", 2);
            dd_key_text_put(out, out_size, &len, seg->path.text, strlen(seg->path.text));
            dd_key_text_put(out, out_size, &len, "}", 1);
            continue;
        }
        for (size_t j = 0; j < seg->lit_len; j++)
            dd_key_text_put(out, out_size, &len, seg->lit[j] == '$' ? "$$" : &seg->lit[j],
                            seg->lit[j] == '$' ? 2 : 1);
    }
    if (out_size) out[len < out_size ? len : out_size - 1] = '\0';
    return len;
}

/*
 * Rendering
 */

static void dd_key_put_raw(dd_key_out_t *k, const void *p, size_t n)
{
    if (k->len < DD_KEY_MAX)
        memcpy(k->out + k->len, p, n < DD_KEY_MAX - k->len ? n : DD_KEY_MAX - k->len);
    k->len += n;
}

/* Value bytes: runs outside the escape set in one go, the rest as %XX. */
static void dd_key_put_value(dd_key_out_t *k, const void *buf, size_t n)
{
    const unsigned char *p = buf, *end = p + n, *run;

    while (p < end) {
        char e[3];

        run = p;
        while (p < end && !k->esc[*p])
            p++;
        if (p > run) dd_key_put_raw(k, run, (size_t)(p - run));
        if (p == end) break;
        e[0] = '%';
        dd_text_hex(e + 1, p, 1, 1);
        dd_key_put_raw(k, e, 3);
        p++;
    }
}

/* Canonical number text arrives here piece by piece (a writer without a
 * buffer drains every piece). */
static int dd_key_number_drain(dd_canon_w_t *w, const void *p, size_t n)
{
    dd_key_put_value(w->ctx, p, n);
    return 0;
}

/* Writes the value of a path segment. */
static dd_key_status_t dd_key_render_value(dd_key_out_t *k, const dd_jpath_t *path,
                                           const dd_json_doc_t *doc, char *why, size_t why_size)
{
    int failed_at = 0;
    const dd_json_node_t *v = dd_jpath_lookup(path, doc, &failed_at);
    dd_canon_w_t w = {.drain = dd_key_number_drain, .ctx = k};

    if (!v) {
        dd_jpath_why_missing(path, doc, failed_at, why, why_size);
        return DD_KEY_MISSING;
    }
    switch ((dd_json_type_t)v->type) {
    case DD_JSON_STRING:
        dd_key_put_value(k, v->str, v->len);
        return DD_KEY_OK;
    case DD_JSON_NUMBER:
        dd_canon_number(&w, v->str, v->len);
        return DD_KEY_OK;
    case DD_JSON_TRUE:
        dd_key_put_value(k, "true", 4);
        return DD_KEY_OK;
    case DD_JSON_FALSE:
        dd_key_put_value(k, "false", 5);
        return DD_KEY_OK;
    default:
        dd_errstr_set(why, why_size, "field %s is %s", path->text, dd_jpath_type_name(v));
        return DD_KEY_MISSING;
    }
}

dd_key_status_t dd_key_render(const dd_key_tmpl_t *tmpl, const dd_json_doc_t *doc,
                              char out[DD_KEY_MAX + 1], size_t *out_len, char *why, size_t why_size)
{
    dd_key_out_t k = {out, 0, tmpl->esc};
    int i;

    for (i = 0; i < tmpl->seg_cnt; i++) {
        const dd_key_seg_t *seg = &tmpl->segs[i];

        if (seg->lit) {
            dd_key_put_raw(&k, seg->lit, seg->lit_len);
        } else if (dd_key_render_value(&k, &seg->path, doc, why, why_size) != DD_KEY_OK) {
            out[0] = '\0';
            *out_len = 0;
            return DD_KEY_MISSING;
        }
    }
    *out_len = k.len < DD_KEY_MAX ? k.len : DD_KEY_MAX;
    out[*out_len] = '\0';
    if (k.len > DD_KEY_MAX) {
        dd_errstr_set(why, why_size, "key is %zu bytes, at most %d", k.len, DD_KEY_MAX);
        return DD_KEY_TOO_LONG;
    }
    return DD_KEY_OK;
}
