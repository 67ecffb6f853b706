/*
 * The main thread of `dedupd run` (see dd_pipeline.h): polling, storing
 * and committing offsets, rebalances and shutdown, and the pipeline's life
 * cycle. It calls its parts (dd_pipeline_int.h) and none calls it back.
 * The lanes do the database work (dd_lanes.h).
 */
#include "dd_pipeline_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_log.h"

/* Per-message counters (messages, latencies) are kept by the main thread
 * without the lock and published in batches; call with mu held. */
static void dd_pipeline_counters_flush(dd_pipeline_t *pl)
{
    pl->stats.messages = pl->messages;
    for (int r = 0; r < pl->routes->cnt; r++)
        pl->stats.route[r].messages = pl->route_messages[r];
    pl->stats.first_poll_ms = pl->first_poll_ms;
    pl->stats.fetch_wait_us = pl->fetch_wait_us;
    if (pl->wait.registry) dd_registry_faults(pl->wait.registry, pl->stats.registry_faults);
    if (!pl->lat_pending) return;
    for (int i = 0; i < DD_LATENCY_BUCKETS; i++)
        pl->stats.latency_buckets[i] += pl->lat[i];
    memset(pl->lat, 0, sizeof(pl->lat));
    for (int r = 0; r < pl->routes->cnt; r++) {
        dd_stats_msg_add(&pl->stats.route[r].end_to_end, &pl->end_to_end[r]);
        dd_stats_msg_add(&pl->stats.route[r].poll_to_commit, &pl->poll_to_commit[r]);
        memset(&pl->end_to_end[r], 0, sizeof(pl->end_to_end[r]));
        memset(&pl->poll_to_commit[r], 0, sizeof(pl->poll_to_commit[r]));
    }
    pl->lat_pending = 0;
}

/* ---- polling ---- */

static void dd_pipeline_message(dd_pipeline_t *pl, rd_kafka_message_t *rkm)
{
    dd_ptrack_t *pt;
    dd_item_t *item;

    if (rkm->err) {
        if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            dd_log(DD_LOG_WARN, "Consumer error: %s", rd_kafka_message_errstr(rkm));
        rd_kafka_message_destroy(rkm);
        return;
    }
    pt = dd_offsets_get(pl->offs, rd_kafka_topic_name(rkm->rkt), rkm->partition, 0);
    if (!pt || !pt->assigned || pt->route < 0) {
        /* from an assignment we no longer hold, or a topic of no one route
         * (dedupd is stopping: dd_pipeline_assign) */
        rd_kafka_message_destroy(rkm);
        return;
    }
    item = dd_pipeline_item_new(pl);
    if (!item || (item->seq = dd_ptrack_add(pt, rkm->offset)) == UINT64_MAX) {
        dd_log(DD_LOG_ERROR, "Out of memory; message will be redelivered.");
        free(item);
        rd_kafka_message_destroy(rkm);
        return;
    }
    item->rkm = rkm;
    item->pt = pt;
    item->epoch = pt->epoch;
    item->t_poll_us = dd_now_us();
    item->t_poll_ms = item->t_poll_us / 1000;
    item->route = pt->route;
    item->rewound = rkm->offset < pt->rewind_end;
    dd_pipeline_position_polled(pl, pt, rkm, item->t_poll_ms);
    pl->inflight++;
    pl->route_messages[item->route]++;
    if (!pl->messages++) pl->first_poll_ms = item->t_poll_ms;
    if (!rkm->payload) {
        dd_pipeline_tombstone(pl, item);
        return;
    }
    if (dd_pipeline_decode_or_hold(pl, item) == 0) dd_pipeline_route_decoded(pl, item);
}

/* ---- rebalance ---- */

