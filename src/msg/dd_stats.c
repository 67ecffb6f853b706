/*
 * Counters, reasons and histogram buckets (see dd_stats.h).
 */
#include "dd_stats.h"

#include <stdio.h>

const double dd_stats_batch_bounds[DD_BATCH_BUCKETS - 1] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                            0.1,   0.25,   0.5,   1,    2.5};

const double dd_stats_msg_bounds[DD_MSG_BUCKETS - 1] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

typedef struct {
    const char *name;
    unsigned flags;
    const char *help;
} dd_reason_def_t;

static const dd_reason_def_t dd_reason_defs[DD_REASON_CNT] = {
#define DD_REASON_DEF(id, name, flags, help) [DD_REASON_##id] = {name, flags, help},
    DD_REASON_TABLE(DD_REASON_DEF)
#undef DD_REASON_DEF
};

const char *dd_reason2str(dd_reason_t reason)
{
    return reason < DD_REASON_CNT ? dd_reason_defs[reason].name : "unknown";
}

unsigned dd_reason_flags(dd_reason_t reason)
{
    return reason < DD_REASON_CNT ? dd_reason_defs[reason].flags : 0;
}

const char *dd_reason_help(dd_reason_t reason)
{
    return reason < DD_REASON_CNT ? dd_reason_defs[reason].help : NULL;
}

int dd_stats_reason_listed(dd_reason_t reason, int shard_cnt)
{
    return reason < DD_REASON_CNT &&
           (shard_cnt > 1 || !(dd_reason_flags(reason) & DD_REASON_F_SHARDS));
}

int dd_stats_reason_cnt(int shard_cnt)
{
    int n = 0;

    for (int i = 0; i < DD_REASON_CNT; i++)
        n += dd_stats_reason_listed((dd_reason_t)i, shard_cnt);
    return n;
}

void dd_route_stats_add(dd_route_stats_t *to, const dd_route_stats_t *from)
{
    to->messages += from->messages;
    to->applied += from->applied;
    to->duplicates += from->duplicates;
    to->conflicts += from->conflicts;
    to->retries += from->retries;
    to->batched += from->batched;
    to->batch_declined += from->batch_declined;
    for (int i = 0; i < DD_REASON_CNT; i++)
        to->dead_letters[i] += from->dead_letters[i];
    to->tombstones_skipped += from->tombstones_skipped;
    to->ext_waits += from->ext_waits;
    to->ext_takeovers += from->ext_takeovers;
    for (int i = 0; i < 3; i++)
        to->ext_reconciled[i] += from->ext_reconciled[i];
    to->ext_stale += from->ext_stale;
    dd_stats_msg_add(&to->end_to_end, &from->end_to_end);
    dd_stats_msg_add(&to->poll_to_commit, &from->poll_to_commit);
}

void dd_stats_msg_observe(dd_msg_hist_t *h, double secs)
{
    int b = 0;

    if (!(secs > 0)) secs = 0; /* a clock behind the producer's, or NaN */
    while (b < DD_MSG_BUCKETS - 1 && secs > dd_stats_msg_bounds[b])
        b++;
    h->bucket[b]++;
    h->sum_s += secs;
}

void dd_stats_msg_add(dd_msg_hist_t *to, const dd_msg_hist_t *from)
{
    for (int i = 0; i < DD_MSG_BUCKETS; i++)
        to->bucket[i] += from->bucket[i];
    to->sum_s += from->sum_s;
}

