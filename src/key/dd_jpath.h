/*
 * Paths into a payload: the ${...} of a key template and the entries of
 * dedup.hash.
 *
 * Syntax: field names of [A-Za-z0-9_-] separated by '.', each optionally
 * followed by array indexes [N] (decimal, no leading zeros, <= INT_MAX),
 * e.g. a.b[0].c; a path may also start with an index ([0].id) for array
 * payloads. One spelling per path, so two paths that look different never
 * name the same field. Errors name the 1-based column.
 */
#ifndef DD_JPATH_H
#define DD_JPATH_H

#include <stddef.h>

#include "dd_json.h"

/* One step: a member name, or an array index when name is NULL. */
typedef struct {
    const char *name; /* points into dd_jpath_t.names, name_len bytes */
    size_t name_len;
    int index;
    size_t end; /* offset in the path text just after this step */
} dd_jpath_step_t;

typedef struct {
    char *text; /* the path as written, e.g. "a.b[0].c", NUL-terminated */
    char *names;
    dd_jpath_step_t *steps;
    int step_cnt;
} dd_jpath_t;

/* Compiles src[0..len) into path; col is the 1-based column of src[0] in
 * what the user wrote. Returns 0, DD_ERR_CONFIG or DD_ERR_NOMEM. */
int dd_jpath_parse(dd_jpath_t *path, const char *src, size_t len, size_t col, char *errstr,
                   size_t errstr_size);
/* Frees what parse allocated; a zeroed or freed path is fine. */
void dd_jpath_release(dd_jpath_t *path);

/* 1 when a and b name the same field (the same steps), else 0. */
int dd_jpath_equal(const dd_jpath_t *a, const dd_jpath_t *b);

/* The value path names in doc, or NULL when a step finds nothing (*failed_at,
 * if not NULL, then says which step). */
const dd_json_node_t *dd_jpath_lookup(const dd_jpath_t *path, const dd_json_doc_t *doc,
                                      int *failed_at);

/* Explains why step k of path found nothing: "field a.x.y is missing (a.x
 * is a string)". */
void dd_jpath_why_missing(const dd_jpath_t *path, const dd_json_doc_t *doc, int k, char *why,
                          size_t why_size);

/* "a string", "an object", "null", ... for messages. */
const char *dd_jpath_type_name(const dd_json_node_t *node);

#endif /* DD_JPATH_H */
