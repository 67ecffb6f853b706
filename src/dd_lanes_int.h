/*
 * Inside the lane group (see dd_lanes.h), shared by its files only:
 * dd_lanes.c (the group), dd_lane.c (one lane's thread: queue, batches,
 * retries), dd_lane_txn.c (one batch's transaction) and dd_lane_ext.c (the
 * protocol of a handler in external mode).
 */
#ifndef DD_LANES_INT_H
#define DD_LANES_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "dd_buf.h"
#include "dd_claim.h"
#include "dd_db.h"
#include "dd_external.h"
#include "dd_hash.h"
#include "dd_lanes.h"
#include "dd_lease.h"

typedef struct dd_lane_s dd_lane_t;

struct dd_lanes_s {
    const dd_conf_t *conf;
    const dd_routes_t *routes; /* each item's key, hash and handler; the lanes hash what the
                                  consumer could not */
    dd_claim_opts_t copts[DD_CONF_ROUTE_MAX]; /* per route: its dedup table */
    int need_route;                           /* the route whose rows may be the largest */
    int batch[DD_CONF_ROUTE_MAX];             /* the route's handler takes handle_batch() */
    char owner[128];
    /* routes whose handler is in external mode (dd_lane_ext.c): their
     * options and the renewer of the lanes' claims; lease NULL when every
     * route's handler is in local mode */
    int external[DD_CONF_ROUTE_MAX];
    dd_external_opts_t xopts[DD_CONF_ROUTE_MAX];
    dd_lease_t *lease;
    dd_lane_t **lane;
    int n;       /* lanes: workers per shard, shards in a row (lane i is shard i / workers's) */
    int workers; /* lanes per shard */

    pthread_mutex_t mu; /* guards done list, stats and fatal_err */
    pthread_cond_t cv;  /* signalled when items are done or a lane failed */
    dd_item_t *done_head, *done_tail;
    dd_stats_t stats;
    char fatal_err[1024];

    /* the wrong-shard check (dd_lane_shard.c): a shard that did not answer
     * it, so one warning covers its outage whichever lane saw it first */
    atomic_int check_down[DD_CONF_SHARD_MAX];
    /* mysql.shard_check = auto: the check runs until this dd_now_us();
     * set before the lanes start */
    int64_t check_until_us;

    atomic_int stop_soft; /* a lane whose queue is empty ends */
    atomic_int stop_hard; /* abandon work now */
    atomic_int fatal;     /* a lane failed: fatal_err says why */
};

/* How a transaction calls the handler (see dd_lane_txn). */
typedef enum {
    DD_LANE_BATCHED,    /* handle_batch() once for every key the batch owns */
    DD_LANE_OPTIMISTIC, /* handle() per message, no savepoints */
    DD_LANE_SAVEPOINTS, /* handle() per message, each in a savepoint */
} dd_lane_mode_t;

/* What a lane is doing, for the consumer's line saying what it waits for
 * (dd_lanes_waiting). */
typedef enum {
    DD_LANE_IDLE = 0,      /* waiting for messages */
    DD_LANE_IN_DB,         /* claim, finish or commit statements */
    DD_LANE_IN_HANDLER,    /* inside the handler */
    DD_LANE_DB_BACKOFF,    /* rolled back after a database error: backing off, reconnecting */
    DD_LANE_RETRY_BACKOFF, /* the handler asked to retry: backing off */
} dd_lane_state_t;

struct dd_lane_s {
    dd_lanes_t *group;
    int idx;
    int shard;       /* the database shard its connection is to */
    atomic_int down; /* lost its connection and has not reconnected yet */
    pthread_t thr;
    int started;
    atomic_int state;            /* dd_lane_state_t, written by the lane's thread */
    atomic_llong state_since_ms; /* dd_now_ms() when it entered it */

    /* the queue, under mu; the consumer's thread pushes, the lane takes */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dd_item_t *head, *tail;
    size_t queued; /* items between head and tail */
    int idle;      /* waiting for the first item of a batch */
    size_t need;   /* queued items that fill the batch being collected */

    /* the lane thread's own */
    dd_db_t *db;
    void *hconn[DD_CONF_ROUTE_MAX];    /* each route's handler's state for db (conn_init) */
    int hconn_open[DD_CONF_ROUTE_MAX]; /* its conn_init succeeded on db: conn_fini is owed */
    int conn_ready;                    /* every route's conn_init succeeded on db */
    dd_buf_t sql;
    dd_item_t **batch;
    dd_item_t **xbatch; /* the items of a collected batch whose route is in external mode */
    dd_claim_t *claims;
    dd_claim_t **claimv;
    dd_claim_t **claimw;               /* the pre-check's scratch */
    dd_claim_rows_t *rows;             /* the finish's scratch */
    dd_db_t *peer[DD_CONF_SHARD_MAX];  /* read connections to the other shards, opened lazily */
    int peer_fails[DD_CONF_SHARD_MAX]; /* failures in a row */
    int64_t peer_next_ms[DD_CONF_SHARD_MAX]; /* after a failure: not asked before */
    char peer_err[DD_CONF_SHARD_MAX][256];   /* and why it failed */
    int *found;                              /* the wrong-shard check's scratch: a shard, or -1 */
    dd_item_t **misplaced;                   /* and its dead letters */
    int precheck;                            /* the last batch found many keys applied: pre-check */
    int fault_blind;                         /* DEDUPD_TEST_FAULTS=precheck_blind */
    size_t cap;
    unsigned int seed;
    unsigned long fault_commit_lost; /* DEDUPD_TEST_FAULTS=commit_lost=N: every Nth */
    unsigned long commits;
    int fault_rollback; /* DEDUPD_TEST_FAULTS=rollback_after_handler */
    dd_item_t *decided; /* REJECT seen without a savepoint (see dd_lane_txn) */
    int declined_route; /* whose handle_batch() declined the last batched attempt */
    /* handle_batch() arguments, batch.max_messages each */
    dedupd_msg *msgs;
    const dedupd_msg **msgv;
    dedupd_result *results;
    /* the Kafka headers of the messages handed to the handler */
    dedupd_header *hdrs;
    size_t hdr_cap;
    /* external mode: messages waiting for their turn, earliest due first */
    dd_item_t *parked;
    int reconnect; /* a database error: check the connection before the next step */
};

