/*
 * Counters, reasons and histogram buckets (see dd_stats.h).
 */
#include "dd_stats.h"

const double dd_stats_batch_bounds[DD_BATCH_BUCKETS - 1] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                            0.1,   0.25,   0.5,   1,    2.5};

static const char *const dd_reason_names[DD_REASON_CNT] = {
    "bad_json",          "key_missing",    "key_too_long",      "payload_too_large",
    "conflict",          "rejected",       "retries_exhausted", "unresolved",
    "shard_key_invalid", "shard_unmapped", "wrong_shard"};

int dd_stats_reason_cnt(int shard_cnt)
{
    return shard_cnt > 1 ? DD_REASON_CNT : DD_REASON_SHARD_KEY_INVALID;
}

const char *dd_reason2str(dd_reason_t reason)
{
    return reason < DD_REASON_CNT ? dd_reason_names[reason] : "unknown";
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
    to->ext_waits += from->ext_waits;
    to->ext_takeovers += from->ext_takeovers;
    for (int i = 0; i < 3; i++)
        to->ext_reconciled[i] += from->ext_reconciled[i];
    to->ext_stale += from->ext_stale;
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
