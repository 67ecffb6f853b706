/*
 * The lane group: the database side of `dedupd run` and `dedupd replay
 * --apply`.
 *
 * A group has n lanes; each lane is one thread with one database
 * connection, running batches of the items routed to it. Each batch is one
 * transaction: claim every key, run the handler for the keys the batch
 * owns, record the outcomes, COMMIT (dd_lane_txn.c). Items with the same
 * lane key always go to the same lane, in the order they were pushed, so
 * one key is never in two transactions of this process at once.
 *
 * With several database shards (mysql.shards) a group has n lanes per
 * shard, each connected to its shard; an item goes to a lane of its shard
 * (item->shard), chosen among them by its lane key. Why lanes per shard,
 * rather than one lane with a connection per shard splitting its batch: a
 * lane retrying a transaction against a shard that is down would hold up
 * the other shards' messages queued behind it. With lanes per shard a down
 * shard holds back only its own messages; the consumer's watermark (an
 * offset is stored only up to the first unfinished message of its
 * partition) waits for them, while the other shards' messages keep flowing
 * up to batch.max_inflight.
 *
 * A batch may hold messages of several routes (dd_routes.h): each is
 * claimed in its route's dedup table and applied by its route's handler,
 * all in the one transaction. Every lane's connection gets the handler
 * state of every route (conn_init per route and connection).
 *
 * A route whose handler is in external mode (include/dedupd/handler.h)
 * takes no part in that transaction: the lane splits each batch it
 * collects by the mode of each message's route, runs the local ones as
 * above and the external ones one by one through claim, act and finish
 * (dd_lane_ext.c), where a message that must wait is set aside without
 * holding up the others. A route's messages are always of one mode, so
 * the order of one key's messages is kept either way.
 *
 * Threads: one thread, the consumer's, pushes items and takes finished
 * ones back (dd_lanes_take_done); it owns an item again once it took it.
 * dd_lanes_stats() may be called from any thread.
 *
 * Life cycle: new (no connection, no thread) -> start (connects every lane
 * and starts its thread) -> finish (optional: lanes end once their queues
 * are empty) -> stop (abandons what was not begun, joins the threads) ->
 * destroy. A lane that fails fatally (a handler bug, a database error no
 * retry fixes) stops taking work and fails the group: dd_lanes_failed().
 */
#ifndef DD_LANES_H
#define DD_LANES_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"
#include "dd_item.h"
#include "dd_routes.h"
#include "dd_stats.h"

typedef struct dd_lanes_s dd_lanes_t;

/* A group of n lanes per database shard (at least 1) applying each item (item->route) with
 * its route of routes, whose handlers must all be set; routes stays the
 * caller's and must outlive the group. The group bounds each handler's
 * responses (its route's handler.max_response_bytes). Claimed rows name
 * their owner "host:pid", followed by " role" when role is not NULL. */
int dd_lanes_new(dd_lanes_t **lanesp, const dd_conf_t *conf, const dd_routes_t *routes, int n,
                 const char *role, char *errstr, size_t errstr_size);

/* With mysql.shard_check = auto: the wrong-shard check runs until the
 * dd_now_us() until_us (INT64_MAX unless set). Called before
 * dd_lanes_start. */
void dd_lanes_set_check_until(dd_lanes_t *lanes, int64_t until_us);

/* Connects every lane to the database (checking that the server takes
 * the largest statement a claim may need) and starts its thread. Returns 0
 * or the dd_err_t class of the first failure; the lanes started so far
 * are then stopped. */
int dd_lanes_start(dd_lanes_t *lanes, char *errstr, size_t errstr_size);

/* The hash of a lane key: its lane is the hash modulo the workers. */
uint32_t dd_lanes_key_hash(const void *key, size_t len);
/* Queues item on the lane of its shard (item->shard) lane_key[0..lane_len)
 * hashes to. */
void dd_lanes_push(dd_lanes_t *lanes, const void *lane_key, size_t lane_len, dd_item_t *item);

/* Takes the list of finished items (NULL when none), waiting up to wait_ms
 * for some when there are none yet and no lane failed. */
dd_item_t *dd_lanes_take_done(dd_lanes_t *lanes, int wait_ms);

/* 1 once a lane failed fatally (its error then in errstr), else 0. */
int dd_lanes_failed(dd_lanes_t *lanes, char *errstr, size_t errstr_size);

/* From now on a lane whose queue is empty ends; what is queued still runs. */
void dd_lanes_finish(dd_lanes_t *lanes);

/* Abandons every item not begun, lets the transactions under way end
 * (a backoff ends at once) and joins the threads. The items abandoned are
 * appended to *leftover for the caller (items already finished stay for
 * dd_lanes_take_done). Safe on a group that was never started. */
void dd_lanes_stop(dd_lanes_t *lanes, dd_item_t **leftover);

/* 1 once dd_lanes_stop() began. */
int dd_lanes_stopped(const dd_lanes_t *lanes);

/* When a lane has been busy on one thing for at least min_ms (in a
 * database statement, in the handler, backing off after an error), writes
 * what the longest-busy lane waits for to out ("the handler: lane 1 has
 * been inside it for 12 s") and returns 1; else 0. Any thread. */
int dd_lanes_waiting(dd_lanes_t *lanes, int64_t min_ms, char *out, size_t out_size);

/* How many lanes lost their connection or back off after a database
 * error: waiting for the database, not stuck. Any thread. */
int dd_lanes_waiting_db(dd_lanes_t *lanes);

/* Adds the lanes' counters (applied, duplicates, conflicts, retries,
 * batches, database errors, the batch histogram; per route and per shard
 * too) to out, and sets its shard gauges (shard_cnt, shard_up). */
void dd_lanes_stats(dd_lanes_t *lanes, dd_stats_t *out);

/* Stops the group if needed and frees it, with any item still in it
 * (their trees freed through cJSON, which a parse pool allows while it
 * exists). NULL is fine. */
void dd_lanes_destroy(dd_lanes_t *lanes);

#endif /* DD_LANES_H */
