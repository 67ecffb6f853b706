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
#include "dd_log.h"
#include "dd_outbox.h"

/* ---- the consumer's side ---- */

dd_item_t *dd_lanes_take_done(dd_lanes_t *lanes, int wait_ms)
{
    return dd_lane_report_take(&lanes->env.report, wait_ms);
}

/* FNV-1a, cheap, then a finalizer (MurmurHash3's fmix32): the lane is the
 * hash modulo the workers, and FNV-1a's low bits depend only on the low
 * bits of the key's bytes (its last step multiplies by an odd number), so
 * keys of digits fell on 4 lanes as 61, 87, 164 and 168 of 480. */
uint32_t dd_lanes_key_hash(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

void dd_lanes_push(dd_lanes_t *lanes, const void *lane_key, size_t lane_len, dd_item_t *item)
{
    int shard = item->shard >= 0 && item->shard < lanes->env.conf->shard_cnt ? item->shard : 0;
    uint32_t hash = dd_lanes_key_hash(lane_key, lane_len);
    uint32_t lane = hash % (uint32_t)lanes->workers;

    item->lane_hash = hash;
    dd_lane_push(lanes->lane[(uint32_t)(shard * lanes->workers) + lane], item);
}

int dd_lanes_failed(dd_lanes_t *lanes, char *errstr, size_t errstr_size)
{
    return dd_lane_report_error(&lanes->env.report, errstr, errstr_size);
}

int dd_lanes_waiting(dd_lanes_t *lanes, int64_t min_ms, char *out, size_t out_size)
{
    int64_t now = dd_now_ms(), longest = -1;
    int idx = -1, state = DD_LANE_IDLE;
    long long secs;

    for (int i = 0; i < lanes->n; i++) {
        int st = atomic_load(&lanes->lane[i]->conn.state);
        int64_t busy = now - (int64_t)atomic_load(&lanes->lane[i]->conn.state_since_ms);
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

/* A lane lost its connection or backs off after a database error. */
static int dd_lanes_lane_waits_db(dd_lane_t *lane)
{
    return atomic_load(&lane->conn.down) || atomic_load(&lane->conn.state) == DD_LANE_DB_BACKOFF;
}

int dd_lanes_waiting_db(dd_lanes_t *lanes)
{
    int n = 0;

    for (int i = 0; i < lanes->n; i++)
        if (lanes->lane[i] && dd_lanes_lane_waits_db(lanes->lane[i])) n++;
    return n;
}

void dd_lanes_stats(dd_lanes_t *lanes, dd_stats_t *out)
{
    dd_lane_report_stats(&lanes->env.report, out);
    out->shard_cnt = lanes->env.conf->shard_cnt;
    for (int s = 0; s < lanes->env.conf->shard_cnt && s < DD_STATS_SHARD_MAX; s++)
        out->shard_up[s] = 1;
    for (int i = 0; i < lanes->n; i++)
        if (lanes->lane[i] && atomic_load(&lanes->lane[i]->conn.down))
            out->shard_up[lanes->lane[i]->conn.shard] = 0;
    out->lanes_waiting_db = dd_lanes_waiting_db(lanes);
}

/* ---- life cycle ---- */

/* The event namespace each shard's outbox records, into ns[s]. */
static int dd_lanes_outbox_ns(const dd_conf_t *conf, char (*ns)[DD_OUTBOX_NS_LEN + 1], char *errstr,
                              size_t errstr_size)
{
    char err[900], who[340];
    int rc = DD_OK;

    for (int s = 0; !rc && s < conf->shard_cnt; s++) {
        dd_db_t *db = NULL;
        rc = dd_db_new_shard(&db, conf, s, err, sizeof(err));
        if (!rc) rc = dd_outbox_namespace(dd_db_mysql(db), ns[s], err, sizeof(err));
        if (rc && conf->shard_cnt > 1)
            dd_errstr_set(errstr, errstr_size, "%s: %s",
                          dd_conf_shard_name(conf, s, who, sizeof(who)), err);
        else if (rc)
            dd_errstr_set(errstr, errstr_size, "%s", err);
        dd_db_destroy(db);
    }
    return rc;
}

/* outbox.enabled: each route's handler may emit, its events' ids scoped
 * by the shard's event namespace and the route's dedup table, their size
 * bounded by the relay's. */
static int dd_lanes_outbox(const dd_conf_t *conf, const dd_routes_t *routes, char *errstr,
                           size_t errstr_size)
{
    char(*ns)[DD_OUTBOX_NS_LEN + 1] = NULL;
    const char *nsp[DD_CONF_SHARD_MAX];
    size_t max = 0;
    int rc;

    if (!conf->outbox.enabled) return DD_OK;
    if ((rc = dd_outbox_max_bytes(conf, &max, errstr, errstr_size))) return rc;
    if (!(ns = calloc((size_t)conf->shard_cnt, sizeof(*ns)))) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    rc = dd_lanes_outbox_ns(conf, ns, errstr, errstr_size);
    for (int s = 0; s < conf->shard_cnt; s++)
        nsp[s] = ns[s];
    for (int r = 0; !rc && r < routes->cnt; r++)
        rc = dd_handler_set_outbox(routes->route[r].h, routes->route[r].conf->dedup.table, nsp,
                                   conf->shard_cnt, max);
    if (rc == DD_ERR_NOMEM) dd_errstr_set(errstr, errstr_size, "out of memory");
    free(ns);
    return rc;
}

/* Each route as every lane runs it: its dedup table's options, whether its
 * handler takes handle_batch(), its mode. Each route's handler decides its
 * mode; one renewer serves every route in external mode, and every shard. */
static int dd_lanes_routes(dd_lanes_t *lanes, char *errstr, size_t errstr_size)
{
    dd_lane_env_t *env = &lanes->env;
    int rc = dd_lanes_outbox(env->conf, env->routes, errstr, errstr_size);

    for (int r = 0; !rc && r < env->routes->cnt; r++) {
        const dd_route_t *rt = &env->routes->route[r];
        dd_lane_route_t *lr = &env->route[r];
        dd_handler_set_max_response(rt->h, (size_t)rt->conf->handler.max_response_bytes);
        dd_claim_opts_init(&lr->copts, rt->conf, lanes->owner, r);
        if (lr->copts.max_response > env->route[env->need_route].copts.max_response)
            env->need_route = r;
        lr->batch = rt->conf->handler.batch && dd_handler_has_batch(rt->h);
        lr->external = dd_handler_mode(rt->h) == DEDUPD_MODE_EXTERNAL;
        dd_external_opts_init(&lr->xopts, env->conf, rt->conf, lanes->owner);
        if (lr->external && !env->lease)
            rc = dd_lease_new(&env->lease, env->conf, errstr, errstr_size);
    }
    return rc;
}

int dd_lanes_new(dd_lanes_t **lanesp, const dd_conf_t *conf, const dd_routes_t *routes, int n,
                 const char *role, char *errstr, size_t errstr_size)
{
    dd_lanes_t *lanes = calloc(1, sizeof(*lanes));
    char instance[100];
    int rc;

    *lanesp = NULL;
    if (n < 1) n = 1;
    if (!lanes || !(lanes->lane = calloc((size_t)(n * conf->shard_cnt), sizeof(*lanes->lane)))) {
        free(lanes);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    lanes->env.conf = conf;
    lanes->env.routes = routes;
    lanes->workers = n;
    lanes->n = n * conf->shard_cnt;
    lanes->env.check_until_us = INT64_MAX; /* until told otherwise, auto checks as skip does */
    dd_lane_report_init(&lanes->env.report);
    dd_instance_name(instance, sizeof(instance));
    snprintf(lanes->owner, sizeof(lanes->owner), "%s%s%s", instance, role ? " " : "",
             role ? role : "");
    rc = dd_lanes_routes(lanes, errstr, errstr_size);
    for (int i = 0; !rc && i < lanes->n; i++)
        rc = dd_lane_new(&lanes->lane[i], &lanes->env, i, i / n, errstr, errstr_size);
    if (rc) {
        dd_lanes_destroy(lanes);
        return rc;
    }
    *lanesp = lanes;
    return DD_OK;
}

void dd_lanes_set_check_until(dd_lanes_t *lanes, int64_t until_us)
{
    lanes->env.check_until_us = until_us;
}

int dd_lanes_start(dd_lanes_t *lanes, char *errstr, size_t errstr_size)
{
    int rc = lanes->env.lease ? dd_lease_start(lanes->env.lease, errstr, errstr_size) : DD_OK;

    for (int i = 0; !rc && i < lanes->n; i++)
        rc = dd_lane_start(lanes->lane[i], errstr, errstr_size);
    if (rc) dd_lanes_stop(lanes, NULL);
    return rc;
}

void dd_lanes_finish(dd_lanes_t *lanes)
{
    atomic_store(&lanes->env.stop_soft, 1);
}

int dd_lanes_stopped(const dd_lanes_t *lanes)
{
    return atomic_load(&lanes->env.stop_hard);
}

/* How long stopping lanes may finish their statement before their
 * connections are cut: a lane waiting for a server that does not answer
 * would otherwise hold the stop for mysql.read_timeout. A cut commit is a
 * commit whose outcome is unknown: its offset is not committed, and the
 * dedup row says after a restart whether it was applied. */
#define DD_LANES_STOP_GRACE_MS 2000

/* Wakes every lane, and cuts the connections of those still busy after
 * DD_LANES_STOP_GRACE_MS. */
static void dd_lanes_hurry(dd_lanes_t *lanes)
{
    int64_t until = dd_now_ms() + DD_LANES_STOP_GRACE_MS;
    int busy = 1;

    for (int i = 0; i < lanes->n; i++)
        dd_lane_wake(lanes->lane[i]);
    while (busy && dd_now_ms() < until) {
        busy = 0;
        for (int i = 0; i < lanes->n && !busy; i++)
            busy = !dd_lane_exited(lanes->lane[i]);
        if (busy) dd_sleep_ms(10, NULL);
    }
    for (int i = 0; busy && i < lanes->n; i++) {
        if (dd_lane_exited(lanes->lane[i])) continue;
        dd_log(DD_LOG_WARN,
               "Lane %d is still busy with the database %d ms after the stop: cutting its "
               "connection.",
               i, DD_LANES_STOP_GRACE_MS);
        dd_db_abort(lanes->lane[i]->conn.db);
    }
}

void dd_lanes_stop(dd_lanes_t *lanes, dd_item_t **leftover)
{
    atomic_store(&lanes->env.stop_hard, 1);
    dd_lanes_hurry(lanes);
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
    dd_lease_stop(lanes->env.lease); /* the lanes gave their claims up */
}

void dd_lanes_destroy(dd_lanes_t *lanes)
{
    if (!lanes) return;
    dd_lanes_stop(lanes, NULL);
    for (int i = 0; i < lanes->n; i++)
        dd_lane_destroy(lanes->lane[i]);
    dd_lease_destroy(lanes->env.lease);
    dd_lane_report_release(&lanes->env.report);
    free(lanes->lane);
    free(lanes);
}
