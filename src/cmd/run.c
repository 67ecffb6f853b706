/*
 * `dedupd run`: the consumer, with what runs beside it. Validates the
 * configuration as `dedupd check` does, makes sure the dedup table holds
 * keys of this dedupd's format, then runs the pipeline with the HTTP
 * endpoint, the background purge and, when some route's handler is in
 * external mode, the compensation scan until SIGTERM/SIGINT (or, with
 * --exit-at-end, until every assigned partition is applied and committed
 * and the outbox's events are published),
 * and prints a summary line on stdout.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_grants.h"
#include "dd_position.h"
#include "dd_schemafp.h"
#include "dd_handler.h"
#include "dd_http.h"
#include "dd_log.h"
#include "dd_migrate.h"
#include "dd_outbox.h"
#include "dd_pipeline.h"
#include "dd_purge.h"
#include "dd_reconcile.h"
#include "dd_relay.h"
#include "dd_sd.h"
#include "dd_routes.h"
#include "dd_validate.h"

#ifndef DEDUPD_VERSION
#define DEDUPD_VERSION "0.1.0"
#endif

typedef struct {
    int exit_at_end;
} dd_run_opts_t;

static const dd_cmd_opt_t dd_run_opts[] = {
    DD_CMD_FLAG("exit-at-end", dd_run_opts_t, exit_at_end,
                "exit 0 once every assigned partition is applied and\n"
                "committed up to its end offset at start, and the\n"
                "outbox's events are published (outbox.enabled)"),
    DD_CMD_OPT_END,
};

/* With several routes, a line per route before the summary line, with
 * the route's share of its counters. */
static void dd_run_summary_routes(const dd_conf_t *conf, const dd_stats_t *s)
{
    for (int r = 0; conf->has_routes && r < conf->route_cnt; r++) {
        const dd_route_stats_t *rs = &s->route[r];
        uint64_t dl = 0;
        for (int i = 0; i < DD_REASON_CNT; i++)
            dl += rs->dead_letters[i];
        printf("summary_route route=%s messages=%llu applied=%llu duplicates=%llu conflicts=%llu "
               "retries=%llu dead_letters=%llu",
               conf->routes[r].name, (unsigned long long)rs->messages,
               (unsigned long long)rs->applied, (unsigned long long)rs->duplicates,
               (unsigned long long)rs->conflicts, (unsigned long long)rs->retries,
               (unsigned long long)dl);
        for (int i = 0; i < DD_REASON_CNT; i++)
            if (dd_stats_reason_listed((dd_reason_t)i, conf->shard_cnt))
                printf(" dlq_%s=%llu", dd_reason2str((dd_reason_t)i),
                       (unsigned long long)rs->dead_letters[i]);
        printf(" batched=%llu batch_declined=%llu\n", (unsigned long long)rs->batched,
               (unsigned long long)rs->batch_declined);
    }
}

/* The summary line (stdout): what the bench and the tests read. */
static void dd_run_summary(const dd_conf_t *conf, dd_pipeline_t *pl)
{
    dd_stats_t s;
    uint64_t dl = 0;

    dd_pipeline_stats(pl, &s);
    dd_run_summary_routes(conf, &s);
    for (int i = 0; i < DD_REASON_CNT; i++)
        dl += s.dead_letters[i];
    printf("summary messages=%llu applied=%llu duplicates=%llu conflicts=%llu retries=%llu "
           "dead_letters=%llu",
           (unsigned long long)s.messages, (unsigned long long)s.applied,
           (unsigned long long)s.duplicates, (unsigned long long)s.conflicts,
           (unsigned long long)s.retries, (unsigned long long)dl);
    for (int i = 0; i < DD_REASON_CNT; i++)
        if (dd_stats_reason_listed((dd_reason_t)i, conf->shard_cnt))
            printf(" dlq_%s=%llu", dd_reason2str((dd_reason_t)i),
                   (unsigned long long)s.dead_letters[i]);
    printf(" db_retries=%llu batches=%llu batched=%llu batch_declined=%llu claim_races=%llu",
           (unsigned long long)s.db_errors_retriable, (unsigned long long)s.batches,
           (unsigned long long)s.batched, (unsigned long long)s.batch_declined,
           (unsigned long long)s.claim_races);
    printf(" position_rewinds=%llu position_gaps=%llu position_mismatches=%llu "
           "position_errors=%llu",
           (unsigned long long)s.position_rewinds, (unsigned long long)s.position_gaps,
           (unsigned long long)s.position_mismatches, (unsigned long long)s.position_errors);
    /* poll -> finished latency quantiles, as upper bounds: the bound of the
     * histogram bucket holding the quantile, in whole ms rounded up (the
     * quantile is at most this, and at least 0.8 of it); then the time
     * from the first message polled to the last one finished (what the
     * bench divides by) */
    printf(" latency_p50_le_ms=%lld latency_p99_le_ms=%lld active_s=%.3f fetch_wait_s=%.3f\n",
           (long long)((dd_stats_latency_us(&s, 0.50) + 999) / 1000),
           (long long)((dd_stats_latency_us(&s, 0.99) + 999) / 1000),
           s.first_poll_ms ? (double)(s.last_finish_ms - s.first_poll_ms) / 1000.0 : 0.0,
           (double)s.fetch_wait_us / 1e6);
    fflush(stdout);
}

