/*
 * The dead-letter reasons, as one table: each reason's enum name, its
 * string (the dedupd.reason header, the metrics' reason label, the
 * summary's dlq_<reason> field), its flags and the sentence that explains
 * it. The enum, the name array, `dedupd --help-reasons` and the reasons
 * list of docs/OPERATIONS.md are generated from it, so adding a reason is
 * one line here (a unit test fails until the documents are regenerated).
 *
 * X(ID, name, flags, help): the order is the enum's, and the order every
 * list prints the reasons in.
 */
#ifndef DD_REASONS_H
#define DD_REASONS_H

/* Flags of a reason: where it can occur. DD_REASON_F_SHARDS reasons are
 * listed (metrics, summary) only with several database shards; the others
 * say when the reason can occur, for the documents. */
#define DD_REASON_F_SHARDS 0x1   /* with several database shards */
#define DD_REASON_F_AVRO 0x2     /* routes in avro format */
#define DD_REASON_F_EXTERNAL 0x4 /* routes in external mode */

/* clang-format off */
#define DD_REASON_TABLE(X)                                                                         \
    X(BAD_JSON, "bad_json", 0,                                                                     \
      "Not UTF-8, not strict JSON (docs/KEYS.md), or empty.")                                      \
    X(KEY_MISSING, "key_missing", 0,                                                               \
      "A field of the key is missing, null, an object or an array.")                               \
    X(KEY_TOO_LONG, "key_too_long", 0,                                                             \
      "The key is longer than 255 bytes.")                                                         \
    X(PAYLOAD_TOO_LARGE, "payload_too_large", 0,                                                   \
      "The payload is larger than dedup.max_payload_bytes.")                                       \
    X(CONFLICT, "conflict", 0,                                                                     \
      "The key was applied with another request hash.")                                            \
    X(REJECTED, "rejected", 0,                                                                     \
      "The handler rejected the message (or, with dedup.retry_failed = false, a copy of it).")     \
    X(RETRIES_EXHAUSTED, "retries_exhausted", 0,                                                   \
      "The handler asked for a retry retry.max_attempts times.")                                   \
    X(UNRESOLVED, "unresolved", DD_REASON_F_EXTERNAL,                                              \
      "reconcile() could not tell whether the effect happened, external.unknown_attempts "         \
      "times.")                                                                                    \
    X(SCHEMA_UNKNOWN, "schema_unknown", DD_REASON_F_AVRO,                                          \
      "The schema registry has no schema of the message's id (docs/KEYS.md, \"Avro\").")           \
    X(BAD_AVRO, "bad_avro", DD_REASON_F_AVRO,                                                      \
      "The bytes do not decode under their schema, or are not in the Confluent wire format.")      \
    X(TOMBSTONE, "tombstone", 0,                                                                   \
      "A null value (a compacted topic's delete, Debezium's after a delete), with "                \
      "kafka.tombstones = \"dead_letter\"; with \"skip\" tombstones are counted in "               \
      "dedupd_tombstones_skipped_total and their offsets committed instead.")                      \
    X(SHARD_KEY_INVALID, "shard_key_invalid", DD_REASON_F_SHARDS,                                  \
      "The shard key does not fit dedup.shard_by: not a non-negative decimal integer for "         \
      "modulo, or above 2^64-1 for map.")                                                          \
    X(SHARD_UNMAPPED, "shard_unmapped", DD_REASON_F_SHARDS,                                        \
      "No range of dedup.shard_map holds the shard key.")                                          \
    X(WRONG_SHARD, "wrong_shard", DD_REASON_F_SHARDS,                                              \
      "The key has a row in another shard than the one its route names: its rows were not "        \
      "moved when the layout changed (docs/GUARANTEES.md, \"Database shards\").")
/* clang-format on */

#endif /* DD_REASONS_H */
