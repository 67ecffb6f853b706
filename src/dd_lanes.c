/*
 * The lane group (see dd_lanes.h): built here, in one place, for `dedupd
 * run` and `dedupd replay --apply` alike, so both apply a message through
 * the same claim + handler transaction with the same options.
 */
#include "dd_lanes_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dd_common.h"

/* ---- what lanes report ---- */

void dd_lanes_post(dd_lanes_t *lanes, dd_item_t **items, size_t n, const dd_stats_t *delta)
{
    pthread_mutex_lock(&lanes->mu);
    for (size_t i = 0; i < n; i++) {
        items[i]->next = NULL;
        if (lanes->done_tail)
            lanes->done_tail->next = items[i];
        else
            lanes->done_head = items[i];
        lanes->done_tail = items[i];
    }
    dd_stats_add(&lanes->stats, delta);
    pthread_cond_signal(&lanes->cv);
    pthread_mutex_unlock(&lanes->mu);
}

void dd_lanes_set_fatal(dd_lanes_t *lanes, int idx, const char *err)
{
    pthread_mutex_lock(&lanes->mu);
    if (!atomic_load(&lanes->fatal)) {
        snprintf(lanes->fatal_err, sizeof(lanes->fatal_err), "lane %d: %.1000s", idx, err);
        lanes->stats.db_errors_fatal++;
        if (lanes->lane[idx]) lanes->stats.shard[lanes->lane[idx]->shard].db_errors_fatal++;
        atomic_store(&lanes->fatal, 1);
    }
    pthread_cond_signal(&lanes->cv);
    pthread_mutex_unlock(&lanes->mu);
}

/* ---- the consumer's side ---- */

dd_item_t *dd_lanes_take_done(dd_lanes_t *lanes, int wait_ms)
{
    dd_item_t *list;

    pthread_mutex_lock(&lanes->mu);
    if (!lanes->done_head && !atomic_load(&lanes->fatal) && wait_ms > 0) {
        struct timespec ts;
        dd_cond_deadline(&ts, wait_ms);
        pthread_cond_timedwait(&lanes->cv, &lanes->mu, &ts);
    }
    list = lanes->done_head;
    lanes->done_head = lanes->done_tail = NULL;
    pthread_mutex_unlock(&lanes->mu);
    return list;
}

