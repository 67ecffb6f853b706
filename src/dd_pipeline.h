/*
 * The consumer loop: poll -> parse/key -> lanes (claim + handler in one
 * transaction per batch) -> offsets, with dead letters for what cannot be
 * applied.
 *
 * Threads: the main thread polls Kafka, parses messages, routes them by a
 * hash of the business key to one of `workers` lanes (so one key is always on
 * one lane), sends dead letters and stores offsets. Each lane owns one
 * database connection and runs batches. Finished messages come back to the
 * main thread, which advances each partition's contiguous watermark.
 */
#ifndef DD_PIPELINE_H
#define DD_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"
#include "dd_handler.h"

typedef enum {
    DD_REASON_BAD_JSON = 0,
    DD_REASON_KEY_MISSING,
    DD_REASON_KEY_TOO_LONG,
    DD_REASON_PAYLOAD_TOO_LARGE,
    DD_REASON_CONFLICT,
    DD_REASON_REJECTED,
    DD_REASON_RETRIES_EXHAUSTED,
    DD_REASON_CNT
} dd_reason_t;

const char *dd_reason2str(dd_reason_t reason);

/* Upper bounds (seconds) of the batch duration histogram buckets; the last
 * bucket is +Inf. */
#define DD_BATCH_BUCKETS 12
extern const double dd_batch_bucket_bounds[DD_BATCH_BUCKETS - 1];

/* Latency histogram: 4 buckets per power of two of microseconds (about
 * 19% resolution), up to 2^33 us; the last bucket also takes anything
 * longer. */
#define DD_LATENCY_BUCKETS 128

typedef struct {
    uint64_t messages;   /* consumed, each counted once */
    uint64_t applied;    /* handler OK, committed */
    uint64_t duplicates; /* skipped: same key and hash already applied (or earlier in the batch) */
    uint64_t conflicts;  /* same key, different hash */
    uint64_t retries;    /* handler RETRY */
    uint64_t db_errors_retriable;
    uint64_t db_errors_fatal;
    uint64_t batches;
    uint64_t batched;        /* applied through the handler's handle_batch() */
    uint64_t batch_declined; /* handle_batch() declined: went message by message */
    uint64_t claim_races; /* a deferred claim lost to another consumer: batch replayed */
    uint64_t dead_letters[DD_REASON_CNT]; /* acknowledged */

    /* committed batch durations (claim transaction, handler included) */
    uint64_t batch_buckets[DD_BATCH_BUCKETS]; /* non-cumulative counts */
    double batch_seconds_sum;

    /* poll -> finished (offset may be stored) latency, microseconds; see
     * dd_pipeline_latency_us() for the bucket layout */
    uint64_t latency_buckets[DD_LATENCY_BUCKETS];
    int64_t first_poll_ms; /* dd_now_ms() of the first message, 0 before */

    /* time the consumer's polls came back empty while an assigned partition
     * had more on the broker than was polled (librdkafka's cached high
     * watermark): waiting on the fetcher, not on the database */
    int64_t fetch_wait_us;

    /* gauges */
    int64_t inflight;            /* polled, not yet finished */
    int assigned;                /* partitions assigned now */
    int64_t last_loop_ms;        /* dd_now_ms() of the main loop's last turn */
    int64_t last_finish_ms;      /* dd_now_ms() when a message last finished */
    int running;                 /* 1 between start and shutdown */

    /* shutdown: messages given up unfinished (their offsets are not
     * committed, so they come again), and how many of them only waited
     * for their dead letter's acknowledgement */
    int64_t abandoned;
    int64_t abandoned_dlq;
} dd_stats_t;

typedef struct {
    char topic[256];
    int32_t partition;
    int64_t lag; /* high watermark minus the next offset to finish, -1 unknown */
} dd_lag_t;

typedef struct dd_pipeline_s dd_pipeline_t;

/* The handler stays owned by the caller and must outlive the pipeline. */
int dd_pipeline_new(dd_pipeline_t **plp, const dd_conf_t *conf, dd_handler_t *h, char *errstr,
                    size_t errstr_size);

/* Runs until *stop is set (then shuts down cleanly within
 * shutdown_timeout) or, with exit_at_end, until every assigned partition is
 * applied and committed up to its end offset at start. Returns 0 or a
 * negative dd_err_t (fatal: exit non-zero). */
int dd_pipeline_run(dd_pipeline_t *pl, int exit_at_end, volatile int *stop, char *errstr,
                    size_t errstr_size);

/* A consistent copy of the counters and gauges (any thread). */
void dd_pipeline_stats(dd_pipeline_t *pl, dd_stats_t *out);

/* The q quantile (0..1) of the poll -> finish latency in microseconds: the
 * upper bound of the bucket holding it; 0 when nothing finished yet. */
int64_t dd_pipeline_latency_us(const dd_stats_t *s, double q);

/* Copies the consumer lag of the assigned partitions (refreshed by the main
 * loop every few seconds) into out; returns how many there are, which may
 * exceed max (any thread). */
size_t dd_pipeline_lag(dd_pipeline_t *pl, dd_lag_t *out, size_t max);

void dd_pipeline_destroy(dd_pipeline_t *pl);

#endif /* DD_PIPELINE_H */
