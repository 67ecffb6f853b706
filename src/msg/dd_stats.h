/*
 * What `dedupd run` counts: the counters and gauges of the consumer and its
 * lanes, the dead-letter reasons, and the two histograms (batch duration,
 * poll -> finish latency).
 *
 * The types live here, below the pipeline and the lanes that fill them and
 * the metrics, summary and health endpoint that read them, so that none of
 * those needs another's header. A dd_stats_t is a plain value: whoever
 * holds one guards it (the pipeline and the lane group each under their
 * own mutex) and hands out copies.
 */
#ifndef DD_STATS_H
#define DD_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "dd_reasons.h"

/* Why a message is dead-lettered (the dedupd.reason header, the metrics'
 * reason label): the table of dd_reasons.h. */
typedef enum {
#define DD_REASON_ENUM(id, name, flags, help) DD_REASON_##id,
    DD_REASON_TABLE(DD_REASON_ENUM)
#undef DD_REASON_ENUM
        DD_REASON_CNT
} dd_reason_t;

const char *dd_reason2str(dd_reason_t reason);
/* The DD_REASON_F_* flags and the help sentence of a reason (0 and NULL
 * for one out of range). */
unsigned dd_reason_flags(dd_reason_t reason);
const char *dd_reason_help(dd_reason_t reason);
/* Whether the summary and the metrics list the reason with shard_cnt
 * database shards (a DD_REASON_F_SHARDS one only with several), and how
 * many they list. */
int dd_stats_reason_listed(dd_reason_t reason, int shard_cnt);
int dd_stats_reason_cnt(int shard_cnt);

/* Upper bounds (seconds) of the batch duration histogram buckets; the last
 * bucket is +Inf. */
#define DD_BATCH_BUCKETS 12
extern const double dd_stats_batch_bounds[DD_BATCH_BUCKETS - 1];

/* The histograms of /metrics of what a message's sender waits for (one
 * of each per route, dd_route_stats_t): seconds, in DD_MSG_BUCKETS
 * buckets from a millisecond to ten minutes, the last +Inf. Counts are
 * non-cumulative here; /metrics sums them. */
#define DD_MSG_BUCKETS 19
extern const double dd_stats_msg_bounds[DD_MSG_BUCKETS - 1];

typedef struct {
    uint64_t bucket[DD_MSG_BUCKETS];
    double sum_s;
} dd_msg_hist_t;

/* Latency histogram: 4 buckets per power of two of microseconds (about
 * 19% resolution), up to 2^33 us; the last bucket also takes anything
 * longer. */
#define DD_LATENCY_BUCKETS 128

/* Most routes counted apart (dd_conf.h's DD_CONF_ROUTE_MAX fits). */
#define DD_STATS_ROUTE_MAX 32

/* Most database shards counted apart (dd_conf.h's DD_CONF_SHARD_MAX fits). */
#define DD_STATS_SHARD_MAX 64

/* The kinds of schema registry faults counted (dd_registry.h). */
#define DD_STATS_REGISTRY_FAULTS 4

/* The counters of one database shard (its share of the totals). */
typedef struct {
    uint64_t applied;
    uint64_t db_errors_retriable;
    uint64_t db_errors_fatal;
    uint64_t check_skipped; /* batches whose wrong-shard check went on without this shard */
} dd_shard_stats_t;

/* The counters of one route: its share of the totals of dd_stats_t of
 * the same names, so the routes' counters add up to them; and external
 * mode's, a route's own (its handler's mode), kept only here. */
typedef struct {
    uint64_t messages, applied, duplicates, conflicts, retries, batched, batch_declined;
    uint64_t dead_letters[DD_REASON_CNT];
    uint64_t tombstones_skipped; /* null values, kafka.tombstones = "skip" */

    /* external mode */
    uint64_t ext_waits;         /* a key in progress under another claim: the message waited */
    uint64_t ext_takeovers;     /* claims taken over after their lease ran out */
    uint64_t ext_reconciled[3]; /* reconcile() answers, by dedupd_outcome */
    uint64_t ext_stale;         /* claims lost before finishing: nothing finished */

    /* latencies, a route's own too: from an applied message's Kafka
     * timestamp to its finish (end to end), and from any message's poll to
     * its finish (its transaction committed or its dead letter
     * acknowledged: its offset may be committed) */
    dd_msg_hist_t end_to_end;
    dd_msg_hist_t poll_to_commit;
} dd_route_stats_t;

