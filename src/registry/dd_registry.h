/*
 * The Confluent Schema Registry client, and the decoding of a route's
 * payloads into the JSON text the parse step reads (dd_parse.h).
 *
 * A schema id names one schema for ever, so each is fetched once
 * (GET <url>/schemas/ids/<id>, with the schemas it references, over
 * libcurl) and kept for the life of the process. The fetching and the
 * parsing of schemas happen on a thread of the registry's own, never on
 * the caller's: a registry that answers slowly, or a schema that takes
 * long to parse, holds up only the messages that need that schema. A
 * caller that cannot wait (the consumer) is told the fetch is under way
 * and asks again later; one that can (replay) waits for it.
 *
 * The registry's answers are classified as dedupd classifies everything:
 * the registry down, slow, refusing the credentials, answering an error or
 * answering something that is not a registry's answer (an HTML maintenance
 * page) is retriable: the message waits, nothing is remembered, and the id
 * is fetched again after a backoff. An id the registry says it does not
 * have (404, error code 40403) is a dead letter schema_unknown, and a
 * schema that is no valid Avro schema one of bad_avro; both are
 * remembered. A schema whose fingerprint differs from the one the
 * database recorded for its id (the verify function) is never used: a
 * fault, logged as an error, the messages waiting. Credentials go to
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

/* What dd_registry_schema and dd_registry_decode return, with opts.nowait,
 * while the schema is being fetched: ask again later. */
#define DD_REGISTRY_PENDING 1

/* Why a fetch failed (the metric dedupd_schema_registry_faults_total). */
typedef enum {
    DD_REGISTRY_FAULT_UNREACHABLE, /* no answer in time, or an HTTP error */
    DD_REGISTRY_FAULT_BAD_ANSWER,  /* a 200 that is no registry answer; a reference it lacks */
    DD_REGISTRY_FAULT_CHANGED,     /* another schema than the database recorded for the id */
    DD_REGISTRY_FAULT_UNVERIFIED,  /* the database could not be asked about the id */
    DD_REGISTRY_FAULT_CNT
} dd_registry_fault_t;

/* "unreachable", "bad_answer", "changed_schema", "unverified". */
const char *dd_registry_fault_name(int fault);

/* Checks a schema's fingerprint (dd_avro_schema_fingerprint) for id
 * against what the database recorded, recording it when there is nothing
 * yet. Returns 0 (the same, or recorded now), DD_ERR_PERMANENT (another
 * one is recorded: errstr says both) or another dd_err_t (the database
 * could not be asked: errstr says why). Called on the registry's thread. */
typedef int (*dd_registry_verify_fn)(void *opaque, uint32_t id, const unsigned char *fingerprint,
                                     char *errstr, size_t errstr_size);

typedef struct {
    int nowait; /* never wait for a fetch: DD_REGISTRY_PENDING instead */
    /* a failed fetch is tried again after backoff_initial_ms, doubled
     * after each failure up to backoff_max_ms (nowait only: a caller that
     * waits asks again at its own pace) */
    int64_t backoff_initial_ms;
    int64_t backoff_max_ms;
    dd_registry_verify_fn verify; /* NULL: fingerprints are not checked */
    void *verify_opaque;
} dd_registry_opts_t;

/* conf: the schema_registry settings (url set); borrowed, must outlive the
 * registry. opts: copied; NULL for waiting callers, no verify, 100 ms
 * doubling to 30 s. Call from one thread before any other uses libcurl. */
int dd_registry_new(dd_registry_t **regp, const dd_conf_registry_t *conf,
                    const dd_registry_opts_t *opts, char *errstr, size_t errstr_size);
/* Stops the fetch thread (a request under way is abandoned within about a
 * second) and frees every schema. */
void dd_registry_destroy(dd_registry_t *reg);

/* The writer schema of id. Returns 0 with *schemap (the registry's, alive
 * as long as it); DD_ERR_PERMANENT with *reason schema_unknown (the
 * registry does not have it) or bad_avro (it is no valid Avro schema);
 * DD_ERR_RETRIABLE when the registry could not give it (errstr: why,
 * without credentials); DD_REGISTRY_PENDING (nowait only) while it is
 * fetched. Without nowait, waits for the fetch. Thread-safe. */
int dd_registry_schema(dd_registry_t *reg, uint32_t id, const dd_avro_schema_t **schemap,
                       dd_reason_t *reason, char *errstr, size_t errstr_size);

/* The latest version of subject (its JSON text into *textp, malloc'd; its
 * id and version), on the calling thread, within schema_registry.timeout:
 * what `dedupd describe` documents. Returns 0, DD_ERR_PERMANENT (no such
 * subject) or DD_ERR_RETRIABLE (no answer, or no registry's answer),
 * errstr saying why. */
int dd_registry_latest(dd_registry_t *reg, const char *subject, char **textp, uint32_t *idp,
                       int *versionp, char *errstr, size_t errstr_size);

/* Schema fetches made so far (GET /schemas/ids/N; each id once when all
 * goes well). */
uint64_t dd_registry_fetches(dd_registry_t *reg);
/* Fetches finished so far, whatever their outcome: when it moves, the
 * answers of dd_registry_schema may have changed. */
uint64_t dd_registry_settled(dd_registry_t *reg);
/* Failed fetches so far, by dd_registry_fault_t. */
void dd_registry_faults(dd_registry_t *reg, uint64_t out[DD_REGISTRY_FAULT_CNT]);

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
 * schema_unknown); DD_ERR_RETRIABLE (the registry could not give the
 * schema: try again later); DD_REGISTRY_PENDING (nowait: its schema is
 * being fetched); DD_ERR_NOMEM. errstr says why. */
int dd_registry_decode(dd_registry_t *reg, int format, const void *payload, size_t len,
                       int64_t max_payload_bytes, dd_registry_text_t *out, dd_reason_t *reason,
                       char *errstr, size_t errstr_size);

/* The parse step refused the JSON text of a payload in format with
 * *reason: for a decoded Avro record (only a map with a key twice can be)
 * that is bad_avro, and error (error_size bytes) says it was the decoded
 * record. Other formats' reasons and errors stay. */
void dd_registry_parse_failed(int format, dd_reason_t *reason, char *error, size_t error_size);

#endif /* DD_REGISTRY_H */
