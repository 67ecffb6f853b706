/*
 * The Kafka side of the worker: a high-level consumer with offset storing in
 * our hands (enable.auto.offset.store=false). Offsets are stored only for
 * finished messages (dd_offsets watermark) and committed by librdkafka's
 * timer, synchronously on revoke and on shutdown.
 */
#ifndef DD_SOURCE_H
#define DD_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "dd_conf.h"
#include "dd_offsets.h"

typedef struct dd_source_s dd_source_t;

/* Called inside dd_source_poll() on a rebalance, before librdkafka is told
 * about the change: on revoke the callee finishes or abandons in-flight work
 * of those partitions and stores their offsets; dd_source then commits and
 * unassigns. `lost` says the partitions are already owned by someone else.
 * On assign the callee may set an element's offset: where that partition
 * starts (left RD_KAFKA_OFFSET_INVALID, at the group's committed offset). */
typedef void(dd_source_rebalance_cb_t)(void *arg, int assign,
                                       rd_kafka_topic_partition_list_t *parts, int lost);

/* Creates the consumer (without subscribing). offs is updated from commit
 * results. */
int dd_source_new(dd_source_t **srcp, const dd_conf_t *conf, dd_offsets_t *offs,
                  dd_source_rebalance_cb_t *cb, void *cb_arg, char *errstr, size_t errstr_size);
/* The consumer handle, for tests that inspect its configuration. */
rd_kafka_t *dd_source_rk(dd_source_t *src);
int dd_source_subscribe(dd_source_t *src, char *errstr, size_t errstr_size);

/* The next message or consumer event (rkm->err set), waiting up to
 * timeout_ms; NULL when none came. Rebalances are served inside (see
 * dd_source_rebalance_cb_t). The caller destroys the message. */
rd_kafka_message_t *dd_source_poll(dd_source_t *src, int timeout_ms);

/* Fills the committed offsets of parts (the group's, from the broker,
 * waiting up to timeout_ms). Returns librdkafka's error; each element may
 * carry its own. */
rd_kafka_resp_err_t dd_source_committed(dd_source_t *src, rd_kafka_topic_partition_list_t *parts,
                                        int timeout_ms);

/* A partition's high watermark as librdkafka last saw it (no broker round
 * trip), -1 unknown; its low one in *lo. */
int64_t dd_source_high(dd_source_t *src, const char *topic, int32_t partition, int64_t *lo);

/* Creates a tracker for every partition of the configured topics with the
 * low/high watermarks taken now (for --exit-at-end). */
int dd_source_query_ends(dd_source_t *src, int timeout_ms, char *errstr, size_t errstr_size);

/* Stores the watermark of every assigned tracker that moved. Entries that
 * fail (partition no longer assigned) are logged and skipped. */
void dd_source_store(dd_source_t *src);
/* Commits stored offsets and waits for the result, up to timeout_ms (a
 * commit waiting for a coordinator would wait session.timeout.ms, one sent
 * to a silent broker socket.timeout.ms). Returns 0, or DD_ERR_RETRIABLE
 * (failed or timed out: the offsets stay stored, a later commit takes
 * them). */
int dd_source_commit_wait(dd_source_t *src, int timeout_ms, char *errstr, size_t errstr_size);
/* dd_source_commit_wait() with DD_SOURCE_COMMIT_MS. */
#define DD_SOURCE_COMMIT_MS 5000
int dd_source_commit_sync(dd_source_t *src, char *errstr, size_t errstr_size);

/* Logs "<what>: topic [partition] at offset N." (or "none") for every
 * assigned partition: the offset its group has committed, as the last
 * commit result said. */
void dd_source_log_committed(dd_source_t *src, const char *what);

/* Pauses or resumes every assigned partition (backpressure). */
void dd_source_pause(dd_source_t *src, int pause);
int dd_source_paused(const dd_source_t *src);

/* Leaves the group (runs the revoke callback, whose commit ends with the
 * leaving) and destroys the consumer. Leaving takes DD_SOURCE_CLOSE_MS at
 * most; after that the consumer is destroyed without it (the group notices
 * when the session times out). The destroy is waited for
 * DD_SOURCE_DESTROY_MS at most (librdkafka's own waits for the brokers).
 * No message of this consumer may still be alive: rd_kafka_destroy()
 * waits for every one. */
#define DD_SOURCE_CLOSE_MS 4000
#define DD_SOURCE_DESTROY_MS 2000
void dd_source_destroy(dd_source_t *src);

#endif /* DD_SOURCE_H */
