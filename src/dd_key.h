/*
 * Business keys and request hashes.
 *
 * The business key is rendered from a template over the JSON payload
 * ("pay:${merchant_id}:${order_no}", paths like ${a.b[0].c}); it never comes
 * from the Kafka message id, key or offset. The request hash is SHA-256 over a
 * canonical form of the payload (sorted object keys, no insignificant
 * whitespace, normalised numbers), so a re-serialised duplicate hashes the
 * same and a changed payload does not.
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
dd_key_status_t dd_key_render(const dd_key_tmpl_t *tmpl, const cJSON *json,
                              char out[DD_KEY_MAX + 1], size_t *out_len, char *why,
                              size_t why_size);

/* paths: the dedup.hash list; path_cnt 0 means the whole payload. */
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

/* 1 when buf is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int dd_utf8_valid(const void *buf, size_t len);

#endif /* DD_KEY_H */
