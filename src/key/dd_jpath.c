/*
 * Path compile and lookup (see dd_jpath.h). Lookups run for every key
 * placeholder and hash path of every message: a member is found by binary
 * search over the object's members in name order, which dd_json keeps.
 */
#include "dd_jpath.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

static int dd_jpath_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

void dd_jpath_release(dd_jpath_t *path)
{
    free(path->text);
    free(path->names);
    free(path->steps);
    memset(path, 0, sizeof(*path));
}

/* Explains why src[i] cannot continue a path (i == len: the path ended). */
static void dd_jpath_bad_char(const char *src, size_t len, size_t i, size_t col, char *errstr,
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
static int dd_jpath_parse_index(const char *src, size_t len, size_t *ip, int *index)
{
    size_t i = *ip + 1, start = i;
    long long v = 0;

    while (i < len && src[i] >= '0' && src[i] <= '9') {
        v = v * 10 + (src[i] - '0');
        if (v > INT_MAX) return -1;
        i++;
    }
    if (i == start || i >= len || src[i] != ']') return -1;
    if (src[start] == '0' && i - start > 1) return -1; /* "[01]" would spell "[1]" twice */
    *index = (int)v;
    *ip = i + 1;
    return 0;
}

/* Parses one step (name or index) at src[*ip] into step. */
static int dd_jpath_parse_step(dd_jpath_t *path, dd_jpath_step_t *step, const char *src, size_t len,
                               size_t *ip, size_t col, char *errstr, size_t errstr_size)
{
    size_t i = *ip, start = i;

    if (src[i] == '[') {
        if (dd_jpath_parse_index(src, len, ip, &step->index) < 0) {
            dd_errstr_set(errstr, errstr_size, "bad array index at column %zu (expected [N])",
                          col + start);
            return -1;
        }
        step->name = NULL;
        step->end = *ip;
        return 0;
    }
    while (i < len && dd_jpath_name_char(src[i]))
        i++;
    if (i == start) {
        dd_jpath_bad_char(src, len, i, col, errstr, errstr_size);
        return -1;
    }
    memcpy(path->names + start, src + start, i - start);
    step->name = path->names + start;
    step->name_len = i - start;
    step->end = *ip = i;
    return 0;
}

int dd_jpath_parse(dd_jpath_t *path, const char *src, size_t len, size_t col, char *errstr,
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
    path->names = malloc(len);
    path->steps = calloc(len, sizeof(*path->steps));
    if (!path->text || !path->names || !path->steps) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
        goto out;
    }
    while (i < len) {
        if (dd_jpath_parse_step(path, &path->steps[path->step_cnt], src, len, &i, col, errstr,
                                errstr_size) < 0)
            goto out;
        path->step_cnt++;
        if (i < len && src[i] == '.') {
            i++;
            if (i == len || !dd_jpath_name_char(src[i])) {
                dd_jpath_bad_char(src, len, i, col, errstr, errstr_size);
                goto out;
            }
        } else if (i < len && src[i] != '[') {
            dd_jpath_bad_char(src, len, i, col, errstr, errstr_size);
            goto out;
        }
    }
    rc = 0;
out:
    if (rc) dd_jpath_release(path);
    return rc;
}

/* Follows the first steps_max steps of path from the root. */
int dd_jpath_equal(const dd_jpath_t *a, const dd_jpath_t *b)
{
    if (a->step_cnt != b->step_cnt) return 0;
    for (int i = 0; i < a->step_cnt; i++) {
        const dd_jpath_step_t *x = &a->steps[i], *y = &b->steps[i];

        if (!x->name != !y->name) return 0;
        if (!x->name && x->index != y->index) return 0;
        if (x->name && (x->name_len != y->name_len || memcmp(x->name, y->name, x->name_len) != 0))
            return 0;
    }
    return 1;
}

static const dd_json_node_t *dd_jpath_walk(const dd_jpath_t *path, int steps_max,
                                           const dd_json_doc_t *doc, int *failed_at)
{
    const dd_json_node_t *cur = dd_json_root(doc);
    int k;

    for (k = 0; k < steps_max && cur; k++) {
        const dd_jpath_step_t *step = &path->steps[k];
        const dd_json_node_t *next;

        if (step->name)
            next = dd_json_member(doc, cur, step->name, step->name_len);
        else
            next = dd_json_index(cur, (uint32_t)step->index);
        if (!next && failed_at) *failed_at = k;
        cur = next;
    }
    return cur;
}

const dd_json_node_t *dd_jpath_lookup(const dd_jpath_t *path, const dd_json_doc_t *doc,
                                      int *failed_at)
{
    return dd_jpath_walk(path, path->step_cnt, doc, failed_at);
}

const char *dd_jpath_type_name(const dd_json_node_t *node)
{
    if (!node) return "absent";
    switch ((dd_json_type_t)node->type) {
    case DD_JSON_FALSE:
    case DD_JSON_TRUE:
        return "a boolean";
    case DD_JSON_NULL:
        return "null";
    case DD_JSON_NUMBER:
        return "a number";
    case DD_JSON_STRING:
        return "a string";
    case DD_JSON_ARRAY:
        return "an array";
    case DD_JSON_OBJECT:
        return "an object";
    }
    return "not a JSON value";
}

void dd_jpath_why_missing(const dd_jpath_t *path, const dd_json_doc_t *doc, int k, char *why,
                          size_t why_size)
{
    const dd_json_node_t *parent = dd_jpath_walk(path, k, doc, NULL);
    const dd_jpath_step_t *step = &path->steps[k];
    int prefix = k ? (int)path->steps[k - 1].end : 0;
    const char *pname = k ? path->text : "the payload";

    if (k == 0) prefix = (int)strlen(pname);
    if (!parent || parent->type != (step->name ? DD_JSON_OBJECT : DD_JSON_ARRAY))
        dd_errstr_set(why, why_size, "field %s is missing (%.*s is %s)", path->text, prefix, pname,
                      dd_jpath_type_name(parent));
    else if (!step->name)
        dd_errstr_set(why, why_size, "field %s is missing (%.*s has %u elements)", path->text,
                      prefix, pname, parent->len);
    else
        dd_errstr_set(why, why_size, "field %s is missing", path->text);
}
