/*
 * The lanes' report to their consumer (see dd_lane_report.h): one lock
 * over the finished items, the counters and the fatal error, shared by
 * every lane thread and the consumer's.
 */
#include "dd_lane_report.h"

#include <stdio.h>
#include <time.h>

#include "dd_common.h"

void dd_lane_report_init(dd_lane_report_t *rep)
{
    pthread_mutex_init(&rep->mu, NULL);
    dd_cond_init(&rep->cv);
}

void dd_lane_report_release(dd_lane_report_t *rep)
{
    dd_item_list_destroy(rep->done_head, NULL);
    rep->done_head = rep->done_tail = NULL;
    pthread_mutex_destroy(&rep->mu);
    pthread_cond_destroy(&rep->cv);
}

void dd_lane_report_post(dd_lane_report_t *rep, dd_item_t **items, size_t n,
                         const dd_stats_t *delta)
{
    pthread_mutex_lock(&rep->mu);
    for (size_t i = 0; i < n; i++) {
        items[i]->next = NULL;
        if (rep->done_tail)
            rep->done_tail->next = items[i];
        else
            rep->done_head = items[i];
        rep->done_tail = items[i];
    }
    dd_stats_add(&rep->stats, delta);
    pthread_cond_signal(&rep->cv);
    pthread_mutex_unlock(&rep->mu);
}

void dd_lane_report_fatal(dd_lane_report_t *rep, int idx, int shard, const char *err)
{
    pthread_mutex_lock(&rep->mu);
    if (!atomic_load(&rep->fatal)) {
        snprintf(rep->fatal_err, sizeof(rep->fatal_err), "lane %d: %.1000s", idx, err);
        rep->stats.db_errors_fatal++;
        rep->stats.shard[shard].db_errors_fatal++;
        atomic_store(&rep->fatal, 1);
    }
    pthread_cond_signal(&rep->cv);
    pthread_mutex_unlock(&rep->mu);
}

int dd_lane_report_failed(dd_lane_report_t *rep)
{
    return atomic_load(&rep->fatal);
}

int dd_lane_report_error(dd_lane_report_t *rep, char *errstr, size_t errstr_size)
{
    if (!atomic_load(&rep->fatal)) return 0;
    pthread_mutex_lock(&rep->mu);
    dd_errstr_set(errstr, errstr_size, "%s", rep->fatal_err);
    pthread_mutex_unlock(&rep->mu);
    return 1;
}

dd_item_t *dd_lane_report_take(dd_lane_report_t *rep, int wait_ms)
{
    dd_item_t *list;

    pthread_mutex_lock(&rep->mu);
    if (!rep->done_head && !atomic_load(&rep->fatal) && wait_ms > 0) {
        struct timespec ts;
        dd_cond_deadline(&ts, wait_ms);
        pthread_cond_timedwait(&rep->cv, &rep->mu, &ts);
    }
    list = rep->done_head;
    rep->done_head = rep->done_tail = NULL;
    pthread_mutex_unlock(&rep->mu);
    return list;
}

void dd_lane_report_stats(dd_lane_report_t *rep, dd_stats_t *out)
{
    pthread_mutex_lock(&rep->mu);
    dd_stats_add(out, &rep->stats);
    pthread_mutex_unlock(&rep->mu);
}