/* mysql.shard_check = auto: the shard whose layout change's window (its
 * changed_at + the largest dedup.ttl) ends last. */
typedef struct {
    int64_t ttl_s;  /* the largest dedup.ttl */
    int64_t left_s; /* seconds until the window ends; <= 0: no window open */
    int shard;      /* whose window it is; -1: none */
    int unknown;    /* a shard records no changed_at: the check stays on */
    int positions;  /* shards that have the table of the consumer's positions */
    char changed[32], until[32];
} dd_run_window_t;

/* Reads shard s's layout change into w, keeping the window that ends last. */
static void dd_run_read_window(const dd_conf_t *conf, MYSQL *db, int s, dd_run_window_t *w)
{
    char err[512], changed[32], until[32], who[340];
    int64_t left = -1;

    if (dd_migrate_layout_changed(db, w->ttl_s, &left, changed, sizeof(changed), until,
                                  sizeof(until), err, sizeof(err)) != DD_OK) {
        dd_log(DD_LOG_WARN,
               "%s: reading when its shard layout changed: %s; the wrong-shard check stays on "
               "(run `dedupd migrate` with this configuration to add dedupd_shard_layout's "
               "column changed_at).",
               dd_conf_shard_name(conf, s, who, sizeof(who)), err);
        w->unknown = 1;
    } else if (changed[0] && (w->shard < 0 || left > w->left_s)) {
        w->left_s = left;
        w->shard = s;
        snprintf(w->changed, sizeof(w->changed), "%s", changed);
        snprintf(w->until, sizeof(w->until), "%s", until);
    }
}

/* With several shards, shard s must record the configuration's layout; a
 * route it records nothing for yet is warned about. */
static int dd_run_check_layout(const dd_conf_t *conf, MYSQL *db, int s, char *errstr,
                               size_t errstr_size)
{
    dd_migrate_layout_t layout;
    char who[340];
    int unknown = 0, rc = dd_migrate_layout_of(conf, s, &layout, errstr, errstr_size);

    dd_conf_shard_name(conf, s, who, sizeof(who));
    if (!rc)
        rc = dd_migrate_layout_check(db, who, &layout, conf->shard_cnt > 1, &unknown, errstr,
                                     errstr_size);
    if (!rc && unknown)
        dd_log(DD_LOG_WARN,
               "%s records no shard_by, shard_key or map of %d route(s) yet (a layout recorded "
               "before they were, or a new route): `dedupd migrate` records them",
               who, unknown);
    return rc;
}

/* In every shard, dedupd's tables must be granted, and every route's dedup
 * table must hold keys of the format this dedupd renders and be granted
 * (and, for a handler in external mode, have the fence column); with
 * several shards, each must record this configuration's layout (and, for
 * mysql.shard_check = auto, when it changed: into w). */