static void dd_pipeline_assign(dd_pipeline_t *pl, rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_topic_partition_list_t *committed = rd_kafka_topic_partition_list_copy(parts);
    dd_pipeline_poschecks_t pc;
    rd_kafka_resp_err_t err;

    /* Where each partition resumes: needed to know when --exit-at-end is
     * reached for partitions that bring no new messages. */
    err = dd_source_committed(pl->src, committed, 10000);
    if (err) dd_log(DD_LOG_WARN, "Cannot read committed offsets: %s", rd_kafka_err2str(err));
    dd_pipeline_position_load(pl, parts->cnt);
    dd_pipeline_position_check(pl, parts, &pc);
    for (int i = 0; i < committed->cnt; i++) {
        rd_kafka_topic_partition_t *p = &committed->elems[i];
        dd_ptrack_t *pt = dd_offsets_get(pl->offs, p->topic, p->partition, 1);
        int64_t next = !err && !p->err && p->offset >= 0 ? p->offset : -1;
        char at[32] = "none", end[48] = "", pos[96];
        if (!pt) continue;
        dd_ptrack_reset(pt, 1, next);
        dd_pipeline_route_topic(pl, pt);
        if (next >= 0) {
            pt->committed = next;
            snprintf(at, sizeof(at), "%lld", (long long)next);
        }
        /* the database's position, when it keeps one, says where to start */
        pt->next =
            dd_pipeline_position_assign(pl, pt, &parts->elems[i], next, &pc, i, pos, sizeof(pos));
        /* The end offset is read at start for --exit-at-end only. */
        if (pt->end_offset >= 0)
            snprintf(end, sizeof(end), ", end offset %lld", (long long)pt->end_offset);
        dd_log(DD_LOG_INFO, "Assigned %s [%d]: committed offset %s%s%s%s.", p->topic,
               (int)p->partition, at, end, pos,
               pt->next >= 0 ? ""
                             : " (the group has none: auto.offset.reset decides where to start)");
    }
    rd_kafka_topic_partition_list_destroy(committed);
    dd_pipeline_position_checked(&pc);
    dd_pipeline_position_sync(pl, 1);
    pl->assignment_live = 1;
    pl->assign_seen = 1;
}

static uint64_t dd_pipeline_inflight_of(dd_pipeline_t *pl,
                                        const rd_kafka_topic_partition_list_t *parts)
{
    uint64_t n = 0;

    for (int i = 0; i < parts->cnt; i++) {
        dd_ptrack_t *pt =
            dd_offsets_get(pl->offs, parts->elems[i].topic, parts->elems[i].partition, 0);
        if (pt && pt->assigned) n += dd_ptrack_inflight(pt);
    }
    return n;
}

static void dd_pipeline_revoke(dd_pipeline_t *pl, rd_kafka_topic_partition_list_t *parts, int lost)
{
    int64_t deadline = dd_now_ms() + pl->conf->shutdown_timeout_ms;

    dd_pipeline_held_drop(pl, parts); /* not decoded: the next owner reads them */
    /* Let the lanes finish what they hold for these partitions, so their
     * offsets can be committed before someone else takes over. Waiting is
     * only an optimisation: the database would recognise the redelivered
     * messages as duplicates anyway; so it ends when lanes wait for a
     * database that is down. The loop is alive meanwhile: say so, or
     * /healthz would take the wait for a wedged loop. */
    while (!lost && !dd_lanes_failed(pl->lanes, NULL, 0) && !dd_lanes_stopped(pl->lanes) &&
           dd_now_ms() < deadline && dd_pipeline_inflight_of(pl, parts) > 0 &&
           !dd_lanes_waiting_db(pl->lanes)) {
        dd_pipeline_drain(pl, 10);
        pthread_mutex_lock(&pl->mu);
        pl->stats.last_loop_ms = dd_now_ms();
        pthread_mutex_unlock(&pl->mu);
    }
    /* The database's positions first: Kafka's offsets never pass them. */
    if (!lost) dd_pipeline_position_flush(pl, DD_PIPELINE_POSITION_FLUSH_MS);
    if (!lost) dd_source_store(pl->src);
    dd_pipeline_position_revoke(pl, parts);
    for (int i = 0; i < parts->cnt; i++) {
        dd_ptrack_t *pt =
            dd_offsets_get(pl->offs, parts->elems[i].topic, parts->elems[i].partition, 0);
        if (pt) dd_ptrack_reset(pt, 0, -1); /* results still in flight are ignored */
    }
    /* A rejoin follows (an assign, maybe empty): until then "every assigned
     * partition is at its end" would be true of nothing at all. */
    pl->assignment_live = 0;
    pl->assign_seen = 0;
    pl->subscribed_ms = dd_now_ms(); /* waiting for the group again from now */
}

