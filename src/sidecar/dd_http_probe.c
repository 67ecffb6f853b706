/*
 * What the sidecar's probes say (see dd_http_int.h): the database prober,
 * a thread that pings every shard over connections of its own at most once
 * per second and caches the answers, so that no request waits for a
 * server; liveness, which fails when dedupd is wedged and not when what it
 * waits for is down; readiness, which fails when a shard does not answer
 * (naming it); and the metrics page with the prober's view merged in.
 */
#include "dd_http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "dd_common.h"
#include "dd_log.h"
#include "dd_metrics.h"

/* Remembers when the pipeline was last seen with nothing in flight, and
 * when last with a dependency down (a database that does not answer the
 * prober or that lanes reconnect to, dead letters the broker has not
 * acknowledged, messages that wait for the schema registry). The snapshot says when a message last
 * finished, not when the current work started: after an idle hour, a message polled a second ago
 * would look stuck for an hour; and after an outage, messages that wait for the database are not
 * stuck, nor are they the moment it is back. Sampled by the prober every second and by every
 * request, so the error is at most a sampling period. */
static void dd_http_observe(dd_http_t *http, const dd_stats_t *s)
{
    int64_t now = dd_now_ms();
    int dep_down;

    pthread_mutex_lock(&http->mu);
    dep_down = dd_stats_waiting_dependency(s) || !http->db_ok ||
               (http->ping_shard >= 0 && now - http->ping_since_ms > DD_HTTP_PING_STALE_MS);
    if (s->inflight == 0) http->idle_seen_ms = now;
    if (dep_down) http->dep_seen_ms = now;
    pthread_mutex_unlock(&http->mu);
}
/* ---- database prober ---- */

/* One ping, reconnecting when the connection is gone. Auto-reconnect is
 * off on every dedupd connection, so a restarted server needs an explicit
 * dd_db_reconnect. */
static int dd_http_ping_shard(dd_http_t *http, int s, char *errstr, size_t errstr_size)
{
    if (!http->db[s])
        return dd_db_new_shard_timeout(&http->db[s], http->conf, s, DD_HTTP_PING_STALE_MS / 1000,
                                       errstr, errstr_size);
    if (dd_db_mysql(http->db[s]) && mysql_ping(dd_db_mysql(http->db[s])) == 0) return DD_OK;
    return dd_db_reconnect(http->db[s], errstr, errstr_size);
}

/* Says which shard is being pinged (-1: none), for readiness to name it. */
static void dd_http_pinging(dd_http_t *http, int s)
{
    pthread_mutex_lock(&http->mu);
    http->ping_shard = s;
    http->ping_since_ms = dd_now_ms();
    pthread_mutex_unlock(&http->mu);
}

/* "shard 1 (127.0.0.1:3307)", or "the database" with one shard. */
static const char *dd_http_shard_name(const dd_http_t *http, int s, char *out, size_t out_size)
{
    char addr[300];

    if (http->conf->shard_cnt == 1)
        snprintf(out, out_size, "the database");
    else
        snprintf(out, out_size, "shard %d (%s)", s,
                 dd_conf_mysql_addr(&http->conf->shards[s], addr, sizeof(addr)));
    return out;
}

/* Every shard answers; else errstr names the first that did not ("shard 1
 * (127.0.0.1:3307) unreachable: ..." with several). */
static int dd_http_ping(dd_http_t *http, char *errstr, size_t errstr_size)
{
    char err[256], name[340];
    int rc = DD_OK, ok;

    for (int s = 0; s < http->conf->shard_cnt; s++) {
        dd_http_pinging(http, s);
        ok = dd_http_ping_shard(http, s, err, sizeof(err)) == DD_OK;
        pthread_mutex_lock(&http->mu);
        http->shard_down[s] = !ok;
        if (!ok) http->ping_errors[s]++;
        pthread_mutex_unlock(&http->mu);
        if (ok || rc) continue;
        rc = DD_ERR_RETRIABLE;
        if (http->conf->shard_cnt == 1)
            dd_errstr_set(errstr, errstr_size, "%s", err);
        else
            dd_errstr_set(errstr, errstr_size, "%s unreachable: %s",
                          dd_http_shard_name(http, s, name, sizeof(name)), err);
    }
    dd_http_pinging(http, -1);
    return rc;
}