static int dd_run_check_table(const dd_conf_t *conf, dd_handler_t *const *hs, int s,
                              dd_run_window_t *w, char *errstr, size_t errstr_size)
{
    dd_db_t *db = NULL;
    int rc = dd_db_new_shard(&db, conf, s, errstr, errstr_size), positions = 0;
    unsigned needs = dd_grants_run_needs(conf);

    if (!rc) rc = dd_grants_check(db, conf, NULL, needs, errstr, errstr_size);
    if (!rc) rc = dd_run_check_layout(conf, dd_db_mysql(db), s, errstr, errstr_size);
    if (!rc && conf->shard_cnt > 1 && conf->shard_check == DD_SHARD_CHECK_AUTO)
        dd_run_read_window(conf, dd_db_mysql(db), s, w);
    if (!rc) rc = dd_position_check(db, conf, &positions, errstr, errstr_size);
    w->positions += positions;
    if (!rc && dd_conf_reads_avro(conf)) rc = dd_schemafp_check(db, conf, 1, errstr, errstr_size);

    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        const char *table = conf->routes[r].dedup.table;
        int external = dd_handler_mode(hs[r]) == DEDUPD_MODE_EXTERNAL, index = 0;
        rc = dd_migrate_check_key_format(dd_db_mysql(db), table, errstr, errstr_size);
        if (!rc)
            rc = dd_grants_check(db, conf, table, needs & DD_GRANTS_DEDUP_NEEDS, errstr,
                                 errstr_size);
        if (!rc && conf->routes[r].handler.grants)
            rc = dd_grants_check_declared(db, conf->routes[r].handler.grants, errstr, errstr_size);
        if (!rc && external)
            rc = dd_reconcile_check_table(db, &conf->routes[r], &index, errstr, errstr_size);
        if (!rc && external && !index)
            dd_log(DD_LOG_WARN,
                   "Dedup table %s has no index of processing rows, so the compensation scan "
                   "reads the whole table: run `dedupd migrate` with this configuration to "
                   "create it.",
                   table);
    }
    dd_db_destroy(db);
    return rc;
}

/* What the start-up validation found goes to the log. */
static void dd_run_report(void *opaque, dd_validate_level_t level, const char *what,
                          const char *text)
{
    static const dd_log_level_t levels[] = {DD_LOG_DEBUG, DD_LOG_WARN, DD_LOG_ERROR};

    (void)opaque;
    dd_log(levels[level], "%s: %s", what, text);
}

/* The compensation scan's gauges go with the pipeline's stats. */
static void dd_run_publish_stuck(void *opaque, int route, int64_t stuck, double oldest_s)
{
    dd_pipeline_set_processing(opaque, route, stuck, oldest_s);
}

/* The outbox relay's status goes with the pipeline's stats. */
static void dd_run_publish_outbox(void *opaque, const dd_outbox_stats_t *st)
{
    dd_pipeline_set_outbox(opaque, st);
}

/* outbox.enabled and outbox.relay: the relay runs beside the consumer. */
static int dd_run_relay(const dd_conf_t *conf, dd_pipeline_t *pl, dd_relay_t **relayp, char *errstr,
                        size_t errstr_size)
{
    int rc;

    if (!conf->outbox.enabled) return DD_OK;
    if (!conf->outbox.relay) {
        dd_log(DD_LOG_INFO, "Outbox relay: not in this process (outbox.relay = false; run "
                            "`dedupd relay`).");
        return DD_OK;
    }
    rc = dd_relay_new(relayp, conf, dd_run_publish_outbox, pl, errstr, errstr_size);
    return rc ? rc : dd_relay_start(*relayp, errstr, errstr_size);
}

/* The events every shard's outbox holds, counted on the connections db. */
static int dd_run_outbox_count(const dd_conf_t *conf, dd_db_t **db, dd_outbox_count_t *all,
                               char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    memset(all, 0, sizeof(*all));
    for (int s = 0; !rc && s < conf->shard_cnt; s++) {
        dd_outbox_count_t c;
        if (!db[s]) rc = dd_db_new_shard(&db[s], conf, s, errstr, errstr_size);
        if (!rc) rc = dd_outbox_count(dd_db_mysql(db[s]), &c, errstr, errstr_size);
        all->pending += rc ? 0 : c.pending;
        all->parked += rc ? 0 : c.parked;
    }
    return rc;
}

/* While the relay publishes what waits: what it says, every 10 s. */
static void dd_run_outbox_waiting(dd_relay_t *relay, const dd_outbox_count_t *c, int64_t *said_ms)
{
    dd_outbox_stats_t st;

    if (dd_now_ms() - *said_ms < 10000) return;
    *said_ms = dd_now_ms();
    dd_relay_stats(relay, &st);
    dd_log(DD_LOG_INFO,
           "--exit-at-end: waiting for the outbox relay to publish %lld event(s) before "
           "exiting%s%s.",
           (long long)c->pending, st.state[0] ? "; the relay: " : "", st.state);
}