static void dd_pipeline_rebalance(void *arg, int assign, rd_kafka_topic_partition_list_t *parts,
                                  int lost)
{
    if (assign)
        dd_pipeline_assign(arg, parts);
    else
        dd_pipeline_revoke(arg, parts, lost);
}

/* ---- the loop ---- */

/* Publishes the gauges and, every few seconds, the consumer lag computed
 * from librdkafka's cached high watermarks. */
static void dd_pipeline_publish(dd_pipeline_t *pl)
{
    int64_t now = dd_now_ms();
    size_t n = 0, assigned = dd_pipeline_assigned(pl);

    pthread_mutex_lock(&pl->mu);
    pl->stats.inflight = pl->inflight;
    pl->stats.assigned = (int)assigned;
    pl->stats.dlq_skipped = (int)dd_pipeline_dlq_skipped(pl);
    pl->stats.last_loop_ms = now;
    pl->stats.last_finish_ms = pl->last_finish_ms;
    pl->stats.dlq_waiting = pl->dlq_retry || (pl->dlq && dd_dlq_pending(pl->dlq) > 0);
    dd_pipeline_counters_flush(pl);
    pl->stats.running = 1;
    pthread_mutex_unlock(&pl->mu);
    if (now - pl->lag_refresh_ms < 2000) return;
    pl->lag_refresh_ms = now;
    if (assigned > pl->lag_cap) {
        dd_lag_t *lags = realloc(pl->lags, assigned * sizeof(*lags));
        if (!lags) return;
        pl->lags = lags;
        pl->lag_cap = assigned;
    }
    pthread_mutex_lock(&pl->mu);
    for (size_t i = 0; i < dd_offsets_count(pl->offs) && n < pl->lag_cap; i++) {
        dd_ptrack_t *pt = dd_offsets_at(pl->offs, i);
        int64_t lo, hi;
        if (!pt->assigned) continue;
        hi = dd_source_high(pl->src, pt->topic, pt->partition, &lo);
        snprintf(pl->lags[n].topic, sizeof(pl->lags[n].topic), "%s", pt->topic);
        pl->lags[n].partition = pt->partition;
        pl->lags[n].group = pl->conf->kafka.group;
        pl->lags[n].lag = hi < 0 ? -1 : pt->next >= 0 ? hi - pt->next : hi - (lo > 0 ? lo : 0);
        if (pl->lags[n].lag < 0 && hi >= 0) pl->lags[n].lag = 0;
        n++;
    }
    pl->lag_cnt = n;
    pthread_mutex_unlock(&pl->mu);
}

/* A poll that started at since_us came back empty: while the partitions
 * have more on the broker, that time was spent waiting on the fetcher
 * (dd_stats_t.fetch_wait_us; docs/OPERATIONS.md, Backpressure and memory). */
static void dd_pipeline_poll_empty(dd_pipeline_t *pl, int64_t since_us)
{
    int64_t waited = dd_now_us() - since_us;

    if (waited > 0 && !dd_source_paused(pl->src) && dd_pipeline_behind(pl))
        pl->fetch_wait_us += waited;
}

static int dd_pipeline_all_at_end(dd_pipeline_t *pl)
{
    if (!pl->assignment_live) return 0;
    for (size_t i = 0; i < dd_offsets_count(pl->offs); i++) {
        dd_ptrack_t *pt = dd_offsets_at(pl->offs, i);
        if (pt->assigned && pt->route != DD_PIPELINE_ROUTE_DLQ && !dd_ptrack_at_end(pt)) return 0;
    }
    return 1;
}

/* --exit-at-end also waits until what was applied is committed: a commit
 * refused because the group membership was lost (coordinator down, session
 * timed out) would otherwise end the run with offsets behind. The loop keeps
 * polling, so librdkafka rejoins, the partitions come back at their
 * committed offsets and the redelivered messages count as duplicates. */
