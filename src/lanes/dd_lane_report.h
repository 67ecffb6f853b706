/*
 * What the lanes of a group report to its consumer (see dd_lanes.h): the
 * items they finished, their counters and the first fatal error. Every
 * lane and each of its executors reports here, below them all, so that no
 * part of a lane calls back into the group that made it.
 */
#ifndef DD_LANE_REPORT_H
#define DD_LANE_REPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "dd_item.h"
#include "dd_stats.h"

typedef struct {
    pthread_mutex_t mu; /* guards the done list, stats and fatal_err */
    pthread_cond_t cv;  /* signalled when items are done or a lane failed */
    dd_item_t *done_head, *done_tail;
    dd_stats_t stats;
    char fatal_err[1024];
    atomic_int fatal; /* a lane failed: fatal_err says why */
} dd_lane_report_t;

void dd_lane_report_init(dd_lane_report_t *rep);
/* Frees the finished items not taken. */
void dd_lane_report_release(dd_lane_report_t *rep);

/* Hands items[0..n) (finished) to the consumer and adds delta. Any lane. */
void dd_lane_report_post(dd_lane_report_t *rep, dd_item_t **items, size_t n,
                         const dd_stats_t *delta);
/* Lane idx (of shard) failed: the first such error fails the group. */
void dd_lane_report_fatal(dd_lane_report_t *rep, int idx, int shard, const char *err);
/* 1 once a lane failed. */
int dd_lane_report_failed(dd_lane_report_t *rep);
/* As dd_lanes_failed(). */
int dd_lane_report_error(dd_lane_report_t *rep, char *errstr, size_t errstr_size);
/* As dd_lanes_take_done(). */
dd_item_t *dd_lane_report_take(dd_lane_report_t *rep, int wait_ms);
/* Adds the counters posted so far to out. */
void dd_lane_report_stats(dd_lane_report_t *rep, dd_stats_t *out);

#endif /* DD_LANE_REPORT_H */