void dd_stats_add(dd_stats_t *to, const dd_stats_t *from)
{
    to->messages += from->messages;
    to->applied += from->applied;
    to->duplicates += from->duplicates;
    to->conflicts += from->conflicts;
    to->retries += from->retries;
    to->db_errors_retriable += from->db_errors_retriable;
    to->db_errors_fatal += from->db_errors_fatal;
    to->batches += from->batches;
    to->batched += from->batched;
    to->batch_declined += from->batch_declined;
    to->claim_races += from->claim_races;
    for (int i = 0; i < DD_REASON_CNT; i++)
        to->dead_letters[i] += from->dead_letters[i];
    for (int r = 0; r < DD_STATS_ROUTE_MAX; r++)
        dd_route_stats_add(&to->route[r], &from->route[r]);
    for (int i = 0; i < DD_STATS_SHARD_MAX; i++) {
        to->shard[i].applied += from->shard[i].applied;
        to->shard[i].db_errors_retriable += from->shard[i].db_errors_retriable;
        to->shard[i].db_errors_fatal += from->shard[i].db_errors_fatal;
        to->shard[i].check_skipped += from->shard[i].check_skipped;
    }
    for (int i = 0; i < DD_BATCH_BUCKETS; i++)
        to->batch_buckets[i] += from->batch_buckets[i];
    to->batch_seconds_sum += from->batch_seconds_sum;
    for (int i = 0; i < DD_LATENCY_BUCKETS; i++)
        to->latency_buckets[i] += from->latency_buckets[i];
    to->fetch_wait_us += from->fetch_wait_us;
}

void dd_stats_observe_batch(dd_stats_t *s, double secs)
{
    int b = 0;

    while (b < DD_BATCH_BUCKETS - 1 && secs > dd_stats_batch_bounds[b])
        b++;
    s->batch_buckets[b]++;
    s->batch_seconds_sum += secs;
}

int dd_stats_latency_bucket(int64_t us)
{
    int o, idx;

    if (us < 4) return us < 0 ? 0 : (int)us;
    o = 63 - __builtin_clzll((unsigned long long)us); /* us in [2^o, 2^(o+1)) */
    idx = (o - 1) * 4 + (int)((us >> (o - 2)) & 3);
    return idx < DD_LATENCY_BUCKETS ? idx : DD_LATENCY_BUCKETS - 1;
}

int64_t dd_stats_latency_us(const dd_stats_t *s, double q)
{
    uint64_t total = 0, seen = 0;

    for (int i = 0; i < DD_LATENCY_BUCKETS; i++)
        total += s->latency_buckets[i];
    for (int i = 0; total && i < DD_LATENCY_BUCKETS; i++) {
        seen += s->latency_buckets[i];
        if ((double)seen >= q * (double)total)
            return i < 4 ? i + 1 : (int64_t)(5 + i % 4) << (i / 4 - 1);
    }
    return 0;
}

/* The main loop turns at least every 100 ms, so half of stuck_after
 * without a turn means the loop itself is wedged; messages in flight and
 * none finished for stuck_after is a stall (longer than retry.backoff_max
 * by default, so one RETRY cycle is not taken for one). */
int dd_stats_waiting_dependency(const dd_stats_t *s)
{
    return s->lanes_waiting_db > 0 || s->dlq_waiting || s->registry_wait[0];
}

dd_health_t dd_stats_health(const dd_stats_t *s, int64_t now_ms, int64_t start_ms,
                            int64_t idle_seen_ms, int64_t stuck_after_ms, char *text, size_t size)
{
    int64_t loop_ref = s->last_loop_ms ? s->last_loop_ms : start_ms;
    int64_t busy_ref = s->last_finish_ms > idle_seen_ms ? s->last_finish_ms : idle_seen_ms;

    if (!s->running && s->last_loop_ms) {
        snprintf(text, size, "stopping: the consumer loop has ended");
        return DD_HEALTH_STOPPING;
    }
    if (now_ms - loop_ref > stuck_after_ms / 2) {
        snprintf(text, size, "stuck: the consumer loop has not turned for %lld ms",
                 (long long)(now_ms - loop_ref));
        return DD_HEALTH_STUCK;
    }
    if (s->inflight > 0 && now_ms - busy_ref > stuck_after_ms) {
        snprintf(text, size, "stuck: %lld message(s) in flight and none finished for %lld ms",
                 (long long)s->inflight, (long long)(now_ms - busy_ref));
        return DD_HEALTH_STUCK;
    }
    snprintf(text, size, "ok");
    return DD_HEALTH_OK;
}