void *dd_http_prober_main(void *arg)
{
    dd_http_t *http = arg;
    char err[400], why[200];

    while (!atomic_load(&http->stop)) {
        dd_stats_t s;
        int ok;

        why[0] = '\0';
        pthread_mutex_lock(&http->conn_mu);
        dd_http_conn_sweep(http, dd_now_ms(), why, sizeof(why));
        pthread_mutex_unlock(&http->conn_mu);
        if (why[0]) dd_http_warn(http, why);
        dd_pipeline_stats(http->pl, &s);
        dd_http_observe(http, &s);
        err[0] = '\0';
        ok = dd_http_ping(http, err, sizeof(err)) == DD_OK;
        pthread_mutex_lock(&http->mu);
        if (http->db_ok != ok && http->db_check_ms)
            dd_log(ok ? DD_LOG_INFO : DD_LOG_WARN, "Readiness: the database %s%s%s.",
                   ok ? "answers again" : "does not answer", ok ? "" : ": ", ok ? "" : err);
        http->db_ok = ok;
        http->db_check_ms = dd_now_ms();
        snprintf(http->db_err, sizeof(http->db_err), "%s", err);
        pthread_mutex_unlock(&http->mu);
        dd_sleep_ms(DD_HTTP_PING_EVERY_MS, &http->stop);
    }
    return NULL;
}

/* ---- endpoints ---- */

/* Liveness (dd_stats_health, which the systemd watchdog uses too), with
 * the clock of "none finished" restarted whenever a dependency was seen
 * down. Writes the reason into text and returns the HTTP status. */
unsigned int dd_http_health(dd_http_t *http, char *text, size_t size)
{
    dd_stats_t s;
    int64_t busy_ref;
    dd_health_t h;

    dd_pipeline_stats(http->pl, &s);
    dd_http_observe(http, &s);
    pthread_mutex_lock(&http->mu);
    busy_ref = http->idle_seen_ms > http->dep_seen_ms ? http->idle_seen_ms : http->dep_seen_ms;
    pthread_mutex_unlock(&http->mu);
    h = dd_stats_health(&s, dd_now_ms(), http->started_ms, busy_ref,
                        http->conf->http.stuck_after_ms, text, size > 1 ? size - 1 : size);
    snprintf(text + strlen(text), size - strlen(text), "\n");
    return h == DD_HEALTH_OK ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
}

/* The outbox relay's line of /readyz (it does not decide readiness: the
 * consumer goes on while events wait), or "". */
static void dd_http_outbox_text(const dd_outbox_stats_t *o, char *out, size_t size)
{
    out[0] = '\0';
    if (!o->on) return;
    if (o->backlog < 0)
        snprintf(out, size, "outbox: not counted yet%s%.240s\n", o->state[0] ? "; " : "", o->state);
    else
        snprintf(out, size,
                 "outbox: %lld event(s) waiting, the oldest for %.1f s, %lld parked%s%.240s\n",
                 (long long)o->backlog, o->oldest_s, (long long)o->parked, o->state[0] ? "; " : "",
                 o->state);
}