/* FNV-1a: cheap, and spreads keys that differ in one byte. */
static uint32_t dd_lanes_route(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

void dd_lanes_push(dd_lanes_t *lanes, const void *lane_key, size_t lane_len, dd_item_t *item)
{
    int shard = item->shard >= 0 && item->shard < lanes->conf->shard_cnt ? item->shard : 0;
    uint32_t lane = dd_lanes_route(lane_key, lane_len) % (uint32_t)lanes->workers;

    dd_lane_push(lanes->lane[(uint32_t)(shard * lanes->workers) + lane], item);
}

int dd_lanes_failed(dd_lanes_t *lanes, char *errstr, size_t errstr_size)
{
    if (!atomic_load(&lanes->fatal)) return 0;
    pthread_mutex_lock(&lanes->mu);
    dd_errstr_set(errstr, errstr_size, "%s", lanes->fatal_err);
    pthread_mutex_unlock(&lanes->mu);
    return 1;
}

int dd_lanes_waiting(dd_lanes_t *lanes, int64_t min_ms, char *out, size_t out_size)
{
    int64_t now = dd_now_ms(), longest = -1;
    int idx = -1, state = DD_LANE_IDLE;
    long long secs;

    for (int i = 0; i < lanes->n; i++) {
        int st = atomic_load(&lanes->lane[i]->state);
        int64_t busy = now - (int64_t)atomic_load(&lanes->lane[i]->state_since_ms);
        if (st == DD_LANE_IDLE || busy < min_ms || busy <= longest) continue;
        longest = busy;
        idx = i;
        state = st;
    }
    if (idx < 0) return 0;
    secs = (long long)(longest / 1000);
    switch (state) {
    case DD_LANE_IN_DB:
        snprintf(out, out_size,
                 "the database: lane %d has been in a statement for %lld s (a row lock another "
                 "transaction holds, or a slow server)",
                 idx, secs);
        break;
    case DD_LANE_IN_HANDLER:
        snprintf(out, out_size, "the handler: lane %d has been inside it for %lld s", idx, secs);
        break;
    case DD_LANE_DB_BACKOFF:
        snprintf(out, out_size,
                 "the database: lane %d rolled back after a database error %lld s ago and is "
                 "backing off (reconnecting when the connection is gone)",
                 idx, secs);
        break;
    default:
        snprintf(out, out_size,
                 "a retry: lane %d has been backing off for %lld s before trying again a message "
                 "its handler asked to retry",
                 idx, secs);
        break;
    }
    return 1;
}

void dd_lanes_stats(dd_lanes_t *lanes, dd_stats_t *out)
{
    pthread_mutex_lock(&lanes->mu);
    dd_stats_add(out, &lanes->stats);
    pthread_mutex_unlock(&lanes->mu);
    out->shard_cnt = lanes->conf->shard_cnt;
    for (int s = 0; s < lanes->conf->shard_cnt && s < DD_STATS_SHARD_MAX; s++)
        out->shard_up[s] = 1;
    for (int i = 0; i < lanes->n; i++)
        if (lanes->lane[i] && atomic_load(&lanes->lane[i]->down))
            out->shard_up[lanes->lane[i]->shard] = 0;
}

/* ---- life cycle ---- */

int dd_lanes_new(dd_lanes_t **lanesp, const dd_conf_t *conf, const dd_routes_t *routes, int n,
                 const char *role, char *errstr, size_t errstr_size)
{
    dd_lanes_t *lanes = calloc(1, sizeof(*lanes));
    char instance[100];
    int rc = DD_OK;

    *lanesp = NULL;
    if (n < 1) n = 1;
    if (!lanes || !(lanes->lane = calloc((size_t)(n * conf->shard_cnt), sizeof(*lanes->lane)))) {
        free(lanes);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    lanes->conf = conf;
    lanes->routes = routes;
    lanes->workers = n;
    lanes->n = n * conf->shard_cnt;
    lanes->check_until_us = INT64_MAX; /* until told otherwise, auto checks as skip does */
    pthread_mutex_init(&lanes->mu, NULL);
    dd_cond_init(&lanes->cv);
    dd_instance_name(instance, sizeof(instance));
    snprintf(lanes->owner, sizeof(lanes->owner), "%s%s%s", instance, role ? " " : "",
             role ? role : "");
    for (int r = 0; r < routes->cnt; r++) {
        const dd_route_t *rt = &routes->route[r];
        dd_handler_set_max_response(rt->h, (size_t)rt->conf->handler.max_response_bytes);
        dd_claim_opts_init(&lanes->copts[r], rt->conf, lanes->owner, r);
        if (lanes->copts[r].max_response > lanes->copts[lanes->need_route].max_response)
            lanes->need_route = r;
        lanes->batch[r] = rt->conf->handler.batch && dd_handler_has_batch(rt->h);
    }
    /* Each route's handler decides its mode; one renewer serves every
     * route in external mode, and every shard. */
    for (int r = 0; r < routes->cnt; r++) {
        lanes->external[r] = dd_handler_mode(routes->route[r].h) == DEDUPD_MODE_EXTERNAL;
        dd_external_opts_init(&lanes->xopts[r], conf, routes->route[r].conf, lanes->owner);
        if (!rc && lanes->external[r] && !lanes->lease)
            rc = dd_lease_new(&lanes->lease, conf, errstr, errstr_size);
    }
    for (int i = 0; !rc && i < lanes->n; i++)
        rc = dd_lane_new(&lanes->lane[i], lanes, i, errstr, errstr_size);
    if (rc) {
        dd_lanes_destroy(lanes);
        return rc;
    }
    *lanesp = lanes;
    return DD_OK;
}

void dd_lanes_set_check_until(dd_lanes_t *lanes, int64_t until_us)
{
    lanes->check_until_us = until_us;
}

int dd_lanes_start(dd_lanes_t *lanes, char *errstr, size_t errstr_size)
{
    int rc = lanes->lease ? dd_lease_start(lanes->lease, errstr, errstr_size) : DD_OK;

    for (int i = 0; !rc && i < lanes->n; i++)
        rc = dd_lane_start(lanes->lane[i], errstr, errstr_size);
    if (rc) dd_lanes_stop(lanes, NULL);
    return rc;
}

void dd_lanes_finish(dd_lanes_t *lanes)
{
    atomic_store(&lanes->stop_soft, 1);
}

int dd_lanes_stopped(const dd_lanes_t *lanes)
{
    return atomic_load(&lanes->stop_hard);
}

void dd_lanes_stop(dd_lanes_t *lanes, dd_item_t **leftover)
{
    atomic_store(&lanes->stop_hard, 1);
    for (int i = 0; i < lanes->n; i++) {
        dd_item_t *list, *tail;

        if (!lanes->lane[i]) continue;
        dd_lane_stop(lanes->lane[i]);
        if (!(list = dd_lane_unqueue(lanes->lane[i]))) continue;
        if (!leftover) {
            dd_item_list_destroy(list, NULL);
            continue;
        }
        for (tail = list; tail->next; tail = tail->next)
            ;
        tail->next = *leftover;
        *leftover = list;
    }
    dd_lease_stop(lanes->lease); /* the lanes gave their claims up */
}

void dd_lanes_destroy(dd_lanes_t *lanes)
{
    if (!lanes) return;
    dd_lanes_stop(lanes, NULL);
    for (int i = 0; i < lanes->n; i++)
        dd_lane_destroy(lanes->lane[i]);
    dd_item_list_destroy(lanes->done_head, NULL);
    dd_lease_destroy(lanes->lease);
    pthread_mutex_destroy(&lanes->mu);
    pthread_cond_destroy(&lanes->cv);
    free(lanes->lane);
    free(lanes);
}