static int dd_pipeline_all_committed(dd_pipeline_t *pl)
{
    for (size_t i = 0; i < dd_offsets_count(pl->offs); i++) {
        dd_ptrack_t *pt = dd_offsets_at(pl->offs, i);
        if (pt->assigned && pt->route != DD_PIPELINE_ROUTE_DLQ && pt->next >= 0 &&
            pt->committed < pt->next)
            return 0;
    }
    return 1;
}

/* How long --exit-at-end keeps trying to commit once everything is applied. */
#define DD_PIPELINE_END_COMMIT_MS 60000

/* --exit-at-end: 1 once every assigned partition is applied and committed up
 * to its end offset; -1 when the commits have not come through for
 * DD_PIPELINE_END_COMMIT_MS; 0 to keep going (committing every 500 ms, the
 * result arrives in the commit callback during the next polls). */
static int dd_pipeline_end_reached(dd_pipeline_t *pl, int64_t *since, int64_t *last_commit)
{
    int64_t now = dd_now_ms();
    char err[256];

    if (!dd_pipeline_all_at_end(pl)) {
        *since = 0;
        return 0;
    }
    if (dd_pipeline_all_committed(pl)) {
        dd_log(DD_LOG_INFO, "Every assigned partition is applied and committed up to its end "
                            "offset.");
        return 1;
    }
    if (!*since) *since = now;
    if (now - *since > DD_PIPELINE_END_COMMIT_MS) return -1;
    if (now - *last_commit >= 500) {
        /* the positions now, not at their writers' next turn: Kafka's
         * offsets wait for them */
        dd_pipeline_position_flush(pl, DD_PIPELINE_POSITION_FLUSH_MS);
        dd_source_store(pl->src);
        dd_source_commit_sync(pl->src, err, sizeof(err));
        *last_commit = now;
    }
    return 0;
}

/* Backpressure. At batch.max_inflight the loop stops taking messages and
 * waits for the lanes instead; what librdkafka fetched meanwhile waits in
 * its own queue, bounded by queued.max.messages.kbytes. Pausing the
 * partitions would purge that queue and fetch it all again on resume (a
 * round trip to the broker and the data twice), which at the limit, where a
 * busy pipeline sits all the time, costs most of the throughput. So pausing
 * is kept for a pipeline stuck at the limit for DD_PIPELINE_PAUSE_AFTER_MS:
 * then polling goes on, for the group's sake (membership, rebalances), but
 * delivers nothing until half the messages are done. Returns 1 when this
 * turn must not poll. */
#define DD_PIPELINE_PAUSE_AFTER_MS 1000

static int dd_pipeline_backpressure(dd_pipeline_t *pl)
{
    int64_t max = pl->conf->batch.max_inflight, now;

    if (pl->inflight < max) {
        pl->full_since_ms = 0;
        if (dd_source_paused(pl->src) && pl->inflight <= max / 2) dd_source_pause(pl->src, 0);
        return 0;
    }
    if (dd_source_paused(pl->src)) return 0;
    now = dd_now_ms();
    if (!pl->full_since_ms) pl->full_since_ms = now;
    if (now - pl->full_since_ms < DD_PIPELINE_PAUSE_AFTER_MS) return 1;
    dd_log(DD_LOG_INFO,
           "%lld messages in flight for %d ms: pausing consumption until half "
           "of them are done.",
           (long long)pl->inflight, DD_PIPELINE_PAUSE_AFTER_MS);
    dd_source_pause(pl->src, 1);
    return 0;
}

