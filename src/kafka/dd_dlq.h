/*
 * Dead-letter producer.
 *
 * A message that cannot be applied (bad JSON, no key, conflict, rejected) is
 * produced to the dead-letter topic with its original key, payload and
 * headers, and dedupd.* headers saying why and where it came from. The
 * source offset may only be stored after the dead letter is acknowledged, so
 * delivery results come back through a callback with the caller's opaque
 * pointer; a failed delivery is reported, and the caller sends it again: a
 * dead letter is never skipped.
 *
 * So a dead letter must always be deliverable. One that would exceed the
 * producer's message.max.bytes carries its payload truncated (header
 * dedupd.truncated: the original length); one the broker still refuses as
 * too large is sent again bare: dedupd's headers only.
 *
 * A dead letter keeps its message's timestamp, and with dlq.connect_headers
 * also carries Kafka Connect's __connect.errors.* headers, for tooling
 * written for Connect's dead-letter queues.
 */
#ifndef DD_DLQ_H
#define DD_DLQ_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "dd_conf.h"

/* The headers dedupd writes on every dead letter, as one table: X(ID,
 * name, what it holds). dd_dlq.c writes them by these names, and `dedupd
 * describe` documents the dead-letter channel from the same table. */
/* clang-format off */
#define DD_DLQ_HEADER_TABLE(X)                                                                     \
    X(REASON, "dedupd.reason", "Why the message was dead-lettered: one of the reasons.")           \
    X(ERROR, "dedupd.error", "What exactly was wrong, in words (a byte offset for a payload "       \
                             "that could not be read).")                                            \
    X(TOPIC, "dedupd.topic", "The topic the message was read from.")                               \
    X(PARTITION, "dedupd.partition", "Its partition, in decimal.")                                 \
    X(OFFSET, "dedupd.offset", "Its offset, in decimal.")                                          \
    X(BIZ_KEY, "dedupd.biz_key", "Its business key, when one could be rendered.")                  \
    X(TRUNCATED, "dedupd.truncated", "The payload's original length, when it had to be cut to "    \
                                     "fit the producer's message.max.bytes.")
/* clang-format on */

typedef enum {
#define DD_DLQ_HEADER_ENUM(id, name, help) DD_DLQ_H_##id,
    DD_DLQ_HEADER_TABLE(DD_DLQ_HEADER_ENUM)
#undef DD_DLQ_HEADER_ENUM
        DD_DLQ_H_COUNT
} dd_dlq_header_t;

/* The name and the description of each dd_dlq_header_t. */
extern const char *const dd_dlq_header_names[DD_DLQ_H_COUNT];
extern const char *const dd_dlq_header_helps[DD_DLQ_H_COUNT];

typedef struct dd_dlq_s dd_dlq_t;

/* Called from dd_dlq_poll() on the polling thread; err 0 means acknowledged. */
typedef void(dd_dlq_cb_t)(void *opaque, rd_kafka_resp_err_t err, void *cb_arg);

typedef struct {
    const char *dlq_topic; /* where it goes: the route's dead-letter topic (dd_conf_dlq_topic) */
    const char *topic;     /* source topic */
    int32_t partition;
    int64_t offset;
    const void *key; /* Kafka key, may be NULL */
    size_t key_len;
    const void *payload;
    size_t payload_len;
    const char *reason;  /* bad_json, key_missing, key_too_long, conflict, rejected, ... */
    const char *error;   /* human-readable detail */
    const char *biz_key; /* may be NULL */
    const rd_kafka_headers_t *headers; /* the original message's, may be NULL */
    int64_t timestamp_ms; /* the original message's, which the dead letter keeps; <= 0: now */
    int bare;             /* no key, payload or original headers: the full form was refused */
} dd_dlq_letter_t;

int dd_dlq_new(dd_dlq_t **dlqp, const dd_conf_t *conf, dd_dlq_cb_t *cb, void *cb_arg, char *errstr,
               size_t errstr_size);
/* Queues one dead letter. Thread-safe. Blocks while the local queue is full.
 * Returns 0 or DD_ERR_RETRIABLE (could not enqueue; call again later). */
int dd_dlq_send(dd_dlq_t *dlq, const dd_dlq_letter_t *letter, void *opaque);
/* 1 when a delivery failed because the dead letter is too large for the
 * broker: send it again bare rather than unchanged. */
int dd_dlq_err_too_large(rd_kafka_resp_err_t err);
/* 1 for a kafka.properties entry ("name=value") only a consumer takes:
 * dedupd's producers leave it out. */
int dd_dlq_consumer_only(const char *prop);
/* Serves delivery reports. */
void dd_dlq_poll(dd_dlq_t *dlq, int timeout_ms);
/* Waits up to timeout_ms for every queued letter; returns the number left. */
int dd_dlq_flush(dd_dlq_t *dlq, int timeout_ms);
/* Dead letters not acknowledged yet (queued or in flight); no waiting. */
int dd_dlq_pending(dd_dlq_t *dlq);
/* Gives up on every dead letter not acknowledged yet (shutdown): their
 * delivery reports, with an error, are served within timeout_ms. Returns the
 * number of letters whose report did not come. */
int dd_dlq_purge(dd_dlq_t *dlq, int timeout_ms);
/* Purges what is left (no callbacks any more) and destroys the producer. */
void dd_dlq_destroy(dd_dlq_t *dlq);

#endif /* DD_DLQ_H */
