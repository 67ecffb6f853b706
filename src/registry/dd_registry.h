/*
 * The Confluent Schema Registry client, and the decoding of a route's
 * payloads into the JSON text the parse step reads (dd_parse.h).
 *
 * A schema id names one schema for ever, so each is fetched once
 * (GET <url>/schemas/ids/<id>, over libcurl) and kept for the life of the
 * process; threads asking for an id being fetched wait for that fetch
 * instead of asking again. The registry's answers are classified as
 * dedupd classifies everything: the registry down, slow, refusing the
 * credentials or answering an error is retriable (the message waits); an
 * id the registry says it does not have (404, error code 40403) is a dead
 * letter schema_unknown, and is remembered as such. Credentials go to
 * libcurl only, never into a message.
 */
#ifndef DD_REGISTRY_H
#define DD_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "dd_avro.h"
#include "dd_conf.h"
#include "dd_stats.h"

typedef struct dd_registry_s dd_registry_t;

/* conf: the schema_registry settings (url set); borrowed, must outlive the
 * registry. Call from one thread before any other uses libcurl. */
int dd_registry_new(dd_registry_t **regp, const dd_conf_registry_t *conf, char *errstr,
                    size_t errstr_size);
void dd_registry_destroy(dd_registry_t *reg);

/* The writer schema of id. Returns 0 with *schemap (the registry's, alive
 * as long as it); DD_ERR_PERMANENT with *reason schema_unknown (the
 * registry does not have it) or bad_avro (it is no valid Avro schema);
 * DD_ERR_RETRIABLE when the registry could not answer (errstr: why,
 * without credentials). Thread-safe. */
int dd_registry_schema(dd_registry_t *reg, uint32_t id, const dd_avro_schema_t **schemap,
                       dd_reason_t *reason, char *errstr, size_t errstr_size);

/* Requests made to the registry so far (each id once when all goes well). */
uint64_t dd_registry_fetches(dd_registry_t *reg);

/* A decoded payload: the JSON text the parse step reads. */
typedef struct {
    const char *text; /* points into the payload, or at owned */
    size_t len;
    char *owned; /* malloc'd text of an Avro record (the caller frees it), or NULL */
} dd_registry_text_t;

/* The JSON text of a payload of a route in format (dd_conf_format_t): the
 * payload itself for json, the text after the header for json_sr, the
 * decoded record for avro (reg may be NULL for the other two). A payload
 * over max_payload_bytes (the route's dedup.max_payload_bytes) is refused
 * first, whatever its format. Returns 0; DD_ERR_PERMANENT with *reason
 * (payload_too_large; bad_json: a json_sr header is wrong; bad_avro,
 * schema_unknown); DD_ERR_RETRIABLE (the registry could not answer: try
 * again later); DD_ERR_NOMEM. errstr says why. */
int dd_registry_decode(dd_registry_t *reg, int format, const void *payload, size_t len,
                       int64_t max_payload_bytes, dd_registry_text_t *out, dd_reason_t *reason,
                       char *errstr, size_t errstr_size);

/* The parse step refused the JSON text of a payload in format with
 * *reason: for a decoded Avro record (only a map with a key twice can be)
 * that is bad_avro, and error (error_size bytes) says it was the decoded
 * record. Other formats' reasons and errors stay. */
void dd_registry_parse_failed(int format, dd_reason_t *reason, char *error, size_t error_size);

#endif /* DD_REGISTRY_H */