/* --exit-at-end with the outbox: the events the run committed are
 * published before the process exits, by its relay (or another that holds
 * a shard's lock), until a signal stops the wait; then one line says what
 * the outbox still holds. */
static int dd_run_outbox_drain(const dd_conf_t *conf, dd_relay_t *relay, char *errstr,
                               size_t errstr_size)
{
    dd_db_t *db[DD_CONF_SHARD_MAX] = {0};
    dd_outbox_count_t c;
    int64_t said_ms = 0;
    int rc;

    while (!(rc = dd_run_outbox_count(conf, db, &c, errstr, errstr_size)) && c.pending > 0 &&
           relay && !atomic_load(&dd_stop_requested)) {
        dd_run_outbox_waiting(relay, &c, &said_ms);
        dd_sleep_ms(100, &dd_stop_requested);
    }
    for (int s = 0; s < conf->shard_cnt; s++)
        dd_db_destroy(db[s]);
    if (rc) return rc;
    if (c.pending > 0)
        dd_log(DD_LOG_WARN, "Exiting with %lld event(s) left in the outbox, not yet published: %s.",
               (long long)c.pending,
               relay ? "stopped by a signal; the relay sends them at the next start"
                     : "the relay does not run in this process (outbox.relay = false): `dedupd "
                       "relay` sends them");
    else
        dd_log(DD_LOG_INFO, "--exit-at-end: every event in the outbox is published.");
    if (c.parked > 0)
        dd_log(DD_LOG_WARN,
               "The outbox holds %lld parked event(s), refused by Kafka for good: `dedupd "
               "outbox list` shows them.",
               (long long)c.parked);
    return DD_OK;
}

/* "a,b" for route r's topics. */
static void dd_run_topics(const dd_conf_route_t *route, char *out, size_t out_size)
{
    size_t pos = 0;

    out[0] = '\0';
    for (int i = 0; i < route->topic_cnt && pos < out_size; i++)
        pos += (size_t)snprintf(out + pos, out_size - pos, "%s%s", i ? "," : "", route->topics[i]);
}

/* The first line: what is starting, with what; with routes, a line per
 * route. */
static void dd_run_log_start(const dd_conf_t *conf)
{
    char topics[512];

    if (!conf->has_routes) {
        dd_run_topics(&conf->routes[0], topics, sizeof(topics));
        dd_log(DD_LOG_INFO,
               "Starting dedupd %s (librdkafka %s, MariaDB Connector/C %s): config %s, group %s, "
               "topics %s, handler %s, %d worker(s).",
               DEDUPD_VERSION, rd_kafka_version_str(), mysql_get_client_info(), conf->path,
               conf->kafka.group, topics, conf->routes[0].handler.path, conf->workers);
        return;
    }
    dd_log(DD_LOG_INFO,
           "Starting dedupd %s (librdkafka %s, MariaDB Connector/C %s): config %s, group %s, "
           "%d route(s), %d worker(s).",
           DEDUPD_VERSION, rd_kafka_version_str(), mysql_get_client_info(), conf->path,
           conf->kafka.group, conf->route_cnt, conf->workers);
    for (int r = 0; r < conf->route_cnt; r++) {
        const dd_conf_route_t *route = &conf->routes[r];
        dd_run_topics(route, topics, sizeof(topics));
        dd_log(DD_LOG_INFO, "Route %s: topics %s, key %s, dedup table %s, handler %s.", route->name,
               topics, route->dedup.key, route->dedup.table, route->handler.path);
    }
}

/* "7d", "12h", "30m" or "45s". */
static const char *dd_run_duration(int64_t s, char *out, size_t out_size)
{
    if (s > 0 && s % 86400 == 0)
        snprintf(out, out_size, "%lldd", (long long)(s / 86400));
    else if (s > 0 && s % 3600 == 0)
        snprintf(out, out_size, "%lldh", (long long)(s / 3600));
    else if (s > 0 && s % 60 == 0)
        snprintf(out, out_size, "%lldm", (long long)(s / 60));
    else
        snprintf(out, out_size, "%llds", (long long)s);
    return out;
}

/* mysql.shard_check = auto: the check runs while a layout change is
 * younger than the largest dedup.ttl (a row of an older layout is not
 * remembered anyway), until a monotonic deadline taken from the database's
 * clock; one line says which. */