/* dd_lane.c: one lane */
int dd_lane_new(dd_lane_t **lanep, dd_lanes_t *group, int idx, char *errstr, size_t errstr_size);
int dd_lane_start(dd_lane_t *lane, char *errstr, size_t errstr_size);
void dd_lane_push(dd_lane_t *lane, dd_item_t *item);
/* Wakes the lane so it sees the stop flags and joins its thread. */
void dd_lane_stop(dd_lane_t *lane);
/* Takes the items still queued (a list, or NULL) from a stopped lane. */
dd_item_t *dd_lane_unqueue(dd_lane_t *lane);
/* Frees a stopped lane, with any item still queued. NULL is fine. */
void dd_lane_destroy(dd_lane_t *lane);
/* The lane's thread says what it does now (any other thread may read it). */
void dd_lane_set_state(dd_lane_t *lane, dd_lane_state_t state);

/* Makes sure the lane's connection works: when it does not, the handlers'
 * state for it goes (conn_fini), the lane reconnects and every route's
 * handler gets its state for the new one (conn_init). Returns 0 or a
 * dd_err_t class with errstr. */
int dd_lane_reconnect(dd_lane_t *lane, char *errstr, size_t errstr_size);
/* The Kafka headers of a message (librdkafka parses them on first use),
 * room for n of them in lane->hdrs, and the dedupd_msg a handler sees of
 * item: its headers go to lane->hdrs[*at..], reserved by the caller and
 * pointing into librdkafka's copy; *at moves past them. Both executors of
 * the lane, the batch transaction and external mode's steps, build their
 * messages here. */
size_t dd_lane_header_cnt(rd_kafka_message_t *rkm);
int dd_lane_headers_reserve(dd_lane_t *lane, size_t n, char *errstr, size_t errstr_size);
void dd_lane_msg_fill(dd_lane_t *lane, const dd_item_t *item, size_t *at, dedupd_msg *msg);
/* Backoff before attempt number `attempt` (retry.*, with jitter). */
int64_t dd_lane_backoff_ms(dd_lane_t *lane, int attempt);
/* Puts items[0..n) back at the head of the lane's queue, in order. */
void dd_lane_requeue(dd_lane_t *lane, dd_item_t **items, size_t n);

/* dd_lane_ext.c: the messages of routes whose handler is in external mode,
 * message by message */
/* Runs the waiting messages whose time came, then items[0..n). */
void dd_lane_ext_process(dd_lane_t *lane, dd_item_t **items, size_t n);
/* 1 when a waiting message's time came (lane thread only). */
int dd_lane_ext_due(const dd_lane_t *lane);
/* The lane ends: gives up the claims of its waiting messages (their lease
 * ends now, so a restart need not wait for it) and queues the messages for
 * dd_lanes_stop() to hand back. */
void dd_lane_ext_unpark(dd_lane_t *lane);

/* dd_lane_shard.c: the wrong-shard check, before a batch's transaction
 * (with several shards, unless mysql.shard_check is off). Asks every other
 * shard which keys of items[0..*n) it holds; the messages of such keys
 * (those the lane's own shard does not hold too) are dead-lettered
 * wrong_shard and handed to the group, the others kept in order at the
 * head of items, *n their count. With mysql.shard_check = wait, waits with
 * backoff until every shard answered. Returns 0, or DD_ERR_RETRIABLE when
 * the lanes stop meanwhile (items untouched). */
int dd_lane_shard_check(dd_lane_t *lane, dd_item_t **items, size_t *n);
/* Closes the lane's read connections to the other shards. */
void dd_lane_shard_close(dd_lane_t *lane);

/* dd_lanes.c: what a lane reports to its group */
void dd_lanes_post(dd_lanes_t *lanes, dd_item_t **items, size_t n, const dd_stats_t *delta);
void dd_lanes_set_fatal(dd_lanes_t *lanes, int idx, const char *err);

/* dd_lane_txn.c: one transaction over items[0..n), see there. */
int dd_lane_txn(dd_lane_t *lane, dd_item_t **items, size_t n, long *retry_at, dd_stats_t *d,
                char *errstr, size_t errstr_size);

#endif /* DD_LANES_INT_H */
