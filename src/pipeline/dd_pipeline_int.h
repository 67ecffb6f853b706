/*
 * Inside the pipeline (see dd_pipeline.h), shared by its files only. They
 * call one way, each only the ones listed after it:
 * dd_pipeline.c (the loop, rebalances, life cycle) calls every part;
 * dd_pipeline_decode.c (payloads, and messages waiting for the schema
 * registry); dd_pipeline_wait.c (their queue, and the registry);
 * dd_pipeline_route.c (the route of a topic, the key, hash and
 * lane of a message); dd_pipeline_status.c (progress and what it waits
 * for); dd_pipeline_position.c (the database's positions);
 * dd_pipeline_dlq.c (finished items and dead letters coming back from the
 * lanes); dd_pipeline_item.c (an item's reuse and end). Everything here
 * belongs to the consumer's thread, except what mu guards.
 */
#ifndef DD_PIPELINE_INT_H
#define DD_PIPELINE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "dd_dlq.h"
#include "dd_hash.h"
#include "dd_item.h"
#include "dd_json.h"
#include "dd_key.h"
#include "dd_lanes.h"
#include "dd_log.h"
#include "dd_offsets.h"
#include "dd_parse.h"
#include "dd_pipeline.h"
#include "dd_registry.h"
#include "dd_position.h"
#include "dd_routes.h"
#include "dd_schemafp.h"
#include "dd_source.h"

/* dd_pipeline_wait.c: the messages waiting for the schema registry, each
 * partition's in poll order, and the registry they wait for. */
typedef struct dd_pwait_part_s dd_pwait_part_t;
typedef struct {
    dd_registry_t *registry; /* the writer schemas of avro routes, or NULL */
    dd_schemafp_t fp;        /* how the registry checks fingerprints */
    dd_pwait_part_t *parts;  /* partitions with messages waiting */
    size_t part_cnt, part_cap;
    uint64_t settled; /* the registry's settled fetches at the last try */
    int64_t next_ms;  /* the waiting messages are tried again by then */
    int faulted;      /* a fault was said since the queue was last empty */
    int nomem;        /* a message could not be queued: the consumer stops */
} dd_pipeline_wait_t;

struct dd_pipeline_s {
    const dd_conf_t *conf;
    dd_lanes_t *lanes;
    pthread_mutex_t mu;      /* guards stats and lags: read by other threads */
    dd_stats_t stats;        /* the consumer's part; the lanes keep theirs */
    dd_routes_t *routes;     /* each message's key, lane key, hash, handler */
    dd_parse_pool_t *pool;   /* where items' parsed payloads live */
    dd_json_doc_t *doc;      /* the strict document of the message being routed */
    dd_pipeline_wait_t wait; /* messages waiting for the schema registry */

    dd_offsets_t *offs;
    dd_source_t *src;
    dd_dlq_t *dlq;
    int keep_positions;      /* the database keeps the consumer's positions */
    dd_position_t *pos;      /* their writers, when it does */
    int64_t pos_sync_ms;     /* when the watermarks were last handed to them */
    int64_t pos_deadline_ms; /* an assignment's watermark queries end by then */
    rd_kafka_t *peek;        /* reads the messages positions are checked by (dd_peek) */
    char pos_err[1000];      /* the positions can no longer be kept (dd_position_stopped): stop */

    int64_t inflight;      /* items alive: polled and not yet finished */
    int64_t full_since_ms; /* when inflight reached batch.max_inflight, or 0 */
    int64_t last_finish_ms;
    uint64_t lat[DD_LATENCY_BUCKETS];                 /* latencies not yet in stats */
    dd_msg_hist_t end_to_end[DD_STATS_ROUTE_MAX];     /* the same, per route, */
    dd_msg_hist_t poll_to_commit[DD_STATS_ROUTE_MAX]; /* for /metrics */
    int lat_pending;
    uint64_t messages; /* consumed, each once; published by counters_flush */
    uint64_t route_messages[DD_STATS_ROUTE_MAX]; /* the same, per route */
    char route_err[1024];                        /* an assigned topic two routes match */
    char dlq_said[256];    /* the last dead-letter topic said not consumed (once per topic) */
    int64_t first_poll_ms; /* when the first message was polled */
    int64_t fetch_wait_us; /* see dd_stats_t */
    dd_item_t *spare;      /* finished items kept for reuse (see dd_pipeline_item_recycle) */
    int spare_cnt;
    int assignment_live;  /* assigned, and no revoke since: --exit-at-end may judge */
    dd_item_t *dlq_retry; /* dead letters to send again */
    int closing;          /* shutdown: dead letters are no longer sent */
    int64_t abandoned;    /* see dd_stats_t */
    int64_t abandoned_dlq;
    dd_lag_t *lags; /* snapshot for dd_pipeline_lag(), under mu */
    size_t lag_cnt, lag_cap;
    int64_t lag_refresh_ms;