/* Readiness: partitions assigned and a fresh, successful database ping. */
unsigned int dd_http_ready(dd_http_t *http, char *text, size_t size)
{
    dd_stats_t s;
    int64_t now = dd_now_ms(), checked;
    int ok, hung;
    char err[400], name[340], outbox[400];

    dd_pipeline_stats(http->pl, &s);
    pthread_mutex_lock(&http->mu);
    ok = http->db_ok;
    checked = http->db_check_ms;
    snprintf(err, sizeof(err), "%s", http->db_err);
    /* The shard being pinged holds the answer up when its ping is overdue,
     * or when the last answer is stale (the round before waited on it). */
    hung = http->ping_shard >= 0 && (now - http->ping_since_ms > DD_HTTP_PING_STALE_MS ||
                                     (checked && now - checked > DD_HTTP_PING_STALE_MS))
               ? http->ping_shard
               : -1;
    pthread_mutex_unlock(&http->mu);

    if (!s.running || s.assigned <= 0) {
        snprintf(text, size, "not ready: no partitions assigned\n");
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (hung >= 0) {
        snprintf(text, size, "not ready: %s did not answer a ping within %d ms\n",
                 dd_http_shard_name(http, hung, name, sizeof(name)), DD_HTTP_PING_STALE_MS);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!checked || now - checked > DD_HTTP_PING_STALE_MS) {
        snprintf(text, size, "not ready: the database did not answer a ping within %d ms\n",
                 DD_HTTP_PING_STALE_MS);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (s.registry_wait[0]) {
        snprintf(text, size, "not ready: %.480s\n", s.registry_wait);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!ok && http->conf->shard_cnt > 1) {
        snprintf(text, size, "not ready: %s\n", err);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!ok) {
        snprintf(text, size, "not ready: the database does not answer: %s\n", err);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    dd_http_outbox_text(&s.outbox, outbox, sizeof(outbox));
    if (s.position_gaps)
        snprintf(text, size,
                 "ok: %d partition(s) assigned, database answers; but the database went back "
                 "past what Kafka still holds on %llu partition(s) (%llu offsets): reconcile "
                 "them from the source (see the log)\n%s",
                 s.assigned, (unsigned long long)s.position_gaps,
                 (unsigned long long)s.position_gap_messages, outbox);
    else
        snprintf(text, size, "ok: %d partition(s) assigned, database answers\n%s", s.assigned,
                 outbox);
    return MHD_HTTP_OK;
}

/* The prober's view in the metrics: a shard whose ping failed, or hangs
 * past DD_HTTP_PING_STALE_MS, is down; its failed pings are database
 * errors (a hung one from the moment it is late: when it fails, the count
 * it adds is the same). */
static void dd_http_add_pings(dd_http_t *http, dd_stats_t *s)
{
    int64_t now = dd_now_ms();

    pthread_mutex_lock(&http->mu);
    for (int i = 0; i < http->conf->shard_cnt && i < DD_STATS_SHARD_MAX; i++) {
        int hung = http->ping_shard == i && now - http->ping_since_ms > DD_HTTP_PING_STALE_MS;
        uint64_t errors = http->ping_errors[i] + (hung ? 1 : 0); /* the hung one counts now */
        if (http->shard_down[i] || hung) s->shard_up[i] = 0;
        s->shard[i].db_errors_retriable += errors;
        s->db_errors_retriable += errors;
    }
    pthread_mutex_unlock(&http->mu);
}

/* Appends the handlers' own metrics to the page *outp (*lenp bytes). */
static int dd_http_metrics_handlers(dd_http_t *http, const char *const *routes, char **outp,
                                    size_t *lenp)
{
    char *more = NULL, *page = NULL;
    size_t more_len = 0;
    FILE *f = open_memstream(&more, &more_len);
    int bad;

    if (!f) return DD_ERR_NOMEM;
    dd_handler_metrics_render(f, http->hs, routes, http->conf->route_cnt);
    bad = ferror(f);
    bad |= fclose(f) != 0; /* the text is in more from here on */
    if (bad || !more || !(page = realloc(*outp, *lenp + more_len + 1))) {
        free(more);
        free(*outp);
        *outp = NULL;
        return DD_ERR_NOMEM;
    }
    memcpy(page + *lenp, more, more_len + 1);
    free(more);
    *outp = page;
    *lenp += more_len;
    return DD_OK;
}

int dd_http_metrics(dd_http_t *http, char **outp, size_t *lenp)
{
    static dd_lag_t lags[DD_HTTP_LAG_MAX]; /* only MHD's single thread renders */
    static dd_stats_t s;                   /* large: off the thread's stack */
    const char *routes[DD_CONF_ROUTE_MAX];
    dd_proc_t proc;
    size_t n;
    int rc;

    for (int r = 0; r < http->conf->route_cnt; r++)
        routes[r] = http->conf->routes[r].name;
    dd_pipeline_stats(http->pl, &s);
    dd_http_add_pings(http, &s);
    n = dd_pipeline_lag(http->pl, lags, DD_HTTP_LAG_MAX);
    dd_metrics_proc_read(&proc);
    rc = dd_metrics_render(&s, routes, http->conf->route_cnt, lags,
                           n < DD_HTTP_LAG_MAX ? n : DD_HTTP_LAG_MAX, &proc, outp, lenp);
    return rc || !http->hs ? rc : dd_http_metrics_handlers(http, routes, outp, lenp);
}
