/*
 * Inside the pipeline (see dd_pipeline.h), shared by its files only:
 * dd_pipeline.c (the loop, routing, rebalances, life cycle),
 * dd_pipeline_dlq.c (finished items and dead letters coming back from the
 * lanes) and dd_pipeline_status.c (progress and what it waits for). Everything here belongs to the
 * consumer's thread, except what mu guards.
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
#include "dd_routes.h"
#include "dd_source.h"

struct dd_pipeline_s {
    const dd_conf_t *conf;
    dd_lanes_t *lanes;
    pthread_mutex_t mu;    /* guards stats and lags: read by other threads */
    dd_stats_t stats;      /* the consumer's part; the lanes keep theirs */
    dd_routes_t *routes;   /* each message's key, lane key, hash, handler */
    dd_parse_pool_t *pool; /* where items' parsed payloads live */
    dd_json_doc_t *doc;    /* the strict document of the message being routed */

    dd_offsets_t *offs;
    dd_source_t *src;
    dd_dlq_t *dlq;

    int64_t inflight;      /* items alive: polled and not yet finished */
    int64_t full_since_ms; /* when inflight reached batch.max_inflight, or 0 */
    int64_t last_finish_ms;
    uint64_t lat[DD_LATENCY_BUCKETS]; /* latencies not yet in stats */
    int lat_pending;
    uint64_t messages; /* consumed, each once; published by counters_flush */
    uint64_t route_messages[DD_STATS_ROUTE_MAX]; /* the same, per route */
    char route_err[1024];                        /* an assigned topic two routes match */
    int64_t first_poll_ms;                       /* when the first message was polled */
    int64_t fetch_wait_us;                       /* see dd_stats_t */
    dd_item_t *spare; /* finished items kept for reuse (see dd_pipeline_item_recycle) */
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

/* dd_pipeline.c */
/* The item's offset may move: marks it in its partition's watermark and
 * recycles it. now_us: when it finished. */
void dd_pipeline_finish(dd_pipeline_t *pl, dd_item_t *item, int64_t now_us);

/* dd_pipeline_status.c */
/* Partitions assigned now. */
size_t dd_pipeline_assigned(dd_pipeline_t *pl);
/* 1 when an assigned partition has more on the broker than was polled. */
int dd_pipeline_behind(dd_pipeline_t *pl);
/* Every few seconds (a cheap check otherwise): the progress line, or
 * what the consumer waits for. */
void dd_pipeline_status(dd_pipeline_t *pl);

/* dd_pipeline_dlq.c */
/* The dead-letter producer's delivery report (dd_dlq_cb_t). */
void dd_pipeline_dlq_cb(void *opaque, rd_kafka_resp_err_t err, void *cb_arg);
/* Takes finished items from the lanes, waiting up to wait_ms for some:
 * finishes them or sends their dead letters. */
void dd_pipeline_drain(dd_pipeline_t *pl, int wait_ms);
/* Dead-letters an item the consumer could not parse. */
void dd_pipeline_reject(dd_pipeline_t *pl, dd_item_t *item, dd_reason_t reason);
/* Shutdown, the lanes stopped: gives up the dead letters not acknowledged. */
void dd_pipeline_abandon_dlq(dd_pipeline_t *pl);
/* Says how many dead-letter lines the rate limit held back, for the
 * reasons whose window is over (all of them when final). */
void dd_pipeline_dlq_log_flush(dd_pipeline_t *pl, int final);

#endif /* DD_PIPELINE_INT_H */
