/*
 * External mode's calls in flight (external.in_flight): a lane's threads
 * calling act(), so that a slow downstream does not make `workers` the
 * number of calls at once. The lane claims and finishes on its own
 * connection as before; only the call itself goes to one of these
 * threads, and the lane goes on with other messages meanwhile. Messages of
 * one lane key act one at a time, in order: a lane key with a call in
 * flight is busy until the lane takes the call's result.
 */
#ifndef DD_LANE_ACTS_H
#define DD_LANE_ACTS_H

#include <stddef.h>
#include <stdint.h>

#include "dd_handler.h"
#include "dd_item.h"

typedef struct dd_lane_acts_s dd_lane_acts_t;

/* n threads (started now), and wake(arg) called from them when a call
 * ends, to wake the lane. Returns 0 or a dd_err_t class with errstr. */
int dd_lane_acts_new(dd_lane_acts_t **actsp, int n, void (*wake)(void *), void *arg, char *errstr,
                     size_t errstr_size);
/* Waits for the calls in flight, then stops the threads. Results not
 * taken are dropped (their items are still the caller's: take them with
 * dd_lane_acts_take first). NULL is fine. */
void dd_lane_acts_destroy(dd_lane_acts_t *acts);

/* 1 when a message of lane key hash may start: a thread is free and no
 * call of that lane key is in flight or waiting to be taken. */
int dd_lane_acts_can_start(const dd_lane_acts_t *acts, uint32_t lane_hash);
/* Hands item's act() to a thread: h with msg (copied, its headers too;
 * what they point into is the item's). The item is the threads' until
 * dd_lane_acts_take returns it. 0, or DD_ERR_NOMEM. */
int dd_lane_acts_submit(dd_lane_acts_t *acts, dd_handler_t *h, dd_item_t *item,
                        const dedupd_msg *msg);
/* A call that ended: its item, status, result (taken over) and the wait
 * it asked for (host->retry_after; -1: none), and its lane key free
 * again. NULL when none ended. */
dd_item_t *dd_lane_acts_take(dd_lane_acts_t *acts, dedupd_status *st, dedupd_result *res,
                             int64_t *retry_after_ms);
/* Free calls: how many messages may start acting now. */
int dd_lane_acts_free(dd_lane_acts_t *acts);
/* Calls in flight or ended and not taken. */
int dd_lane_acts_pending(dd_lane_acts_t *acts);
/* 1 when a call ended and waits to be taken. */
int dd_lane_acts_ready(dd_lane_acts_t *acts);
/* Waits for every call in flight to end (they cannot be interrupted). */
void dd_lane_acts_drain(dd_lane_acts_t *acts);

#endif /* DD_LANE_ACTS_H */
