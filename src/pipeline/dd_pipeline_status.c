/*
 * What the consumer of `dedupd run` says about itself (see dd_pipeline_int.h):
 * its progress, and when nothing moves, what it waits for: the group's
 * assignment, a lane (the database, a lock, the handler, a backoff), the
 * dead-letter topic, the broker. An operator reading the log after a
 * restart or during an outage learns why nothing happens, not only that.
 */
#include "dd_pipeline_int.h"

#include "dd_common.h"
#include "dd_log.h"

size_t dd_pipeline_assigned(dd_pipeline_t *pl)
{
    size_t n = 0;

    for (size_t i = 0; i < dd_offsets_count(pl->offs); i++)
        n += dd_offsets_at(pl->offs, i)->assigned ? 1 : 0;
    return n;
}

size_t dd_pipeline_dlq_skipped(dd_pipeline_t *pl)
{
    size_t n = 0;

    for (size_t i = 0; i < dd_offsets_count(pl->offs); i++) {
        const dd_ptrack_t *pt = dd_offsets_at(pl->offs, i);
        n += pt->assigned && pt->route == DD_PIPELINE_ROUTE_DLQ ? 1 : 0;
    }
    return n;
}

/* 1 when an assigned partition has more on the broker than was polled from
 * it, by librdkafka's cached high watermark. One offset more is not enough:
 * a transaction's commit marker takes an offset and is never delivered. */
int dd_pipeline_behind(dd_pipeline_t *pl)
{
    for (size_t i = 0; i < dd_offsets_count(pl->offs); i++) {
        dd_ptrack_t *pt = dd_offsets_at(pl->offs, i);
        int64_t lo, polled;
        if (!pt->assigned || pt->route == DD_PIPELINE_ROUTE_DLQ ||
            (polled = dd_ptrack_polled_end(pt)) < 0)
            continue;
        if (dd_source_high(pl->src, pt->topic, pt->partition, &lo) > polled + 1) return 1;
    }
    return 0;
}

void dd_pipeline_stats(dd_pipeline_t *pl, dd_stats_t *out)
{
    pthread_mutex_lock(&pl->mu);
    *out = pl->stats;
    pthread_mutex_unlock(&pl->mu);
    dd_lanes_stats(pl->lanes, out);
}

/* How often the consumer says what it waits for, and how often at most
 * how it is doing. */
#define DD_PIPELINE_STATUS_MS 5000
#define DD_PIPELINE_PROGRESS_MS 10000

/* Assigned, and nothing moved since the last status line: what does the
 * consumer wait for? The lanes (a database statement, a lock, the
 * handler, a backoff), the dead-letter topic's acknowledgements, or the
 * broker; or nothing at all (caught up, said once). */
static void dd_pipeline_status_stalled(dd_pipeline_t *pl, size_t assigned, int64_t now)
{
    int64_t since = pl->last_finish_ms > pl->first_poll_ms ? pl->last_finish_ms : pl->first_poll_ms;
    int64_t quiet_s = (now - (since ? since : pl->tick_ms)) / 1000;
    char lane[256];

    if (pl->inflight > 0) {
        if (dd_lanes_waiting(pl->lanes, DD_PIPELINE_STATUS_MS / 2, lane, sizeof(lane)))
            dd_log(DD_LOG_INFO,
                   "Waiting for %s. %lld message(s) in flight, none finished for %lld s.", lane,
                   (long long)pl->inflight, (long long)quiet_s);
        else if (pl->dlq_retry || (pl->dlq && dd_dlq_flush(pl->dlq, 0) > 0))
            dd_log(DD_LOG_INFO,
                   "Waiting for the dead-letter topic: %lld message(s) in flight, none finished "
                   "for %lld s; their dead letters are not acknowledged yet (sent again until "
                   "they are).",
                   (long long)pl->inflight, (long long)quiet_s);
        else
            dd_log(DD_LOG_INFO,
                   "Waiting for the workers: %lld message(s) in flight, none finished for %lld s.",
                   (long long)pl->inflight, (long long)quiet_s);
        return;
    }
    if (dd_pipeline_behind(pl)) {
        dd_log(DD_LOG_INFO,
               "Waiting for the broker: the %zu assigned partition(s) have messages that were "
               "not delivered in the last %d s (librdkafka logs why, e.g. a broker that cannot "
               "be reached).",
               assigned, DD_PIPELINE_STATUS_MS / 1000);
        return;
    }
    if (!pl->idle_said)
        dd_log(DD_LOG_INFO,
               "Idle: the %zu assigned partition(s) are caught up; waiting for new "
               "messages.",
               assigned);
    pl->idle_said = 1;
}

static void dd_pipeline_progress(dd_pipeline_t *pl, size_t assigned)
{
    dd_stats_t s;

    pl->progress_ms = dd_now_ms();
    dd_pipeline_stats(pl, &s);
    dd_log(DD_LOG_INFO,
           "Progress: %llu messages, %llu applied, %llu duplicates, %llu conflicts, %lld in "
           "flight, %zu partition(s) assigned.",
           (unsigned long long)s.messages, (unsigned long long)s.applied,
           (unsigned long long)s.duplicates, (unsigned long long)s.conflicts,
           (long long)pl->inflight, assigned);
}

/* Every DD_PIPELINE_STATUS_MS: progress when messages moved (at most every
 * DD_PIPELINE_PROGRESS_MS), else what the consumer waits for (the group's
 * assignment, the database, the handler, the broker). */
void dd_pipeline_status(dd_pipeline_t *pl)
{
    int64_t now = dd_now_ms();
    size_t assigned;

    if (now - pl->tick_ms < DD_PIPELINE_STATUS_MS) return;
    dd_pipeline_dlq_log_flush(pl, 0);
    assigned = dd_pipeline_assigned(pl);
    if (assigned == 0 && pl->assign_seen) {
        if (!pl->idle_said)
            dd_log(DD_LOG_INFO,
                   "Idle: the group %s assigned no partition to this member (it has more "
                   "members than the topics have partitions).",
                   pl->conf->kafka.group);
        pl->idle_said = 1;
    } else if (assigned == 0) {
        dd_log(DD_LOG_INFO,
               "Waiting for the group %s to assign partitions (asked %lld s ago): the brokers "
               "must answer (librdkafka logs it when they do not), and a member that stopped "
               "without leaving the group holds its partitions until its session times out "
               "(session.timeout.ms).",
               pl->conf->kafka.group, (long long)((now - pl->subscribed_ms) / 1000));
    } else if (pl->messages != pl->tick_messages || pl->last_finish_ms != pl->tick_finish_ms) {
        pl->idle_said = 0;
        if (now - pl->progress_ms >= DD_PIPELINE_PROGRESS_MS) dd_pipeline_progress(pl, assigned);
    } else {
        dd_pipeline_status_stalled(pl, assigned, now);
    }
    pl->tick_ms = now;
    pl->tick_messages = pl->messages;
    pl->tick_finish_ms = pl->last_finish_ms;
}