static int dd_pipeline_prepare(dd_pipeline_t *pl, int exit_at_end, char *errstr, size_t errstr_size)
{
    int rc;

    pl->offs = dd_offsets_new();
    if (!pl->offs) return DD_ERR_NOMEM;
    rc = dd_dlq_new(&pl->dlq, pl->conf, dd_pipeline_dlq_cb, pl, errstr, errstr_size);
    if (!rc)
        rc = dd_source_new(&pl->src, pl->conf, pl->offs, dd_pipeline_rebalance, pl, errstr,
                           errstr_size);
    for (int attempt = 0; !rc && exit_at_end; attempt++) {
        rc = dd_source_query_ends(pl->src, 10000, errstr, errstr_size);
        if (rc != DD_ERR_RETRIABLE || attempt >= 5) break;
        dd_log(DD_LOG_WARN, "%s; trying again.", errstr);
        rc = DD_OK;
        dd_sleep_ms(1000, NULL);
    }
    if (!rc) rc = dd_lanes_start(pl->lanes, errstr, errstr_size);
    if (!rc) rc = dd_pipeline_position_start(pl, errstr, errstr_size);
    if (!rc) rc = dd_source_subscribe(pl->src, errstr, errstr_size);
    if (!rc) {
        int topics = 0;
        char routes[48] = "";
        for (int r = 0; r < pl->conf->route_cnt; r++)
            topics += pl->conf->routes[r].topic_cnt;
        if (pl->conf->has_routes)
            snprintf(routes, sizeof(routes), " of %d route(s)", pl->conf->route_cnt);
        pl->subscribed_ms = pl->tick_ms = dd_now_ms();
        dd_log(DD_LOG_INFO,
               "Joining the group %s: subscribed to %d topic(s)%s, waiting for partitions to be "
               "assigned.",
               pl->conf->kafka.group, topics, routes);
    }
    return rc;
}

/* Stops the lanes (finishing queued work unless the deadline passed) and
 * frees what they could not finish. */
static void dd_pipeline_stop_lanes(dd_pipeline_t *pl, int64_t deadline)
{
    dd_item_t *leftover = NULL, *next;

    dd_lanes_finish(pl->lanes);
    while (pl->dlq && pl->inflight > 0 && !dd_lanes_failed(pl->lanes, NULL, 0) &&
           dd_now_ms() < deadline) {
        dd_pipeline_drain(pl, 10);
        if (pl->dlq_retry || dd_dlq_flush(pl->dlq, 0) > 0) dd_dlq_poll(pl->dlq, 10);
    }
    if (pl->inflight > 0)
        dd_log(DD_LOG_WARN,
               "Shutdown timeout: abandoning %lld unfinished message(s); they will be "
               "redelivered.",
               (long long)pl->inflight);
    dd_lanes_stop(pl->lanes, &leftover);
    for (; leftover; leftover = next) {
        next = leftover->next;
        pl->inflight--;
        pl->abandoned++;
        dd_item_destroy(leftover, pl->pool);
    }
    dd_pipeline_abandon_dlq(pl);
}

/* The last commit. With --exit-at-end it is tried 20 times (the run's
 * result depends on it); on SIGTERM for DD_PIPELINE_STOP_COMMIT_MS in all,
 * so that with leaving the group and destroying the clients (DD_SOURCE_*,
 * dd_dlq_destroy) a shutdown ends within shutdown_timeout + 15 s whatever
 * the brokers do. */
#define DD_PIPELINE_STOP_COMMIT_MS 4000
static int dd_pipeline_final_commit(dd_pipeline_t *pl, int exit_at_end, char *errstr,
                                    size_t errstr_size)
{
    int64_t deadline = dd_now_ms() + DD_PIPELINE_STOP_COMMIT_MS;
    int rc = DD_OK;

    dd_pipeline_position_flush(pl, DD_PIPELINE_POSITION_FLUSH_MS);
    dd_source_store(pl->src);
    for (int attempt = 0; attempt < (exit_at_end ? 20 : 3); attempt++) {
        int64_t left = exit_at_end ? DD_SOURCE_COMMIT_MS : deadline - dd_now_ms();
        if (left <= 0) break;
        rc = dd_source_commit_wait(pl->src, (int)left, errstr, errstr_size);
        if (!rc) break;
        dd_pipeline_drain(pl, 0);
        rd_kafka_message_t *rkm = dd_source_poll(pl->src, 500);
        if (rkm) rd_kafka_message_destroy(rkm); /* not processed: redelivered later */
    }
    dd_source_log_committed(pl->src, rc ? "Final commit failed" : "Final commit");
    return rc;
}