static void dd_run_shard_check_window(const dd_conf_t *conf, dd_pipeline_t *pl,
                                      const dd_run_window_t *w)
{
    char ttl[32];

    if (conf->shard_cnt <= 1 || conf->shard_check != DD_SHARD_CHECK_AUTO) return;
    dd_run_duration(w->ttl_s, ttl, sizeof(ttl));
    if (w->unknown) {
        dd_log(DD_LOG_INFO, "Wrong-shard check: on (a shard records no time of its layout "
                            "change).");
    } else if (w->shard >= 0 && w->left_s > 0) {
        dd_pipeline_set_shard_check_until(pl, dd_now_us() + w->left_s * 1000000);
        dd_log(DD_LOG_INFO,
               "Wrong-shard check: on until %s (the layout of shard %d changed at %s; "
               "dedup.ttl %s).",
               w->until, w->shard, w->changed, ttl);
    } else {
        dd_pipeline_set_shard_check_until(pl, 0);
        dd_log(DD_LOG_INFO,
               "Wrong-shard check: off (no shard's layout changed within dedup.ttl, %s).", ttl);
    }
}

/* The consumer's positions are kept when every shard has their table
 * (`dedupd migrate` creates it); without it dedupd runs as before, on
 * Kafka's offsets alone, and says so. */
static void dd_run_positions(const dd_conf_t *conf, dd_pipeline_t *pl, int have)
{
    dd_pipeline_keep_positions(pl, have == conf->shard_cnt);
    if (have < conf->shard_cnt)
        dd_log(DD_LOG_WARN,
               "%s no table dedupd_position: the consumer's positions are not kept in the "
               "database, so a database that goes back in time (a restore, a failover to a "
               "lagging replica) loses what it lost without a word; run `dedupd migrate` with "
               "this configuration to create it.",
               conf->shard_cnt > 1 ? "A database shard has" : "The database has");
}

/* The last line, once everything is released, says how it ended. */
static void dd_run_log_end(const dd_stats_t *end, int rc)
{
    if (rc)
        dd_log(DD_LOG_ERROR, "Stopped after an error (exit status 1).");
    else if (end->abandoned)
        dd_log(DD_LOG_WARN,
               "Stopped, abandoning %lld message(s) (%lld of them waiting for "
               "their dead letter's acknowledgement): their offsets were not committed, so "
               "they are consumed again after a restart.",
               (long long)end->abandoned, (long long)end->abandoned_dlq);
    else
        dd_log(DD_LOG_INFO, "Stopped cleanly.");
}

/* ---- the bound on stopping ---- */

/* Past the signal, a stop may take shutdown_timeout for the work in flight
 * and DD_RUN_STOP_EXTRA_MS for the rest (the last commit, leaving the
 * group, closing the clients; each bounded on its own). Should anything
 * still wait beyond that (a broker, a database that never answers), the
 * watchdog ends the process: what it had not committed is consumed again
 * after a restart and recognised by the dedup table, as after kill -9. */
#define DD_RUN_STOP_EXTRA_MS 15000

typedef struct {
    pthread_t thread;
    atomic_int done;
    int64_t bound_ms;
} dd_run_watchdog_t;

static void *dd_run_watchdog_main(void *arg)
{
    dd_run_watchdog_t *w = arg;
    int64_t by = 0;

    while (!atomic_load(&w->done)) {
        if (!by && atomic_load(&dd_stop_requested)) by = dd_now_ms() + w->bound_ms;
        if (by && dd_now_ms() >= by) {
            dd_log(DD_LOG_ERROR,
                   "Stopping took longer than shutdown_timeout + %d s: exiting now "
                   "(exit status 1); what was not committed is consumed again after a "
                   "restart.",
                   DD_RUN_STOP_EXTRA_MS / 1000);
            _exit(DD_EXIT_FAIL);
        }
        dd_sleep_ms(100, NULL);
    }
    return NULL;
}

static int dd_run_watchdog_start(dd_run_watchdog_t *w, const dd_conf_t *conf)
{
    atomic_init(&w->done, 0);
    w->bound_ms = conf->shutdown_timeout_ms + DD_RUN_STOP_EXTRA_MS - 500;
    return pthread_create(&w->thread, NULL, dd_run_watchdog_main, w) == 0;
}

