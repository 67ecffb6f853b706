/*
 * The wrong-shard check, one of a lane's executors (see dd_lane_shard.c):
 * its read connections to the other shards, one struct per shard, and its
 * scratch. It calls down to the lane's connection (dd_lane_conn.h) only.
 */
#ifndef DD_LANE_SHARD_H
#define DD_LANE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "dd_item.h"
#include "dd_lane_conn.h"

/* Another shard, as one lane asks it. */
typedef struct {
    dd_db_t *db;     /* a read connection, opened on first use */
    int fails;       /* failures in a row */
    int64_t next_ms; /* after a failure: not asked before */
    char err[256];   /* and why it failed */
} dd_lane_peer_t;

typedef struct {
    dd_lane_conn_t *conn;
    dd_lane_peer_t peer[DD_CONF_SHARD_MAX];
    int *found;            /* per item: the shard holding its key elsewhere, or -1 */
    dd_item_t **misplaced; /* and the dead letters */
} dd_lane_peers_t;

/* Scratch for batches of up to cap messages of conn's lane. */
int dd_lane_peers_init(dd_lane_peers_t *peers, dd_lane_conn_t *conn, size_t cap, char *errstr,
                       size_t errstr_size);
/* Closes the read connections and frees the scratch; zeroed is fine. */
void dd_lane_peers_release(dd_lane_peers_t *peers);

/* Before a batch's transaction (with several shards, unless
 * mysql.shard_check is off): asks every other shard which keys of
 * items[0..*n) it holds; the messages of such keys (those the lane's own
 * shard does not hold too) are dead-lettered wrong_shard and posted, the
 * others kept in order at the head of items, *n their count. With
 * mysql.shard_check = wait, waits with backoff until every shard
 * answered. Returns 0, or DD_ERR_RETRIABLE when the lanes stop meanwhile
 * (items untouched). */
int dd_lane_peers_check(dd_lane_peers_t *peers, dd_item_t **items, size_t *n);

#endif /* DD_LANE_SHARD_H */
