/*
 * Inside the lane group (see dd_lanes.h), shared by dd_lanes.c (the group)
 * and dd_lane.c (one lane: its thread, queue, batches, retries). Calls go
 * one way: the group calls its lanes, a lane its executors (the batch
 * transaction, dd_lane_txn.h; external mode, dd_lane_ext.h; the wrong-shard
 * check, dd_lane_shard.h), and they all call down to what they share (the
 * connection, dd_lane_conn.h; the report, dd_lane_report.h).
 */
#ifndef DD_LANES_INT_H
#define DD_LANES_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "dd_lane_conn.h"
#include "dd_lane_ext.h"
#include "dd_lane_shard.h"
#include "dd_lane_txn.h"
#include "dd_lanes.h"

typedef struct dd_lane_s dd_lane_t;

struct dd_lanes_s {
    dd_lane_env_t env; /* what every lane reads, and their report */
    char owner[128];
    dd_lane_t **lane;
    int n;       /* lanes: workers per shard, shards in a row (lane i is shard i / workers's) */
    int workers; /* lanes per shard */
};

struct dd_lane_s {
    dd_lane_env_t *env;
    pthread_t thr;
    int started;
    atomic_int exited; /* its thread has returned (it may not be joined yet) */

    /* the queue, under mu; the consumer's thread pushes, the lane takes */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dd_item_t *head, *tail;
    size_t queued; /* items between head and tail */
    int idle;      /* waiting for the first item of a batch */
    size_t need;   /* queued items that fill the batch being collected */

    /* the lane thread's own */
    dd_item_t **batch;
    dd_item_t **xbatch;    /* the items of a collected batch whose route is in external mode */
    dd_lane_conn_t conn;   /* its connection, shared by the executors below */
    dd_lane_txn_t txn;     /* the batch transaction */
    dd_lane_ext_t ext;     /* external mode */
    dd_lane_peers_t peers; /* the wrong-shard check */
};

/* dd_lane.c: one lane, lane idx of the group, connected to shard */
int dd_lane_new(dd_lane_t **lanep, dd_lane_env_t *env, int idx, int shard, char *errstr,
                size_t errstr_size);
int dd_lane_start(dd_lane_t *lane, char *errstr, size_t errstr_size);
void dd_lane_push(dd_lane_t *lane, dd_item_t *item);
/* Wakes the lane so it sees the stop flags and joins its thread. */
void dd_lane_stop(dd_lane_t *lane);
/* Wakes the lane. */
void dd_lane_wake(dd_lane_t *lane);
/* 1 once its thread has returned. */
int dd_lane_exited(dd_lane_t *lane);
/* Takes the items still queued (a list, or NULL) from a stopped lane. */
dd_item_t *dd_lane_unqueue(dd_lane_t *lane);
/* Frees a stopped lane, with any item still queued. NULL is fine. */
void dd_lane_destroy(dd_lane_t *lane);

#endif /* DD_LANES_INT_H */