/* The loop ended on a signal: say so, and what is left to finish. */
static void dd_pipeline_log_stop(dd_pipeline_t *pl, int sig)
{
    dd_log(DD_LOG_INFO,
           "Received %s: stopping. Draining %lld message(s) in flight for up to %lld ms "
           "(shutdown_timeout), then committing and leaving the group.",
           dd_signal_name(sig), (long long)pl->inflight, (long long)pl->conf->shutdown_timeout_ms);
}

/* Most messages taken from the consumer per turn of the main loop. */
#define DD_PIPELINE_POLL_BURST 64

int dd_pipeline_run(dd_pipeline_t *pl, int exit_at_end, const atomic_int *stop, char *errstr,
                    size_t errstr_size)
{
    int rc = dd_pipeline_prepare(pl, exit_at_end, errstr, errstr_size);
    int64_t last_commit = 0, end_since = 0;
    int end;

    while (!rc && !dd_lanes_failed(pl->lanes, NULL, 0) && !atomic_load(stop) && !pl->route_err[0] &&
           !pl->pos_err[0] && !pl->wait.nomem) {
        rd_kafka_message_t *rkm;
        int64_t poll_us;

        dd_pipeline_drain(pl, 0);
        dd_pipeline_held_turn(pl);
        dd_pipeline_position_sync(pl, 0);
        dd_source_store(pl->src);
        dd_pipeline_publish(pl);
        if (exit_at_end && (end = dd_pipeline_end_reached(pl, &end_since, &last_commit)) != 0) {
            if (end < 0) {
                dd_errstr_set(errstr, errstr_size,
                              "--exit-at-end: every assigned partition is "
                              "applied, but the offsets could not be committed for %d s",
                              DD_PIPELINE_END_COMMIT_MS / 1000);
                rc = DD_ERR_RETRIABLE;
            }
            break;
        }
        if (dd_pipeline_backpressure(pl)) {
            dd_pipeline_drain(pl, 20); /* wait for the lanes, not the broker */
            continue;
        }
        poll_us = dd_now_us();
        rkm = dd_source_poll(pl->src, pl->inflight > 0 ? 2 : 100);
        if (!rkm) dd_pipeline_poll_empty(pl, poll_us);
        /* Take a burst of already fetched messages per turn: the bookkeeping
         * above walks every partition and need not run for each message. */
        for (int burst = 1; rkm; burst++) {
            dd_pipeline_message(pl, rkm);
            rkm = burst < DD_PIPELINE_POLL_BURST && pl->inflight < pl->conf->batch.max_inflight
                      ? dd_source_poll(pl->src, 0)
                      : NULL;
        }
        dd_pipeline_status(pl);
    }
    if (!rc && atomic_load(stop)) dd_pipeline_log_stop(pl, atomic_load(stop));
    dd_pipeline_held_drop(pl, NULL);
    if (!dd_lanes_stopped(pl->lanes))
        dd_pipeline_stop_lanes(pl, dd_now_ms() + pl->conf->shutdown_timeout_ms);
    pthread_mutex_lock(&pl->mu);
    pl->stats.running = 0;
    pl->stats.last_finish_ms = pl->last_finish_ms;
    dd_pipeline_counters_flush(pl);
    pl->stats.inflight = pl->inflight;
    pl->stats.abandoned = pl->abandoned;
    pl->stats.abandoned_dlq = pl->abandoned_dlq;
    pthread_mutex_unlock(&pl->mu);
    dd_pipeline_dlq_log_flush(pl, 1);
    if (dd_lanes_failed(pl->lanes, errstr, errstr_size)) rc = DD_ERR_FATAL;
    if (!rc && pl->route_err[0]) {
        dd_errstr_set(errstr, errstr_size, "%s", pl->route_err);
        rc = DD_ERR_FATAL;
    }
    if (!rc && pl->pos_err[0]) {
        dd_errstr_set(errstr, errstr_size, "%s", pl->pos_err);
        rc = DD_ERR_FATAL;
    }
    if (!rc && pl->wait.nomem) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
    }
    if (pl->src && pl->dlq && !rc) {
        int crc = dd_pipeline_final_commit(pl, exit_at_end, errstr, errstr_size);
        if (crc && exit_at_end) rc = crc;
    }
    return rc;
}

