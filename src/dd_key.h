/*
 * Business keys and request hashes.
 *
 * The business key is rendered from a template over the JSON payload
 * ("pay:${merchant_id}:${order_no}", paths like ${a.b[0].c}); it never comes
 * from the Kafka message id, key or offset. The request hash is SHA-256 over a
 * canonical form of the payload (sorted object keys, no insignificant
 * whitespace, normalised numbers), so a re-serialised duplicate hashes the
 * same and a changed payload does not.
 *
 * Template syntax: literal bytes with ${path} placeholders. A path is field
 * names of [A-Za-z0-9_-] separated by '.', each optionally followed by array
 * indexes [N] (decimal, no leading zeros), e.g. ${a.b[0].c}; a path may also
 * start with an index (${[0].id}) for array payloads. "$$" is a literal '$';
 * any other '$' not starting "${" is a compile error, and so is a template
 * without placeholders (every message would get the same key). Errors name
 * the 1-based column. With duplicate object members the first one is used.
 *
 * Canonical JSON (what the hash covers):
 *   - objects: members sorted by bytewise (strcmp) comparison of their UTF-8
 *     names; members with the same name are all kept, in their input order
 *     (stable sort), so {"a":1,"a":2} and {"a":2,"a":1} differ;
 *   - no whitespace at all; true, false, null as such;
 *   - strings: '"' and '\\' escaped as \" and \\, control bytes < 0x20 as
 *     \b \f \n \r \t or \u00XX (lower-case hex); every other byte raw, so
 *     "\u00e9" and a raw "é" hash the same;
 *   - numbers: an integral value with |x| <= 2^53 as plain integer digits
 *     (1.0, 1e0 and 1 all give "1"; -0 gives "0"); any other finite value as
 *     the shortest printf "%.*g" (precision 1..17) that reads back as the same
 *     double: 0.1, 1.5, 1e+300, 1.2345e-07,
 *     1.152921504606847e+18 (2^60), 9007199254740994 (2^53 + 2).
 *     Infinite values (cJSON reads 1e999 as inf) are written as null.
 * The canonical text is itself valid JSON and canonicalises to itself.
 *
 * Rendering and hashing never change the JSON and are safe to call from
 * several threads at once on the same template or spec.
 */
#ifndef DD_KEY_H
#define DD_KEY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define DD_KEY_MAX 255
#define DD_HASH_LEN 32

typedef enum {
    DD_KEY_OK = 0,
    DD_KEY_MISSING = 1,  /* a path is missing, null, an object or an array */
    DD_KEY_TOO_LONG = 2, /* rendered key longer than DD_KEY_MAX bytes */
} dd_key_status_t;

typedef struct dd_key_tmpl_s dd_key_tmpl_t;
typedef struct dd_hash_spec_s dd_hash_spec_t;

/* Compiles a key template. Errors (unclosed ${, bad path) go to errstr. */
int dd_key_tmpl_new(dd_key_tmpl_t **tmplp, const char *tmpl, char *errstr, size_t errstr_size);
void dd_key_tmpl_destroy(dd_key_tmpl_t *tmpl);

/* Renders the key into out (NUL-terminated, *out_len bytes). Strings are
 * copied verbatim, integers in decimal, other numbers in canonical form,
 * booleans as true/false. On DD_KEY_MISSING / DD_KEY_TOO_LONG, why says
 * which path and what was found. */
/* On DD_KEY_MISSING out is "" and *out_len 0; on DD_KEY_TOO_LONG out holds
 * the first DD_KEY_MAX bytes (*out_len = DD_KEY_MAX, for dead-letter headers)
 * and why the full length. No heap allocation. */
dd_key_status_t dd_key_render(const dd_key_tmpl_t *tmpl, const cJSON *json,
                              char out[DD_KEY_MAX + 1], size_t *out_len, char *why,
                              size_t why_size);

/* paths: the dedup.hash list (same path syntax as in templates, without the
 * ${ }); path_cnt 0 means the whole payload. A path listed twice counts once.
 * Errors go to errstr as "hash path \"x[\": bad array index at column 2". */
int dd_hash_spec_new(dd_hash_spec_t **specp, char *const *paths, int path_cnt, char *errstr,
                     size_t errstr_size);
void dd_hash_spec_destroy(dd_hash_spec_t *spec);

/* SHA-256 of the canonical form of the payload (or of the spec's paths: an
 * object mapping each listed path to its value, null when absent).
 * spec may be NULL (whole payload). Returns 0 or a negative dd_err_t. */
int dd_key_hash(const dd_hash_spec_t *spec, const cJSON *json, unsigned char out[DD_HASH_LEN]);

/* The canonical text itself (malloc'd, NUL-terminated), for tests and replay
 * reports. Returns 0 or a negative dd_err_t. */
int dd_json_canonical(const cJSON *json, char **outp, size_t *out_len);

/* Lower-case hex of a hash: 64 characters and a NUL. */
#define DD_HASH_HEX_LEN (2 * DD_HASH_LEN)
void dd_key_hash_hex(const unsigned char hash[DD_HASH_LEN], char out[DD_HASH_HEX_LEN + 1]);

/* 1 when buf is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int dd_utf8_valid(const void *buf, size_t len);

#endif /* DD_KEY_H */
