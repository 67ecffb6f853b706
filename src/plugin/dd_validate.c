/*
 * Start-up validation shared by `dedupd run` and `dedupd check` (see
 * dd_validate.h). Each check reports what it found through the caller's
 * function: run logs the warnings and stops on the first failure, check
 * prints every finding. The texts are the same for both.
 */
#include "dd_validate.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "dd_common.h"
#include "dd_hash.h"
#include "dd_key.h"

/* With retry.max_attempts = 0 (unlimited) the retry part of the window
 * assumes this many attempts. */
#define DD_VALIDATE_UNLIMITED_ATTEMPTS 100

typedef struct {
    dd_validate_report_fn *report;
    void *opaque;
    int rc; /* the first failure's class, or 0 */
    char *errstr;
    size_t errstr_size;
} dd_validate_ctx_t;

/* Reports one finding; the first failure is also the result. */
static void dd_validate_note(dd_validate_ctx_t *v, dd_validate_level_t level, const char *what,
                             int rc, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void dd_validate_note(dd_validate_ctx_t *v, dd_validate_level_t level, const char *what,
                             int rc, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (level == DD_VALIDATE_FAIL && !v->rc) {
        v->rc = rc ? rc : DD_ERR_CONFIG;
        dd_errstr_set(v->errstr, v->errstr_size, "%s", text);
    }
    v->report(v->opaque, level, what, text);
}

/* What a finding of route r is about: "key template", or with routes
 * "route NAME: key template". */
static const char *dd_validate_what(const dd_conf_t *conf, int r, const char *what, char *out,
                                    size_t out_size)
{
    if (conf->has_routes)
        snprintf(out, out_size, "route %s: %s", conf->routes[r].name, what);
    else
        snprintf(out, out_size, "%s", what);
    return out;
}

/* A route setting's name in messages: dedup.key, or a route's key. */
static const char *dd_validate_setting(const dd_conf_t *conf, const char *top, const char *route)
{
    return conf->has_routes ? route : top;
}

/* The key, lane key and request hash of route r compile as the pipeline
 * compiles them. */
static void dd_validate_keys(dd_validate_ctx_t *v, const dd_conf_t *conf, int r)
{
    const dd_conf_dedup_t *d = &conf->routes[r].dedup;
    dd_key_tmpl_t *tmpl = NULL;
    dd_hash_spec_t *spec = NULL;
    char err[512], what[128];
    int rc;

    dd_validate_what(conf, r, "key template", what, sizeof(what));
    if ((rc = dd_key_tmpl_new(&tmpl, d->key, err, sizeof(err))) == DD_OK)
        dd_validate_note(v, DD_VALIDATE_OK, what, 0, "%s", d->key);
    else
        dd_validate_note(v, DD_VALIDATE_FAIL, what, rc, "%s: %s",
                         dd_validate_setting(conf, "dedup.key", "key"), err);
    dd_key_tmpl_destroy(tmpl);
    tmpl = NULL;
    if (d->lane_key) {
        dd_validate_what(conf, r, "lane key", what, sizeof(what));
        if ((rc = dd_key_tmpl_new(&tmpl, d->lane_key, err, sizeof(err))) == DD_OK)
            dd_validate_note(v, DD_VALIDATE_OK, what, 0, "%s", d->lane_key);
        else
            dd_validate_note(v, DD_VALIDATE_FAIL, what, rc, "%s: %s",
                             dd_validate_setting(conf, "dedup.lane_key", "lane_key"), err);
        dd_key_tmpl_destroy(tmpl);
    }
    dd_validate_what(conf, r, "request hash", what, sizeof(what));
    rc = dd_hash_spec_new(&spec, d->hash, d->hash_cnt, err, sizeof(err));
    if (rc != DD_OK)
        dd_validate_note(v, DD_VALIDATE_FAIL, what, rc, "%s: %s",
                         dd_validate_setting(conf, "dedup.hash", "hash"), err);
    else if (d->hash_cnt == 0)
        dd_validate_note(v, DD_VALIDATE_OK, what, 0, "the whole payload");
    else
        dd_validate_note(v, DD_VALIDATE_OK, what, 0, "%d path(s)", d->hash_cnt);
    dd_hash_spec_destroy(spec);
}

/* An integer librdkafka property from kafka.properties (last one wins), or
 * def when it is not set. */
static int64_t dd_validate_kprop(const dd_conf_t *conf, const char *name, int64_t def)
{
    size_t nlen = strlen(name);
    int64_t v = def;

    for (int i = 0; i < conf->kafka.property_cnt; i++) {
        const char *p = conf->kafka.properties[i];
        char *end;
        long long n;
        if (strncmp(p, name, nlen) != 0 || p[nlen] != '=') continue;
        n = strtoll(p + nlen + 1, &end, 10);
        if (end != p + nlen + 1 && *end == '\0' && n >= 0) v = n;
    }
    return v;
}

/* Total backoff of a message that keeps answering RETRY: the lane's
 * exponential backoff, capped at retry.backoff_max, over max_attempts. */
static int64_t dd_validate_retry_ms(const dd_conf_t *conf)
{
    int attempts =
        conf->retry.max_attempts ? conf->retry.max_attempts : DD_VALIDATE_UNLIMITED_ATTEMPTS;
    int64_t ms = conf->retry.backoff_initial_ms, total = 0;

    for (int i = 0; i < attempts; i++) {
        if (ms >= conf->retry.backoff_max_ms)
            return total + (int64_t)(attempts - i) * conf->retry.backoff_max_ms;
        total += ms;
        ms *= 2;
    }
    return total;
}

/* How long after a row is committed its message may still be delivered
 * again. The offset of an applied message is committed only when every
 * earlier message of its partition has finished, so it can wait behind a
 * message that keeps retrying (the retry budget); the commit runs on a timer
 * (auto.commit.interval.ms); and after a crash or a stall another member
 * takes the partition over only after session.timeout.ms or
 * max.poll.interval.ms, and a clean shutdown may take shutdown_timeout. The
 * sum is the window. Database outages are not bounded here: nothing commits
 * while the database is down. */
int64_t dd_validate_window_s(const dd_conf_t *conf)
{
    int64_t ms = dd_validate_kprop(conf, "max.poll.interval.ms", 300000) +
                 dd_validate_kprop(conf, "session.timeout.ms", 45000) +
                 dd_validate_kprop(conf, "auto.commit.interval.ms", 5000) +
                 conf->shutdown_timeout_ms + dd_validate_retry_ms(conf);

    return (ms + 999) / 1000;
}

/* A ttl shorter than the redelivery window lets a late copy apply again.
 * The schema allows it (tests and short-lived topics use short ttls), so it
 * is a warning. */
static void dd_validate_ttl(dd_validate_ctx_t *v, const dd_conf_t *conf, int r)
{
    long long ttl = (long long)conf->routes[r].dedup.ttl_s;
    long long window = (long long)dd_validate_window_s(conf);
    char what[128];

    dd_validate_what(conf, r, "ttl", what, sizeof(what));
    if (ttl >= 2 * window)
        dd_validate_note(v, DD_VALIDATE_OK, what, 0,
                         "%llds covers twice the idempotency window (%llds)", ttl, window);
    else
        dd_validate_note(v, DD_VALIDATE_WARN, what, 0,
                         "%s is %llds, shorter than twice the idempotency window (%llds) "
                         "implied by the timeouts and retries: a copy redelivered after its "
                         "key was purged is applied again",
                         dd_validate_setting(conf, "dedup.ttl", "ttl"), ttl, window);
}

/* The handlers' own metrics: two routes' must fit on one /metrics page. */
static void dd_validate_metrics(dd_validate_ctx_t *v, const dd_conf_t *conf,
                                dd_handler_t *const *hs)
{
    const char *routes[DD_CONF_ROUTE_MAX];
    char err[1024];
    int rc;

    for (int r = 0; r < conf->route_cnt; r++)
        routes[r] = conf->routes[r].name;
    if ((rc = dd_handler_metrics_check(hs, routes, conf->route_cnt, err, sizeof(err))))
        dd_validate_note(v, DD_VALIDATE_FAIL, "handler metrics", rc, "%s", err);
}

int dd_validate_conf(const dd_conf_t *conf, dd_handler_t **hs, dd_validate_report_fn *report,
                     void *opaque, char *errstr, size_t errstr_size)
{
    dd_validate_ctx_t v = {
        .report = report, .opaque = opaque, .errstr = errstr, .errstr_size = errstr_size};
    char err[1024], what[128];
    int rc;

    for (int r = 0; r < conf->route_cnt; r++)
        hs[r] = NULL;
    for (int i = 0; i < conf->warning_cnt; i++)
        dd_validate_note(&v, DD_VALIDATE_WARN, "config", 0, "%s", conf->warnings[i]);
    for (int r = 0; r < conf->route_cnt; r++) {
        const dd_conf_handler_t *hc = &conf->routes[r].handler;
        dd_validate_keys(&v, conf, r);
        dd_validate_ttl(&v, conf, r);
        /* Each route its own instance: its own init, state and fini, also
         * when two routes name one file (dlopen counts the references). */
        dd_validate_what(conf, r, "handler", what, sizeof(what));
        rc = dd_handler_load(&hs[r], hc->path, hc->config, conf->outbox.enabled, err, sizeof(err));
        if (rc == DD_OK)
            dd_validate_note(&v, DD_VALIDATE_OK, what, 0, "%s (%s), ABI version %d%s",
                             dd_handler_name(hs[r]), hc->path, DEDUPD_HANDLER_ABI_VERSION,
                             dd_handler_mode(hs[r]) == DEDUPD_MODE_EXTERNAL ? ", external mode"
                                                                            : "");
        else
            dd_validate_note(&v, DD_VALIDATE_FAIL, what, rc, "%s", err);
    }
    if (!v.rc) dd_validate_metrics(&v, conf, hs);
    if (v.rc) {
        for (int r = conf->route_cnt; r-- > 0;) {
            dd_handler_destroy(hs[r]);
            hs[r] = NULL;
        }
        return v.rc;
    }
    return DD_OK;
}