/* ---- life cycle ---- */

int dd_pipeline_new(dd_pipeline_t **plp, const dd_conf_t *conf, dd_handler_t *const *hs,
                    char *errstr, size_t errstr_size)
{
    dd_pipeline_t *pl = calloc(1, sizeof(*pl));
    int rc;

    *plp = NULL;
    if (!pl) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    pl->conf = conf;
    for (int r = 0; r < DD_STATS_ROUTE_MAX; r++)
        pl->stats.processing_stuck[r] = -1; /* unknown until a compensation scan counts */
    pthread_mutex_init(&pl->mu, NULL);
    rc = dd_routes_new(&pl->routes, conf, hs, errstr, errstr_size);
    if (!rc)
        rc = dd_lanes_new(&pl->lanes, conf, pl->routes, conf->workers, NULL, errstr, errstr_size);
    if (!rc) rc = dd_parse_pool_new(&pl->pool, conf->batch.max_inflight, errstr, errstr_size);
    if (!rc) rc = dd_pipeline_wait_init(&pl->wait, conf, errstr, errstr_size);
    if (!rc && !(pl->doc = dd_json_doc_new())) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
    }
    if (rc) {
        dd_pipeline_destroy(pl);
        return rc;
    }
    *plp = pl;
    return DD_OK;
}

void dd_pipeline_keep_positions(dd_pipeline_t *pl, int keep)
{
    pl->keep_positions = keep;
}

void dd_pipeline_set_shard_check_until(dd_pipeline_t *pl, int64_t until_us)
{
    dd_lanes_set_check_until(pl->lanes, until_us);
}

void dd_pipeline_set_processing(dd_pipeline_t *pl, int route, int64_t stuck, double oldest_s)
{
    if (route < 0 || route >= DD_STATS_ROUTE_MAX) return;
    pthread_mutex_lock(&pl->mu);
    pl->stats.processing_stuck[route] = stuck;
    pl->stats.processing_oldest_s[route] = oldest_s;
    pthread_mutex_unlock(&pl->mu);
}

void dd_pipeline_set_outbox(dd_pipeline_t *pl, const dd_outbox_stats_t *st)
{
    pthread_mutex_lock(&pl->mu);
    pl->stats.outbox = *st;
    pthread_mutex_unlock(&pl->mu);
}

size_t dd_pipeline_lag(dd_pipeline_t *pl, dd_lag_t *out, size_t max)
{
    size_t n;

    pthread_mutex_lock(&pl->mu);
    n = pl->lag_cnt;
    if (n && max) memcpy(out, pl->lags, (n < max ? n : max) * sizeof(*out));
    pthread_mutex_unlock(&pl->mu);
    return n;
}

void dd_pipeline_destroy(dd_pipeline_t *pl)
{
    if (!pl) return;
    if (pl->lanes && !dd_lanes_stopped(pl->lanes)) dd_pipeline_stop_lanes(pl, 0);
    /* Every message was released (dd_pipeline_abandon_dlq): the consumer's
     * destroy waits for none. */
    dd_source_destroy(pl->src); /* leaves the group; revoke finds nothing in flight */
    dd_pipeline_position_stop(pl);
    dd_dlq_destroy(pl->dlq);
    dd_pipeline_item_release(pl);
    dd_lanes_destroy(pl->lanes); /* before the pool: its items release into it */
    dd_routes_destroy(pl->routes);
    dd_offsets_destroy(pl->offs);
    free(pl->lags);
    dd_parse_pool_destroy(pl->pool); /* after every item: they release into it */
    dd_json_doc_destroy(pl->doc);
    dd_pipeline_wait_release(&pl->wait);
    pthread_mutex_destroy(&pl->mu);
    free(pl);
}