    /* what the log says */
    dd_log_limit_t dlq_limit[DD_REASON_CNT]; /* dead-letter lines, per reason */
    int64_t subscribed_ms;                   /* when the subscription was made */
    int assign_seen;        /* a (maybe empty) assignment came since the last revoke */
    int64_t tick_ms;        /* when the last status line was considered */
    int64_t progress_ms;    /* when the last progress line was written */
    uint64_t tick_messages; /* messages consumed by then */
    int64_t tick_finish_ms; /* last_finish_ms by then */
    int idle_said;          /* the idle line was written, and nothing happened since */
};

/* dd_ptrack_t.route of a partition of a dead-letter topic a route's
 * pattern matched: assigned, never consumed (dd_pipeline_dlq_topic). */
#define DD_PIPELINE_ROUTE_DLQ (-2)

/* dd_pipeline_item.c */
/* A new item, from the spare ones when there are some (NULL: out of
 * memory). */
dd_item_t *dd_pipeline_item_new(dd_pipeline_t *pl);
/* Recycles an item that is done with (its offset does not move). */
void dd_pipeline_item_recycle(dd_pipeline_t *pl, dd_item_t *item);
/* The item's offset may move: marks it in its partition's watermark and
 * recycles it. now_us: when it finished. */
void dd_pipeline_finish(dd_pipeline_t *pl, dd_item_t *item, int64_t now_us);
/* Frees the spare items. */
void dd_pipeline_item_release(dd_pipeline_t *pl);

/* dd_pipeline_route.c */
/* The route of an assigned topic, into pt->route: -1 (and route_err set)
 * for a topic of no route or of two, DD_PIPELINE_ROUTE_DLQ for a
 * dead-letter topic. */
void dd_pipeline_route_topic(dd_pipeline_t *pl, dd_ptrack_t *pt);
/* Routes an item whose payload is decoded (item->text): parse, key, hash,
 * lane. */
void dd_pipeline_route_decoded(dd_pipeline_t *pl, dd_item_t *item);

/* dd_pipeline_wait.c */
/* Opens the registry (with conf's schema_registry.url) for callers that
 * do not wait. */
int dd_pipeline_wait_init(dd_pipeline_wait_t *w, const dd_conf_t *conf, char *errstr,
                          size_t errstr_size);
/* Frees the queue (empty by now) and the registry. */
void dd_pipeline_wait_release(dd_pipeline_wait_t *w);
/* Queues item behind its partition's waiting messages. Out of memory, it
 * sets w->nomem (the consumer stops) and leaves item to the caller:
 * returns -1; else 0. */
int dd_pipeline_wait_push(dd_pipeline_wait_t *w, dd_item_t *item);
/* The first waiting message of the i-th waiting partition, or NULL. */
dd_item_t *dd_pipeline_wait_first(dd_pipeline_wait_t *w, size_t i);
/* Takes that first message off its queue. */
void dd_pipeline_wait_pop(dd_pipeline_wait_t *w, size_t i);
/* Takes the i-th waiting partition's messages off, all of them: a chain
 * through item->next. */
dd_item_t *dd_pipeline_wait_take(dd_pipeline_wait_t *w, size_t i);
/* Forgets the partitions left with nothing waiting. */
void dd_pipeline_wait_compact(dd_pipeline_wait_t *w);

/* dd_pipeline_decode.c */
/* Decodes the item's payload (dedup.format). 0: decoded, route it; 1:
 * dead-lettered; -1: it waits for the schema registry (or behind the
 * waiting ones of its partition), taken care of by dd_pipeline_held_turn. */
int dd_pipeline_decode_or_hold(dd_pipeline_t *pl, dd_item_t *item);
/* Each turn of the loop: tries the waiting messages again when due. */
void dd_pipeline_held_turn(dd_pipeline_t *pl);
/* Drops the waiting messages of parts (NULL: all of them, abandoned at
 * shutdown): their offsets stay, so they are consumed again. */
void dd_pipeline_held_drop(dd_pipeline_t *pl, const rd_kafka_topic_partition_list_t *parts);

/* dd_pipeline_status.c */
/* Partitions assigned now. */
size_t dd_pipeline_assigned(dd_pipeline_t *pl);
/* Of them, those of dead-letter topics, not consumed. */
size_t dd_pipeline_dlq_skipped(dd_pipeline_t *pl);
/* 1 when an assigned partition has more on the broker than was polled. */
int dd_pipeline_behind(dd_pipeline_t *pl);
/* Every few seconds (a cheap check otherwise): the progress line, or
 * what the consumer waits for. */
