/*
 * External mode, one of a lane's executors (see dd_lane_ext.c): the
 * messages of routes whose handler is in external mode, message by
 * message, and those parked to wait for their turn. It calls down to the
 * lane's connection (dd_lane_conn.h) only; what it does not finish it
 * hands back to the lane, which owns the queue.
 */
#ifndef DD_LANE_EXT_H
#define DD_LANE_EXT_H

#include <stddef.h>

#include "dd_item.h"
#include "dd_lane_acts.h"
#include "dd_lane_conn.h"

typedef struct {
    dd_lane_conn_t *conn;
    dd_item_t *parked; /* messages waiting for their turn, earliest due first */
    int reconnect;     /* a database error: check the connection before the next step */
    /* external.in_flight > 1: act() on threads of its own, and the messages
     * waiting for one of them (or for their lane key's call to end), in
     * order; NULL otherwise */
    dd_lane_acts_t *acts;
    dd_item_t *blocked, *blocked_tail;
} dd_lane_ext_t;

void dd_lane_ext_init(dd_lane_ext_t *ext, dd_lane_conn_t *conn);
/* external.in_flight = n > 1: act() runs on n threads of the lane's, and
 * wake(arg) wakes the lane when a call ends. 0 or a dd_err_t class. */
int dd_lane_ext_open_acts(dd_lane_ext_t *ext, int n, void (*wake)(void *), void *arg, char *errstr,
                          size_t errstr_size);
/* Frees the messages still parked (dd_lane_ext_unpark takes them first). */
void dd_lane_ext_release(dd_lane_ext_t *ext);

/* Runs the parked messages whose time came, then items[0..n). Returns how
 * many of items it took (finished or parked); items[that..n) are the
 * lane's again, when it stops or fails. */
size_t dd_lane_ext_process(dd_lane_ext_t *ext, dd_item_t **items, size_t n);
/* 1 when a parked message's time came, or a call in flight ended (lane
 * thread only). */
int dd_lane_ext_due(const dd_lane_ext_t *ext);
/* 1 when messages are parked, in flight or waiting for a call. */
int dd_lane_ext_parked(const dd_lane_ext_t *ext);
/* The lane ends: waits for its calls in flight, gives up the claims of
 * its parked messages and of those (their lease ends now, so a restart
 * need not wait for it; an effect that happened is found by the next
 * claim's reconcile()) and returns them as a list for the lane to hand
 * back. */
dd_item_t *dd_lane_ext_unpark(dd_lane_ext_t *ext);

#endif /* DD_LANE_EXT_H */
