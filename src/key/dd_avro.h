/*
 * Avro payloads: the Confluent wire format around them, writer schemas,
 * and the binary decoding of a record into JSON text.
 *
 * Keys, hashes, lane and shard keys and handlers all work on one strict
 * JSON document (dd_json.h). An Avro record is therefore rendered as JSON
 * text with an exact mapping (docs/KEYS.md, Avro) and then parsed like any
 * JSON payload: one document, one set of rules, and a record re-encoded
 * under another schema version with the same values gives the same text.
 *
 * The input comes from producers dedupd does not control, so decoding is
 * bounded: every declared length and count is checked against the bytes
 * left before anything is allocated or looped over, nesting is limited to
 * DD_AVRO_MAX_DEPTH, and the JSON text to max_text bytes. A failure says
 * what and at which byte of the Avro body ("string of 9 bytes declared,
 * only 3 left at byte 12").
 */
#ifndef DD_AVRO_H
#define DD_AVRO_H

#include <stddef.h>
#include <stdint.h>

/* The Confluent wire format: a zero byte, a 4-byte big-endian schema id,
 * then the payload. */
#define DD_AVRO_HEADER_LEN 5

/* Most nested records, arrays, maps and unions in one value. */
#define DD_AVRO_MAX_DEPTH 256

/* Most digits of a decimal's scale, and most bytes of its unscaled value. */
#define DD_AVRO_MAX_SCALE 1000
#define DD_AVRO_MAX_DECIMAL_BYTES 128

/* Most types (every mention of a primitive counts) in one writer schema
 * and its references: a bound on the memory of a hostile schema, far above
 * real ones. The parse is O(n log n) in the schema's size. */
#define DD_AVRO_MAX_NODES 500000

/* Bytes of a schema's fingerprint: SHA-256. */
#define DD_AVRO_FINGERPRINT_LEN 32

typedef struct dd_avro_schema_s dd_avro_schema_t;

/* Splits a payload in the Confluent wire format into its schema id and the
 * body after the header. DD_ERR_PERMANENT (errstr: a wrong magic byte, a
 * payload shorter than the header, an id of 2^31 or more) or 0. */
int dd_avro_frame(const void *payload, size_t len, uint32_t *id, const unsigned char **body,
                  size_t *body_len, char *errstr, size_t errstr_size);

/* Parses a writer schema (the JSON text the registry holds). The text
 * must be strict JSON (dd_json.h: no member twice in an object, which two
 * Avro libraries could read two ways). Returns 0, DD_ERR_PERMANENT with
 * errstr saying what is wrong, or DD_ERR_NOMEM. */
int dd_avro_schema_new(dd_avro_schema_t **schemap, const char *json, size_t len, char *errstr,
                       size_t errstr_size);

/* A schema the writer schema refers to (a Confluent schema reference): its
 * JSON text, and what it is for messages ("subject money-value version
 * 1"). */
typedef struct {
    const char *json;
    size_t len;
    const char *what;
} dd_avro_text_t;

/* dd_avro_schema_new for a writer schema that uses named types of others:
 * refs[0..ref_cnt) are parsed first, in order (each one's own references
 * before it), their named types known to the ones after them; the writer
 * schema is json. A failure in a reference names it. */
int dd_avro_schema_new_refs(dd_avro_schema_t **schemap, const dd_avro_text_t *refs, size_t ref_cnt,
                            const char *json, size_t len, char *errstr, size_t errstr_size);
void dd_avro_schema_destroy(dd_avro_schema_t *schema);

/* The schema's fingerprint: SHA-256 of its Parsing Canonical Form (the
 * Avro specification's), in which a decimal also keeps "logicalType" and
 * "scale", since the decoding reads them. Two writer schemas with one
 * fingerprint decode every record into the same JSON text; a schema
 * without decimals has the fingerprint Avro's libraries compute. */
const unsigned char *dd_avro_schema_fingerprint(const dd_avro_schema_t *schema);

/* Decodes body (one datum of schema, nothing after it) into JSON text:
 * *textp is malloc'd, NUL-terminated, *text_len bytes before the NUL.
 * max_text bounds the text. Returns 0, DD_ERR_PERMANENT (errstr: what and
 * at which byte, counted from `at` bytes before body: the header's length
 * gives positions in the whole message) or DD_ERR_NOMEM. Thread-safe on a
 * shared schema. */
int dd_avro_decode(const dd_avro_schema_t *schema, const unsigned char *body, size_t len, size_t at,
                   size_t max_text, char **textp, size_t *text_len, char *errstr,
                   size_t errstr_size);

#endif /* DD_AVRO_H */