static void dd_run_watchdog_stop(dd_run_watchdog_t *w, int started)
{
    if (!started) return;
    atomic_store(&w->done, 1);
    pthread_join(w->thread, NULL);
}

static int dd_run_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    const dd_run_opts_t *o = opts;
    dd_handler_t *hs[DD_CONF_ROUTE_MAX] = {0};
    dd_pipeline_t *pl = NULL;
    dd_http_t *http = NULL;
    dd_purge_t *purge = NULL;
    dd_reconcile_t *scan = NULL;
    dd_relay_t *relay = NULL;
    dd_sd_t *sd = NULL;
    dd_stats_t end = {0};
    dd_run_window_t window = {.shard = -1};
    dd_run_watchdog_t watchdog;
    char err[1024];
    int rc, watching;

    for (int r = 0; r < conf->route_cnt; r++)
        if (conf->routes[r].dedup.ttl_s > window.ttl_s) window.ttl_s = conf->routes[r].dedup.ttl_s;
    dd_signals_install();
    watching = dd_run_watchdog_start(&watchdog, conf);
    dd_run_log_start(conf);
    rc = dd_validate_conf(conf, hs, dd_run_report, NULL, err, sizeof(err));
    for (int r = 0; !rc && r < conf->route_cnt; r++)
        dd_log(DD_LOG_INFO, "Handler %s loaded from %s%s%s.", dd_handler_name(hs[r]),
               dd_handler_path(hs[r]), conf->has_routes ? " for route " : "",
               conf->has_routes ? conf->routes[r].name : "");
    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        rc = dd_run_check_table(conf, hs, s, &window, err, sizeof(err));
    if (!rc) rc = dd_pipeline_new(&pl, conf, hs, err, sizeof(err));
    if (!rc) dd_run_shard_check_window(conf, pl, &window);
    if (!rc) dd_run_positions(conf, pl, window.positions);
    if (!rc && conf->http.listen) rc = dd_http_new(&http, conf, pl, hs, err, sizeof(err));
    if (!rc && http) rc = dd_http_start(http, err, sizeof(err));
    if (!rc) rc = dd_purge_new(&purge, conf, err, sizeof(err));
    if (!rc) rc = dd_purge_start(purge, err, sizeof(err));
    if (!rc && dd_reconcile_needed(conf, hs))
        rc = dd_reconcile_new(&scan, conf, hs, dd_run_publish_stuck, pl, err, sizeof(err));
    if (!rc && scan) rc = dd_reconcile_start(scan, err, sizeof(err));
    if (!rc) rc = dd_run_relay(conf, pl, &relay, err, sizeof(err));
    if (!rc) rc = dd_sd_new(&sd, conf, pl, err, sizeof(err));
    if (!rc) rc = dd_sd_start(sd, err, sizeof(err));
    if (!rc) {
        rc = dd_pipeline_run(pl, o->exit_at_end, &dd_stop_requested, err, sizeof(err));
        if (!rc && o->exit_at_end && conf->outbox.enabled)
            rc = dd_run_outbox_drain(conf, relay, err, sizeof(err));
        dd_run_summary(conf, pl);
        dd_pipeline_stats(pl, &end);
    }
    if (rc) dd_log(DD_LOG_ERROR, "Stopping: %s", err);
    dd_sd_destroy(sd);
    dd_relay_destroy(relay);
    dd_reconcile_destroy(scan);
    dd_purge_destroy(purge);
    dd_http_destroy(http);
    dd_pipeline_destroy(pl);
    dd_routes_destroy_handlers(hs, conf->route_cnt);
    dd_run_watchdog_stop(&watchdog, watching);
    dd_run_log_end(&end, rc);
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_run = {
    .name = "run",
    .args = "-c FILE [--exit-at-end]",
    .summary = "consume, claim, apply exactly once, store offsets",
    .usage = "usage: dedupd run -c FILE [--exit-at-end]\n"
             "\n"
             "Consumes the configured topics, claims each message's business key in the\n"
             "transaction of the handler's writes, and stores offsets after the commit;\n"
             "runs until SIGTERM/SIGINT, then finishes the transaction under way.\n",
    .exits = "  0  stopped cleanly (SIGTERM/SIGINT, or the end with --exit-at-end)\n"
             "  1  failure: configuration, database, a fatal Kafka or handler error\n"
             "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .opts_size = sizeof(dd_run_opts_t),
    .opts = dd_run_opts,
    .run = dd_run_run,
};
