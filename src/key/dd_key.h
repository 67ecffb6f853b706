/*
 * Business keys: a template over the JSON payload, rendered so that two
 * different payments never share a key.
 *
 * The key is rendered from a template ("pay:${merchant_id}:${order_no}",
 * paths as in dd_jpath.h) over a strict dd_json document; it never comes
 * from the Kafka message id, key or offset. docs/KEYS.md is the full
 * specification with test vectors.
 *
 * Template: literal bytes with ${path} placeholders; "$$" is a literal '$'.
 * Compile errors (with the 1-based column): a '$' not starting "${" or
 * "$$", an unclosed "${", a bad path, no placeholder at all (every message
 * would get the same key), two placeholders with nothing between them
 * ("${a}${b}": "1"+"23" and "12"+"3" would meet), a '%' in the literal text
 * ('%' is the escape character of values), a control byte (0x01-0x1F, 0x7F)
 * in the literal text, literal text over DD_KEY_MAX.
 *
 * Values: a string as its decoded UTF-8 bytes (NUL included), a number in
 * the canonical form of dd_canon.h ("7" for 7, 7.0 and 7e0), true/false as
 * such; a path that is absent, null, an object or an array gives
 * DD_KEY_MISSING. A string "1" and the number 1 give the same key on
 * purpose: the same business id sent with another type is the same payment.
 *
 * Escaping: in a value, every byte of the template's escape set is written
 * as '%' and two upper-case hex digits. The set is '%', the controls
 * 0x00-0x1F and 0x7F, and every byte of the literal text after the first
 * placeholder (for "pay:${m}:${o}": ':'). So no two different tuples of
 * values render the same key (proof in dd_key.c and docs/KEYS.md), and a
 * key holds no NUL or control byte: it is safe as a C string, in logs and
 * in Kafka headers.
 *
 * Keys are at most DD_KEY_MAX bytes after escaping. Rendering never
 * allocates and may run in several threads at once on the same template.
 */
#ifndef DD_KEY_H
#define DD_KEY_H

#include <stddef.h>

#include "dd_jpath.h"
#include "dd_json.h"

#define DD_KEY_MAX 255

/* The key format this dedupd renders (keys and request hashes), recorded
 * on the dedup table by `dedupd migrate` (dd_migrate.h). Format 1 was the
 * one before any was recorded. Change it with any change to the rules
 * above, dd_canon.h or dd_hash.h that changes a key or a hash. */
#define DD_KEY_FORMAT 2

typedef enum {
    DD_KEY_OK = 0,
    DD_KEY_MISSING = 1,  /* a path is absent, null, an object or an array */
    DD_KEY_TOO_LONG = 2, /* rendered key longer than DD_KEY_MAX bytes */
} dd_key_status_t;

typedef struct dd_key_tmpl_s dd_key_tmpl_t;

/* Compiles a key template; errors go to errstr. Returns 0, DD_ERR_CONFIG
 * or DD_ERR_NOMEM. */
int dd_key_tmpl_new(dd_key_tmpl_t **tmplp, const char *tmpl, char *errstr, size_t errstr_size);
void dd_key_tmpl_destroy(dd_key_tmpl_t *tmpl);

/* What a compiled template is made of, for the checks between templates
 * (a lane key's or shard key's fields must be the business key's): they
 * ask the parsed template, never its text, where "$${a}" is literal text
 * and no field at all. */

/* The ${path}s of tmpl, in template order (a path may come twice). */
int dd_key_tmpl_path_cnt(const dd_key_tmpl_t *tmpl);
const dd_jpath_t *dd_key_tmpl_path(const dd_key_tmpl_t *tmpl, int i);
/* The first ${path} of sub that names no field of key's ${path}s, or NULL
 * when every field sub renders is one key renders: two messages with the
 * same key then render the same sub. */
const dd_jpath_t *dd_key_tmpl_outside(const dd_key_tmpl_t *sub, const dd_key_tmpl_t *key);
/* The first byte of tmpl's literal text (after "$$" is read as '$') that is
 * not in accept, or -1 when every literal byte is. */
int dd_key_tmpl_literal_outside(const dd_key_tmpl_t *tmpl, const char *accept);
/* The template written back from its parsed form into out (NUL-terminated;
 * "$$" for each literal '$', each path in its one spelling): what the
 * recorded shard layout compares. Returns its length, or the length it
 * needs when that is out_size or more (as snprintf). */
size_t dd_key_tmpl_text(const dd_key_tmpl_t *tmpl, char *out, size_t out_size);

/* Renders the key of doc (the last successful dd_json_parse) into out,
 * NUL-terminated, *out_len bytes. On DD_KEY_MISSING out is "" and *out_len
 * 0, why says which path and what was found; on DD_KEY_TOO_LONG out holds
 * the first DD_KEY_MAX bytes (*out_len = DD_KEY_MAX, for dead-letter
 * headers) and why the full length. */
dd_key_status_t dd_key_render(const dd_key_tmpl_t *tmpl, const dd_json_doc_t *doc,
                              char out[DD_KEY_MAX + 1], size_t *out_len, char *why,
                              size_t why_size);

#endif /* DD_KEY_H */