void dd_pipeline_status(dd_pipeline_t *pl);

/* dd_pipeline_position.c */
/* Starts the position writers when the database keeps positions. */
int dd_pipeline_position_start(dd_pipeline_t *pl, char *errstr, size_t errstr_size);
/* Hands the watermarks to the writers (every few ms unless force) and
 * takes the limits of what may be stored for Kafka back; notes in pos_err
 * that the positions can no longer be kept (a database found to have gone
 * back, an error no retry fixes). */
void dd_pipeline_position_sync(dd_pipeline_t *pl, int force);
/* Has the watermarks written now (before a commit to Kafka), waiting up
 * to timeout_ms: DD_PIPELINE_POSITION_FLUSH_MS on revoke and at the end,
 * short enough that a database that is down (its positions cannot be
 * written, and Kafka's offsets wait for them anyway) keeps leaving the
 * group within its bound. */
#define DD_PIPELINE_POSITION_FLUSH_MS 2000
void dd_pipeline_position_flush(dd_pipeline_t *pl, int timeout_ms);
/* Reads every shard's positions, before an assignment of `parts`
 * partitions is looked at (none: nothing to read). */
void dd_pipeline_position_load(dd_pipeline_t *pl, int parts);
/* What an assignment found of one partition: the shards' positions, the
 * watermarks (-1 unknown) and the read of its check message (peek, -1:
 * not read), in dd_pipeline_poschecks_t.peeks. */
typedef struct {
    dd_position_found_t found;
    int64_t lo, hi;
    int peek;
} dd_pipeline_poscheck_t;
typedef struct {
    dd_pipeline_poscheck_t *parts; /* one per partition of the assignment; NULL: none */
    dd_peek_t *peeks;
    int peek_cnt;
} dd_pipeline_poschecks_t;
/* Looks at every partition of an assignment after the load: the shards'
 * positions, the watermarks, and each check message read again, all
 * together (bounded). Free pc with dd_pipeline_position_checked. */
void dd_pipeline_position_check(dd_pipeline_t *pl, const rd_kafka_topic_partition_list_t *parts,
                                dd_pipeline_poschecks_t *pc);
void dd_pipeline_position_checked(dd_pipeline_poschecks_t *pc);
/* Where the assigned partition p (tracker pt, element i of the
 * assignment that pc looked at) starts, given Kafka's committed offset k
 * (-1 none); sets p->offset when it is not k and a note for the
 * "Assigned" line. Returns the offset, -1 when it is the log start offset
 * and that is unknown. */
int64_t dd_pipeline_position_assign(dd_pipeline_t *pl, dd_ptrack_t *pt,
                                    rd_kafka_topic_partition_t *p, int64_t k,
                                    const dd_pipeline_poschecks_t *pc, int i, char *note,
                                    size_t note_size);
/* A message was polled from pt: fingerprinted when the partition's next
 * check message is due (at most one every DD_PTRACK_CAND_MS). */
void dd_pipeline_position_polled(dd_pipeline_t *pl, dd_ptrack_t *pt, const rd_kafka_message_t *rkm,
                                 int64_t now_ms);
/* The partitions were revoked: their positions are no longer written. */
void dd_pipeline_position_revoke(dd_pipeline_t *pl, const rd_kafka_topic_partition_list_t *parts);
/* Stops and frees the writers. */
void dd_pipeline_position_stop(dd_pipeline_t *pl);

/* dd_pipeline_dlq.c */
/* The dead-letter producer's delivery report (dd_dlq_cb_t). */
void dd_pipeline_dlq_cb(void *opaque, rd_kafka_resp_err_t err, void *cb_arg);
/* Takes finished items from the lanes, waiting up to wait_ms for some:
 * finishes them or sends their dead letters. */
void dd_pipeline_drain(dd_pipeline_t *pl, int wait_ms);
/* Dead-letters an item the consumer could not parse. */
void dd_pipeline_reject(dd_pipeline_t *pl, dd_item_t *item, dd_reason_t reason);
/* A message with a null value: skipped or dead-lettered (kafka.tombstones). */
void dd_pipeline_tombstone(dd_pipeline_t *pl, dd_item_t *item);
/* Shutdown, the lanes stopped: gives up the dead letters not acknowledged. */
void dd_pipeline_abandon_dlq(dd_pipeline_t *pl);
/* Says how many dead-letter lines the rate limit held back, for the
 * reasons whose window is over (all of them when final). */
void dd_pipeline_dlq_log_flush(dd_pipeline_t *pl, int final);

#endif /* DD_PIPELINE_INT_H */
