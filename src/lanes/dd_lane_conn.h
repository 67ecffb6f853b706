/*
 * What the executors of a lane share, below them (see dd_lanes.h): what
 * the group gives every lane (dd_lane_env_t: settings, each route's
 * options, stop flags, the report) and one lane's database connection
 * with every route's handler state on it (dd_lane_conn_t). The batch
 * transaction (dd_lane_txn.h), external mode (dd_lane_ext.h) and the
 * wrong-shard check (dd_lane_shard.h) each call down to here and never
 * into one another or back into the lane.
 */
#ifndef DD_LANE_CONN_H
#define DD_LANE_CONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dd_buf.h"
#include "dd_claim.h"
#include "dd_db.h"
#include "dd_external.h"
#include "dd_lane_report.h"
#include "dd_lease.h"
#include "dd_log.h"
#include "dd_routes.h"

/* One route, as every lane runs it. */
typedef struct {
    dd_claim_opts_t copts;    /* its dedup table, for the batch transaction */
    dd_external_opts_t xopts; /* and for external mode */
    int batch;                /* its handler takes handle_batch() */
    int external;             /* its handler is in external mode */
} dd_lane_route_t;

/* What the group gives its lanes; set before they start. */
typedef struct {
    const dd_conf_t *conf;
    const dd_routes_t *routes; /* each item's key, hash and handler */
    dd_lane_route_t route[DD_CONF_ROUTE_MAX];
    int need_route;    /* the route whose rows may be the largest */
    dd_lease_t *lease; /* renews external mode's claims; NULL when no route is external */
    /* the wrong-shard check: a shard that did not answer it, so one
     * warning covers its outage whichever lane saw it first */
    atomic_int check_down[DD_CONF_SHARD_MAX];
    int64_t check_until_us; /* mysql.shard_check = auto: it runs until this dd_now_us() */
    atomic_int stop_soft;   /* a lane whose queue is empty ends */
    atomic_int stop_hard;   /* abandon work now */
    dd_lane_report_t report;
} dd_lane_env_t;

/* What a lane is doing, for the consumer's line saying what it waits for
 * (dd_lanes_waiting). */
typedef enum {
    DD_LANE_IDLE = 0,      /* waiting for messages */
    DD_LANE_IN_DB,         /* claim, finish or commit statements */
    DD_LANE_IN_HANDLER,    /* inside the handler */
    DD_LANE_DB_BACKOFF,    /* rolled back after a database error: backing off, reconnecting */
    DD_LANE_RETRY_BACKOFF, /* the handler asked to retry: backing off */
} dd_lane_state_t;

/* A route's handler's state for the connection (conn_init). */
typedef struct {
    void *state;
    int open; /* its conn_init succeeded: conn_fini is owed */
} dd_lane_hconn_t;

typedef struct {
    dd_lane_env_t *env;
    int idx;   /* the lane's index in its group */
    int shard; /* the database shard the connection is to */
    dd_db_t *db;
    dd_lane_hconn_t hconn[DD_CONF_ROUTE_MAX];
    int ready;                   /* every route's conn_init succeeded on db */
    atomic_int down;             /* lost the connection and not reconnected yet */
    atomic_int state;            /* dd_lane_state_t, written by the lane's thread */
    atomic_llong state_since_ms; /* dd_now_ms() when it entered it */
    unsigned int seed;           /* the backoff's jitter */
    dd_buf_t sql;                /* statements' scratch */
    dedupd_header *hdrs;         /* the Kafka headers of the messages handed to a handler */
    size_t hdr_cap;
    dd_log_limit_t denied_limit; /* the handler refused a privilege: warn lines */
} dd_lane_conn_t;

void dd_lane_conn_init(dd_lane_conn_t *conn, dd_lane_env_t *env, int idx, int shard);
/* Connects (checking that the server takes the largest statement a claim
 * may need) and gets every route's handler state for the connection.
 * Returns 0 or a dd_err_t class with errstr. */
int dd_lane_conn_open(dd_lane_conn_t *conn, char *errstr, size_t errstr_size);
/* After the lane's thread ended: the handlers' state, then the connection. */
void dd_lane_conn_release(dd_lane_conn_t *conn);

/* Makes sure the connection works: when it does not, the handlers' state
 * for it goes (conn_fini), the lane reconnects and every route's handler
 * gets its state for the new one (conn_init). Returns 0 or a dd_err_t
 * class with errstr. */
int dd_lane_conn_reconnect(dd_lane_conn_t *conn, char *errstr, size_t errstr_size);
/* The lane's thread says what it does now (any other thread may read it). */
void dd_lane_conn_set_state(dd_lane_conn_t *conn, dd_lane_state_t state);
/* Backoff before attempt number `attempt` (retry.*, with jitter). */
int64_t dd_lane_conn_backoff_ms(dd_lane_conn_t *conn, int attempt);
/* 1 when the lane is to stop: the group stops now, or a lane failed. */
int dd_lane_conn_stopping(const dd_lane_conn_t *conn);

/* The Kafka headers of a message (librdkafka parses them on first use),
 * room for n of them in conn->hdrs, and the dedupd_msg a handler sees of
 * item: its headers go to conn->hdrs[*at..], reserved by the caller and
 * pointing into librdkafka's copy; *at moves past them. */
size_t dd_lane_conn_header_cnt(rd_kafka_message_t *rkm);
int dd_lane_conn_headers_reserve(dd_lane_conn_t *conn, size_t n, char *errstr, size_t errstr_size);
void dd_lane_conn_msg_fill(dd_lane_conn_t *conn, const dd_item_t *item, size_t *at,
                           dedupd_msg *msg);
/* The request hash the consumer could not compute, from the payload. 0,
 * or -1 after failing the lane (out of memory or a libcrypto error). */
int dd_lane_conn_hash(dd_lane_conn_t *conn, dd_item_t *item);
/* A handler's RETRY in the log, at info; at warn (rate-limited per lane)
 * when the database refused it a privilege (herr, the server's error left
 * on the connection, 0 when unknown, or the handler's words for it). */
void dd_lane_conn_log_retry(dd_lane_conn_t *conn, const dd_item_t *item, unsigned int herr,
                            const char *error);

/* item is to be dead-lettered for reason: its error is fmt with arg. */
void dd_lane_conn_dlq(dd_item_t *item, dd_reason_t reason, const char *fmt, const char *arg);

/* The group's report (dd_lane_report.h), for this lane. */
void dd_lane_conn_post(dd_lane_conn_t *conn, dd_item_t **items, size_t n, const dd_stats_t *d);
void dd_lane_conn_fatal(dd_lane_conn_t *conn, const char *err);

#endif /* DD_LANE_CONN_H */
