/*
 * Request hashes: SHA-256 over the canonical JSON (dd_canon.h) of the
 * payload, or of the fields dedup.hash lists.
 *
 * Same key and same hash is a duplicate (skip it); same key and another hash
 * is a conflict (dead-letter it, never overwrite). So the hash must not
 * change when a producer re-serialises a payload, and must change when any
 * covered value changes: it is computed from the exact text through the
 * strict parser, never from doubles or C strings.
 *
 * Hash input: without paths, the canonical JSON of the whole payload. With
 * paths (the dedup.hash list, same syntax as key placeholders, without the
 * ${ }), the canonical JSON of an object that maps each path's text to its
 * value, members in bytewise order of the path texts; a path that finds
 * nothing is left out, so an absent field and a null one differ. A path
 * listed twice counts once. docs/KEYS.md has test vectors.
 *
 * Hashing streams the canonical text into the digest through a small stack
 * buffer, allocates nothing, and may run in several threads at once on the
 * same spec (each on its own document).
 */
#ifndef DD_HASH_H
#define DD_HASH_H

#include <stddef.h>

#include "dd_json.h"

#define DD_HASH_LEN 32
#define DD_HASH_HEX_LEN (2 * DD_HASH_LEN)

typedef struct dd_hash_spec_s dd_hash_spec_t;

/* paths: the dedup.hash list; path_cnt 0 means the whole payload. Errors
 * go to errstr as "hash path \"x[\": bad array index at column 2". */
int dd_hash_spec_new(dd_hash_spec_t **specp, char *const *paths, int path_cnt, char *errstr,
                     size_t errstr_size);
void dd_hash_spec_destroy(dd_hash_spec_t *spec);

/* SHA-256 of doc's hash input (the last successful dd_json_parse); spec may
 * be NULL (whole payload). Returns 0 or a negative dd_err_t. */
int dd_hash_doc(const dd_hash_spec_t *spec, const dd_json_doc_t *doc,
                unsigned char out[DD_HASH_LEN]);

/* The same for a payload, parsed into a document of its own (for callers
 * that no longer hold one). DD_ERR_PERMANENT when it is not strict JSON. */
int dd_hash_payload(const dd_hash_spec_t *spec, const void *payload, size_t len,
                    unsigned char out[DD_HASH_LEN]);

/* The hash input itself (malloc'd, NUL-terminated), for tests, docs and
 * reports. Returns 0 or a negative dd_err_t. */
int dd_hash_input(const dd_hash_spec_t *spec, const dd_json_doc_t *doc, char **outp,
                  size_t *out_len);

/* SHA-256 of the concatenation of cnt byte strings (parts[i], lens[i]
 * bytes; a NULL part with length 0 is empty). The caller makes the
 * concatenation unambiguous (lengths before variable parts). Returns 0 or
 * a negative dd_err_t. */
int dd_hash_bytes(const void *const *parts, const size_t *lens, int cnt,
                  unsigned char out[DD_HASH_LEN]);

/* Lower-case hex of a hash: 64 characters and a NUL. */
void dd_hash_hex(const unsigned char hash[DD_HASH_LEN], char out[DD_HASH_HEX_LEN + 1]);

#endif /* DD_HASH_H */