/* The outbox relay of this process (dd_relay), all shards together. */
typedef struct {
    int on;           /* a relay runs in this process */
    int shards;       /* shards it relays */
    int leading;      /* of them, those whose lock it holds (the others wait) */
    int64_t backlog;  /* events waiting in the tables (-1: not counted yet) */
    double oldest_s;  /* how long the oldest of them has waited */
    int64_t parked;   /* events parked in the tables (refused for good) */
    uint64_t sent;    /* events this process published and deleted */
    uint64_t refused; /* events this process parked */
    uint64_t failed;  /* deliveries that failed and are tried again */
    char state[240];  /* why a shard is not publishing; "" when all are */
} dd_outbox_stats_t;

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
    uint64_t claim_races;    /* a deferred claim lost to another consumer: batch replayed */
    uint64_t dead_letters[DD_REASON_CNT]; /* acknowledged */
    /* partitions assigned where the database's position was behind Kafka's
     * committed offset (the database went back in time), and those where
     * it was below the log start offset too: what the database lost there
     * cannot be read again (position_gap_messages offsets of it) */
    uint64_t position_rewinds;
    uint64_t position_gaps;
    uint64_t position_gap_messages;
    /* partitions assigned where the database's position was not used: not
     * the topic's as it is now (recreated, truncated), or not to be told */
    uint64_t position_mismatches;
    /* statements on the positions' table that failed (the writers') */
    uint64_t position_errors;
    /* the same counters per route (the index of conf->routes): wherever
     * one of the totals above counts, its route's counter counts too */
    dd_route_stats_t route[DD_STATS_ROUTE_MAX];
    /* the same per database shard (the index of conf->shards) */
    dd_shard_stats_t shard[DD_STATS_SHARD_MAX];

    /* committed batch durations (claim transaction, handler included) */
    uint64_t batch_buckets[DD_BATCH_BUCKETS]; /* non-cumulative counts */
    double batch_seconds_sum;

    /* poll -> finished (offset may be stored) latency, microseconds; see
     * dd_stats_latency_us() for the bucket layout */
    uint64_t latency_buckets[DD_LATENCY_BUCKETS];
    int64_t first_poll_ms; /* dd_now_ms() of the first message, 0 before */

    /* time the consumer's polls came back empty while an assigned partition
     * had more on the broker than was polled (librdkafka's cached high
     * watermark): waiting on the fetcher, not on the database */
    int64_t fetch_wait_us;

    /* gauges */
    int64_t inflight;       /* polled, not yet finished */
    int assigned;           /* partitions assigned now */
    int dlq_skipped;        /* of them, of dead-letter topics: never consumed */
    int64_t last_loop_ms;   /* dd_now_ms() of the main loop's last turn */
    int64_t last_finish_ms; /* dd_now_ms() when a message last finished */
    int running;            /* 1 between start and shutdown */
    /* the database shards: how many, and whether each one's lanes reach it
     * (0 while they reconnect after losing their connection) */
    int shard_cnt;
    int shard_up[DD_STATS_SHARD_MAX];
    /* what the messages in flight may be waiting for, outside dedupd: lanes
     * that lost their connection or back off after a database error, and
     * dead letters the broker has not acknowledged */
    int lanes_waiting_db;
    int dlq_waiting;
    /* external mode, from the compensation scan, per route (the index of
     * conf->routes): processing rows of its table past their lease, and how
     * long the oldest is past it; -1 until a scan counted (always, for a
     * route in local mode) */
    int64_t processing_stuck[DD_STATS_ROUTE_MAX];
    double processing_oldest_s[DD_STATS_ROUTE_MAX];
    dd_outbox_stats_t outbox; /* the relay's, when it runs in `dedupd run` */

    /* shutdown: messages given up unfinished (their offsets are not
     * committed, so they come again), and how many of them only waited
     * for their dead letter's acknowledgement */
    int64_t abandoned;
    int64_t abandoned_dlq;

    /* what the consumer waits for the schema registry for ("" when it
     * does not): /readyz says it; and the registry's failed fetches, by
     * fault (dd_registry_fault_t) */
    char registry_wait[512];
    uint64_t registry_faults[DD_STATS_REGISTRY_FAULTS];
} dd_stats_t;

/* The consumer lag of one assigned partition. */
typedef struct {
    const char *group; /* the consumer group (kafka.group: the configuration's) */
    char topic[256];
    int32_t partition;
    int64_t lag; /* high watermark minus the next offset to finish, -1 unknown */
} dd_lag_t;

/* Liveness, from a snapshot: what /healthz answers and what the systemd
 * watchdog is fed by (dd_http.c, dd_sd.c). */
typedef enum {
    DD_HEALTH_OK = 0,
    DD_HEALTH_STOPPING, /* the consumer loop has ended */
    DD_HEALTH_STUCK,    /* the loop has not turned, or nothing finished */
} dd_health_t;

/* Whether the pipeline waits for a dependency that is down: lanes
 * reconnecting or backing off after a database error, dead letters the
 * broker has not acknowledged, messages waiting for the schema registry.
 * Liveness restarts its "none finished" clock while this holds: waiting
 * for a dependency is not being stuck. */
int dd_stats_waiting_dependency(const dd_stats_t *s);

/* now_ms, start_ms (when the observer started: before the loop's first
 * turn the stall is measured from it), idle_seen_ms (when the observer last
 * saw nothing in flight) and stuck_after_ms (http.stuck_after); text gets
 * the reason ("ok" when healthy). */
dd_health_t dd_stats_health(const dd_stats_t *s, int64_t now_ms, int64_t start_ms,
                            int64_t idle_seen_ms, int64_t stuck_after_ms, char *text, size_t size);

/* Adds the counters of from to to. */
void dd_route_stats_add(dd_route_stats_t *to, const dd_route_stats_t *from);

/* Adds the counters and histograms of from to to (gauges stay). */
void dd_stats_add(dd_stats_t *to, const dd_stats_t *from);

/* Counts one committed batch that took secs. */
void dd_stats_observe_batch(dd_stats_t *s, double secs);

/* Counts one observation of secs (negative: 0) in h. */
void dd_stats_msg_observe(dd_msg_hist_t *h, double secs);
/* Adds the counts and sum of from to to. */
void dd_stats_msg_add(dd_msg_hist_t *to, const dd_msg_hist_t *from);

/* The latency bucket of us microseconds. */
int dd_stats_latency_bucket(int64_t us);

/* The q quantile (0..1) of the poll -> finish latency in microseconds: the
 * upper bound of the bucket holding it; 0 when nothing finished yet. */
int64_t dd_stats_latency_us(const dd_stats_t *s, double q);

#endif /* DD_STATS_H */
