/*
 * The compensation scan (see dd_reconcile.h): one pass settles at most
 * DD_RECONCILE_MAX stuck rows, oldest first; the next pass takes the rest.
 * A row is taken over before reconcile() is asked, with the token raised,
 * so the answer is about a claim nobody else holds: a late finish of the
 * dead owner's, or a redelivered message's claim, cannot land in between
 * unseen (each finishes only under its own token). The routes in external
 * mode are scanned one after the other, each its own table with its own
 * handler's reconcile(); with several database shards, in every shard,
 * one shard after the other, each on a connection to it. A shard that
 * cannot be reached is reported and skipped: the others are scanned all
 * the same (its rows wait for the next scan, or for their messages).
 */
#include "dd_reconcile.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dd_claim.h"
#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_external.h"
#include "dd_log.h"
#include "dd_migrate.h"
#include "dd_routes.h"

#define DD_RECONCILE_MAX 1000
/* What a row whose effect did not happen, and whose message is gone, is
 * marked with: dedupd has no payload to act with. */
#define DD_RECONCILE_NOT_DONE "not done, message gone: needs manual action"

/* reconcile()'s answer for a row, or that it was not asked. */
enum { DD_ANS_DONE, DD_ANS_NOT_DONE, DD_ANS_UNKNOWN, DD_ANS_NONE, DD_ANS_CNT };
static const char *const dd_reconcile_answers[DD_ANS_CNT] = {"done", "not_done", "unknown",
                                                             "not_asked"};

typedef struct {
    size_t rows;
    size_t answers[DD_ANS_CNT];
    size_t applied, failed, left, skipped;
} dd_reconcile_sum_t;

/* One pass. */
typedef struct {
    const dd_conf_t *conf;
    dd_handler_t *h;
    dd_db_t *db; /* to the shard whose table is scanned */
    int shard;
    dd_external_opts_t opts;
    dd_buf_t sql;
    int apply;
    FILE *out; /* the command's table; NULL: log lines (run's scan) */
    const atomic_int *stop;
    dd_reconcile_sum_t sum;
} dd_reconcile_pass_t;

struct dd_reconcile_s {
    const dd_conf_t *conf;
    dd_handler_t *hs[DD_CONF_ROUTE_MAX]; /* every route's; those in external mode are scanned */
    dd_reconcile_publish_fn *publish;
    void *opaque;
    char owner[160];
    dd_db_t **dbs; /* the thread's own, one per shard, opened lazily */
    /* Each route's and shard's last count, -1 before one: a route's
     * gauges are over its shards' last (a shard that cannot be reached
     * keeps its rows counted, as a single database keeps its gauges). */
    int64_t stuck[DD_CONF_ROUTE_MAX][DD_CONF_SHARD_MAX];
    double oldest[DD_CONF_ROUTE_MAX][DD_CONF_SHARD_MAX];
    pthread_t thread;
    int started;
    atomic_int stop;
};

/* ---- one row ---- */

/* DONE: the row becomes applied with reconcile()'s response; finish() runs
 * when the handler has it, with a message holding only the key, the token
 * and where the row says the message was. Returns the action's name. */
static const char *dd_reconcile_done(dd_reconcile_pass_t *p, const dd_external_row_t *r,
                                     int64_t fence, dedupd_result *res, int *rc, char *errstr,
                                     size_t errstr_size)
{
    dedupd_msg msg = {.topic = r->topic,
                      .partition = r->partition,
                      .offset = r->offset,
                      .biz_key = r->key,
                      .fence = fence,
                      .shard = p->shard};
    dedupd_status st = DEDUPD_OK;
    int held = 0;

    if (dd_handler_has_finish(p->h))
        *rc = dd_external_finish_txn(p->db, &p->opts, p->h, &msg, res, &held, &st, &p->sql, errstr,
                                     errstr_size);
    else
        *rc = dd_external_finish(p->db, &p->opts, r->key, r->key_len, fence, DD_ROW_APPLIED,
                                 res->response, NULL, &held, &p->sql, errstr, errstr_size);
    if (*rc) return "error";
    if (!held) return "lost: taken over meanwhile";
    if (st == DEDUPD_OK) {
        p->sum.applied++;
        return "applied";
    }
    /* finish() refused for now: the row stays processing for the next scan */
    *rc = dd_external_expire(p->db, &p->opts, r->key, r->key_len, fence, &held, &p->sql, errstr,
                             errstr_size);
    p->sum.left++;
    return st == DEDUPD_RETRY ? "left: finish() asked to retry" : "left: finish() rejected";
}

/* Asks about one row and, with apply, settles it. Returns 0 or the class
 * of a database error. */
static int dd_reconcile_row(dd_reconcile_pass_t *p, const dd_external_row_t *r, char *errstr,
                            size_t errstr_size)
{
    dedupd_result res = {0};
    const char *action = "none";
    int64_t fence = r->fence;
    int ans = DD_ANS_NONE, taken = 1, held = 0, rc = DD_OK;

    if (p->apply && dd_handler_has_reconcile(p->h))
        rc = dd_external_takeover(p->db, &p->opts, r->key, r->key_len, r->fence,
                                  p->conf->external.scan_after_ms, &taken, &fence, &p->sql, errstr,
                                  errstr_size);
    if (rc) return rc;
    if (!taken) {
        action = "skipped: taken over meanwhile";
        p->sum.skipped++;
    } else if (dd_handler_has_reconcile(p->h)) {
        ans = (int)dd_handler_reconcile(p->h, r->key, fence, &res);
    }
    if (p->apply && ans == DD_ANS_DONE) {
        action = dd_reconcile_done(p, r, fence, &res, &rc, errstr, errstr_size);
    } else if (p->apply && ans == DD_ANS_NOT_DONE) {
        rc = dd_external_finish(p->db, &p->opts, r->key, r->key_len, fence, DD_ROW_FAILED, NULL,
                                DD_RECONCILE_NOT_DONE, &held, &p->sql, errstr, errstr_size);
        action = !held ? "lost: taken over meanwhile" : "failed: needs manual action";
        p->sum.failed += (size_t)held;
    } else if (p->apply && ans == DD_ANS_UNKNOWN) {
        rc = dd_external_expire(p->db, &p->opts, r->key, r->key_len, fence, &held, &p->sql, errstr,
                                errstr_size);
        action = "left processing";
        p->sum.left++;
    }
    free(res.response);
    p->sum.answers[ans]++;
    if (p->out)
        fprintf(p->out, "%s\t%lld\t%s\t%.1f\t%s/%d/%lld\t%s\t%s\n", r->key, (long long)fence,
                r->owner, r->past_s, r->topic, (int)r->partition, (long long)r->offset,
                dd_reconcile_answers[ans], action);
    else
        dd_log(ans == DD_ANS_NOT_DONE ? DD_LOG_WARN : DD_LOG_INFO,
               "Compensation scan: key %s (token %lld, claimed by %s, lease over %.1f s ago, "
               "from %s [%d] @%lld): reconcile() says %s%s%s; %s.",
               r->key, (long long)fence, r->owner, r->past_s, r->topic, (int)r->partition,
               (long long)r->offset, dd_reconcile_answers[ans], res.error[0] ? ": " : "", res.error,
               action);
    return rc;
}

/* ---- one pass ---- */

static int dd_reconcile_pass(dd_reconcile_pass_t *p, char *errstr, size_t errstr_size)
{
    dd_external_row_t *rows = calloc(DD_RECONCILE_MAX, sizeof(*rows));
    size_t n = 0;
    int rc;

    if (!rows) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    rc = dd_external_stuck(p->db, &p->opts, p->conf->external.scan_after_ms, rows, DD_RECONCILE_MAX,
                           &n, &p->sql, errstr, errstr_size);
    for (size_t i = 0; !rc && i < n && !(p->stop && atomic_load(p->stop)); i++) {
        p->sum.rows++;
        rc = dd_reconcile_row(p, &rows[i], errstr, errstr_size);
    }
    free(rows);
    return rc;
}

int dd_reconcile_check_table(dd_db_t *db, const dd_conf_route_t *route, int *index, char *errstr,
                             size_t errstr_size)
{
    int version = 0, rc;

    *index = 0;
    rc = dd_migrate_version(dd_db_mysql(db), route->dedup.table, &version, errstr, errstr_size);
    if (!rc && version < 2) {
        dd_errstr_set(errstr, errstr_size,
                      "dedup table %s is at schema version %d; a handler in external mode "
                      "needs version 2 (the fence column): run `dedupd migrate`",
                      route->dedup.table, version);
        rc = DD_ERR_CONFIG;
    }
    if (!rc)
        rc = dd_migrate_processing_index(dd_db_mysql(db), route->dedup.table, 0, index, errstr,
                                         errstr_size);
    return rc;
}

/* ---- the periodic scan of `dedupd run` ---- */

int dd_reconcile_needed(const dd_conf_t *conf, dd_handler_t *const *hs)
{
    for (int r = 0; r < conf->route_cnt; r++)
        if (dd_handler_mode(hs[r]) == DEDUPD_MODE_EXTERNAL) return 1;
    return 0;
}

/* "TABLE", "TABLE (route NAME)" with routes, and "shard N (ADDR): "
 * before it with several shards, for the log. */
static const char *dd_reconcile_where(const dd_conf_t *conf, int r, int shard, char *out,
                                      size_t out_size)
{
    int several = conf->shard_cnt > 1;
    char who[340] = "";

    if (several) dd_conf_shard_name(conf, shard, who, sizeof(who));
    snprintf(out, out_size, "%s%s%s%s%s%s", who, several ? ": " : "", conf->routes[r].dedup.table,
             conf->has_routes ? " (route " : "", conf->has_routes ? conf->routes[r].name : "",
             conf->has_routes ? ")" : "");
    return out;
}

/* One route's table in one shard: its gauges, then the rows old enough to
 * settle. Returns 0 or the class of the error (logged). */
static int dd_reconcile_background_table(dd_reconcile_t *scan, int r, int shard)
{
    dd_reconcile_pass_t p = {.conf = scan->conf,
                             .h = scan->hs[r],
                             .db = scan->dbs[shard],
                             .shard = shard,
                             .apply = 1,
                             .stop = &scan->stop};
    int64_t stuck = 0;
    double oldest = 0;
    char err[1024], where[800];
    int rc;

    dd_external_opts_init(&p.opts, scan->conf, &scan->conf->routes[r], scan->owner);
    rc = dd_external_stuck_count(p.db, &p.opts, &stuck, &oldest, err, sizeof(err));
    if (!rc) {
        scan->stuck[r][shard] = stuck;
        scan->oldest[r][shard] = oldest;
    }
    if (!rc && stuck > 0) rc = dd_reconcile_pass(&p, err, sizeof(err));
    dd_buf_release(&p.sql);
    dd_reconcile_where(scan->conf, r, shard, where, sizeof(where));
    if (rc) {
        dd_log(DD_LOG_WARN, "Compensation scan of %s failed, trying again in %lld ms: %s", where,
               (long long)scan->conf->external.scan_interval_ms, err);
        return rc;
    }
    if (p.sum.rows)
        dd_log(DD_LOG_INFO,
               "Compensation scan of %s: %lld row(s) past their lease; %zu old enough to "
               "settle: %zu applied, %zu marked failed, %zu left processing, %zu skipped.",
               where, (long long)stuck, p.sum.rows, p.sum.applied, p.sum.failed, p.sum.left,
               p.sum.skipped);
    return DD_OK;
}

/* Every external route's table in one shard, on the thread's connection
 * to it. A shard that cannot be reached, or whose scan fails, is left for
 * the next scan (its tables' last counts stand meanwhile). */
static void dd_reconcile_background_shard(dd_reconcile_t *scan, int shard)
{
    const dd_conf_t *conf = scan->conf;
    char err[1024];
    int rc = DD_OK;

    if (!scan->dbs[shard])
        rc = dd_db_new_shard(&scan->dbs[shard], conf, shard, err, sizeof(err));
    else if (!dd_db_mysql(scan->dbs[shard]))
        rc = dd_db_reconnect(scan->dbs[shard], err, sizeof(err));
    if (rc)
        dd_log(DD_LOG_WARN, "Compensation scan%s failed, trying again in %lld ms: %s",
               conf->shard_cnt > 1 ? " of a shard" : "", (long long)conf->external.scan_interval_ms,
               err); /* with several shards, err names it */
    for (int r = 0; !rc && r < conf->route_cnt && !atomic_load(&scan->stop); r++)
        if (dd_handler_mode(scan->hs[r]) == DEDUPD_MODE_EXTERNAL)
            rc = dd_reconcile_background_table(scan, r, shard);
    if (rc) { /* the next scan starts on a fresh connection */
        dd_db_destroy(scan->dbs[shard]);
        scan->dbs[shard] = NULL;
    }
}

/* Each route's gauges: the stuck rows of its table summed over the shards
 * and the oldest of them, as last counted (a shard never counted yet is
 * left out; none counted: nothing is published). */
static void dd_reconcile_publish(dd_reconcile_t *scan)
{
    for (int r = 0; r < scan->conf->route_cnt && scan->publish; r++) {
        int64_t stuck = 0;
        double oldest = 0;
        int counted = 0;

        if (dd_handler_mode(scan->hs[r]) != DEDUPD_MODE_EXTERNAL) continue;
        for (int s = 0; s < scan->conf->shard_cnt; s++) {
            if (scan->stuck[r][s] < 0) continue;
            counted = 1;
            stuck += scan->stuck[r][s];
            if (scan->oldest[r][s] > oldest) oldest = scan->oldest[r][s];
        }
        if (counted) scan->publish(scan->opaque, r, stuck, oldest);
    }
}

static void *dd_reconcile_thread_main(void *arg)
{
    dd_reconcile_t *scan = arg;

    while (!dd_sleep_ms(scan->conf->external.scan_interval_ms, &scan->stop)) {
        for (int s = 0; s < scan->conf->shard_cnt && !atomic_load(&scan->stop); s++)
            dd_reconcile_background_shard(scan, s);
        dd_reconcile_publish(scan);
    }
    return NULL;
}

int dd_reconcile_new(dd_reconcile_t **scanp, const dd_conf_t *conf, dd_handler_t *const *hs,
                     dd_reconcile_publish_fn *publish, void *opaque, char *errstr,
                     size_t errstr_size)
{
    dd_reconcile_t *scan = calloc(1, sizeof(*scan));
    char host[64] = "localhost";

    *scanp = NULL;
    if (!scan || !(scan->dbs = calloc((size_t)conf->shard_cnt, sizeof(*scan->dbs)))) {
        free(scan);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    scan->conf = conf;
    for (int r = 0; r < DD_CONF_ROUTE_MAX; r++)
        for (int s = 0; s < DD_CONF_SHARD_MAX; s++)
            scan->stuck[r][s] = -1;
    for (int r = 0; r < conf->route_cnt; r++)
        scan->hs[r] = hs[r];
    scan->publish = publish;
    scan->opaque = opaque;
    gethostname(host, sizeof(host) - 1);
    snprintf(scan->owner, sizeof(scan->owner), "%s:%d scan", host, (int)getpid());
    *scanp = scan;
    return DD_OK;
}

int dd_reconcile_start(dd_reconcile_t *scan, char *errstr, size_t errstr_size)
{
    if (scan->conf->external.scan_interval_ms <= 0) {
        dd_log(DD_LOG_INFO, "Compensation scan is off (external.scan_interval = 0).");
        return DD_OK;
    }
    if (pthread_create(&scan->thread, NULL, dd_reconcile_thread_main, scan) != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot start the compensation scan thread");
        return DD_ERR_FATAL;
    }
    scan->started = 1;
    return DD_OK;
}

void dd_reconcile_stop(dd_reconcile_t *scan)
{
    if (!scan || !scan->started) return;
    atomic_store(&scan->stop, 1);
    pthread_join(scan->thread, NULL);
    scan->started = 0;
}

void dd_reconcile_destroy(dd_reconcile_t *scan)
{
    if (!scan) return;
    dd_reconcile_stop(scan);
    for (int s = 0; s < scan->conf->shard_cnt; s++)
        dd_db_destroy(scan->dbs[s]);
    free(scan->dbs);
    free(scan);
}

/* ---- `dedupd reconcile` ---- */

typedef struct {
    int apply;
} dd_reconcile_opts_t;

static const dd_cmd_opt_t dd_reconcile_cmd_opts[] = {
    DD_CMD_FLAG("apply", dd_reconcile_opts_t, apply,
                "settle the rows (default: only list and ask)"),
    DD_CMD_OPT_END,
};

/* The table, then a line of totals. */
static int dd_reconcile_cmd_pass(dd_reconcile_pass_t *p, char *err, size_t err_size)
{
    int64_t stuck = 0;
    double oldest = 0;
    char after[32];
    int rc;

    rc = dd_external_stuck_count(p->db, &p->opts, &stuck, &oldest, err, err_size);
    if (rc) return rc;
    printf("%lld row(s) in processing past their lease (the oldest by %.1f s)\n", (long long)stuck,
           oldest);
    if (!dd_handler_has_reconcile(p->h))
        printf("handler %s has no reconcile(): the rows are listed, not settled\n",
               dd_handler_name(p->h));
    printf("key\ttoken\towner\tpast_lease_s\tmessage\treconcile\taction\n");
    rc = dd_reconcile_pass(p, err, err_size);
    if (rc) return rc;
    snprintf(after, sizeof(after), "%.3f", (double)p->conf->external.scan_after_ms / 1000.0);
    printf("%zu row(s) past their lease by at least %s s (external.scan_after): %zu done, %zu "
           "not done, %zu unknown, %zu not asked; %s%zu applied, %zu marked failed, %zu left "
           "processing, %zu skipped%s\n",
           p->sum.rows, after, p->sum.answers[DD_ANS_DONE], p->sum.answers[DD_ANS_NOT_DONE],
           p->sum.answers[DD_ANS_UNKNOWN], p->sum.answers[DD_ANS_NONE],
           p->apply ? "" : "nothing written (no --apply): ", p->sum.applied, p->sum.failed,
           p->sum.left, p->sum.skipped, p->sum.rows == DD_RECONCILE_MAX ? "; more remain" : "");
    return DD_OK;
}

/* One route's table, on db (to shard): checked, then scanned. With routes
 * or several shards, a line naming the shard, the route and the table
 * comes first ("shard 1 (ADDR): route NAME: dedup table TABLE"). */
static int dd_reconcile_cmd_route(const dd_conf_t *conf, int r, dd_handler_t *h, dd_db_t *db,
                                  int shard, const char *owner, int apply, char *err,
                                  size_t err_size)
{
    dd_reconcile_pass_t p = {
        .conf = conf, .h = h, .db = db, .shard = shard, .apply = apply, .out = stdout};
    const char *table = conf->routes[r].dedup.table;
    char who[340];
    int rc, index = 0;

    dd_external_opts_init(&p.opts, conf, &conf->routes[r], owner);
    if (conf->shard_cnt > 1) printf("%s: ", dd_conf_shard_name(conf, shard, who, sizeof(who)));
    if (conf->has_routes) printf("route %s: ", conf->routes[r].name);
    if (conf->has_routes || conf->shard_cnt > 1) printf("dedup table %s\n", table);
    rc = dd_migrate_check_key_format(dd_db_mysql(db), table, err, err_size);
    if (!rc) rc = dd_reconcile_check_table(db, &conf->routes[r], &index, err, err_size);
    if (!rc) rc = dd_reconcile_cmd_pass(&p, err, err_size);
    if (rc && conf->has_routes) {
        char msg[800];
        snprintf(msg, sizeof(msg), "%.700s", err);
        snprintf(err, err_size, "route %s: %s", conf->routes[r].name, msg);
    }
    dd_buf_release(&p.sql);
    fflush(stdout);
    return rc;
}

/* Fails when none of the covered routes' handlers (only's, or every
 * route's when only < 0) is in external mode, or only's is not. */
static int dd_reconcile_cmd_handlers(const dd_conf_t *conf, int only, dd_handler_t *const *hs,
                                     char *err, size_t err_size)
{
    if (only < 0) {
        if (dd_reconcile_needed(conf, hs)) return DD_OK;
        if (conf->has_routes)
            dd_errstr_set(err, err_size,
                          "no route's handler is in external mode: their keys are never left "
                          "processing, there is nothing to reconcile");
        else
            dd_errstr_set(err, err_size,
                          "handler %s is in local mode: its keys are never left processing, "
                          "there is nothing to reconcile",
                          dd_handler_name(hs[0]));
        return DD_ERR_CONFIG;
    }
    if (dd_handler_mode(hs[only]) == DEDUPD_MODE_EXTERNAL) return DD_OK;
    dd_errstr_set(err, err_size,
                  "%s%s%shandler %s is in local mode: its keys are never left processing, there "
                  "is nothing to reconcile",
                  conf->has_routes ? "route " : "", conf->has_routes ? conf->routes[only].name : "",
                  conf->has_routes ? ": " : "", dd_handler_name(hs[only]));
    return DD_ERR_CONFIG;
}

/* Every covered route's table in one shard. Returns 0 or the class of the
 * first error (logged, naming the shard): the shard's other tables are
 * then left out. */
static int dd_reconcile_cmd_shard(const dd_conf_t *conf, int only, dd_handler_t *const *hs,
                                  int shard, const char *owner, int apply)
{
    dd_db_t *db = NULL;
    char err[1024], who[340];
    int rc = dd_db_new_shard(&db, conf, shard, err, sizeof(err));

    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        if ((only >= 0 && r != only) || dd_handler_mode(hs[r]) != DEDUPD_MODE_EXTERNAL) continue;
        rc = dd_reconcile_cmd_route(conf, r, hs[r], db, shard, owner, apply, err, sizeof(err));
        if (rc && conf->shard_cnt > 1) { /* connection errors name the shard already */
            char msg[900];
            snprintf(msg, sizeof(msg), "%.890s", err);
            snprintf(err, sizeof(err), "%s: %s", dd_conf_shard_name(conf, shard, who, sizeof(who)),
                     msg);
        }
    }
    if (rc && conf->shard_cnt > 1) {
        dd_log(DD_LOG_ERROR, "dedupd reconcile: %s; going on with the other shards", err);
        printf("%s: not scanned: %s\n", dd_conf_shard_name(conf, shard, who, sizeof(who)), err);
    } else if (rc)
        dd_log(DD_LOG_ERROR, "dedupd reconcile: %s", err);
    dd_db_destroy(db);
    fflush(stdout);
    return rc;
}

static int dd_reconcile_cmd_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    const dd_reconcile_opts_t *o = opts;
    dd_handler_t *const *hs = ctx->hs;
    int only = ctx->only;
    char err[1024], host[64] = "localhost", owner[160];
    int rc, failed = 0;

    gethostname(host, sizeof(host) - 1);
    snprintf(owner, sizeof(owner), "%s:%d reconcile", host, (int)getpid());
    rc = dd_reconcile_cmd_handlers(conf, only, hs, err, sizeof(err));
    if (rc) dd_log(DD_LOG_ERROR, "dedupd reconcile: %s", err);
    /* Every shard, and in it every route in external mode (of those
     * covered), a table each; a shard that fails does not stop the others. */
    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        failed += dd_reconcile_cmd_shard(conf, only, hs, s, owner, o->apply) != DD_OK;
    if (failed && conf->shard_cnt > 1)
        dd_log(DD_LOG_ERROR, "dedupd reconcile: %d of %d shard(s) could not be scanned", failed,
               conf->shard_cnt);
    return rc || failed ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_reconcile = {
    .name = "reconcile",
    .args = "-c FILE [--apply] [--route NAME]",
    .summary = "settle processing rows whose message is gone (external mode)",
    .usage = "usage: dedupd reconcile -c FILE [--apply] [--route NAME]\n"
             "\n"
             "For every route whose handler is in external mode (the one route of a\n"
             "configuration without routes): lists the rows of its dedup table that are\n"
             "still processing although their lease ran out external.scan_after ago or\n"
             "more (their claimer died and their message is not coming back: retention\n"
             "dropped it, or the group was reset past it), and asks the handler's\n"
             "reconcile() about each: done, not_done or unknown. Without --apply nothing\n"
             "is written and reconcile() is asked with the row's own token. With --apply\n"
             "each row is first taken over (its token raised), then settled: done ->\n"
             "applied (finish() runs, with a message without payload); not_done ->\n"
             "failed, \"" DD_RECONCILE_NOT_DONE "\" (there is no\n"
             "payload to act with); unknown -> left processing for a later scan. At most\n"
             "1000 rows per table and run, oldest first. DEDUPD_EXTERNAL_SCAN_AFTER=0\n"
             "takes every row past its lease. Prints one tab-separated line per row (key, token,\n"
             "owner, seconds past the lease, topic/partition/offset, answer, action)\n"
             "and a line of totals, per table (with routes, after a line naming the\n"
             "route and its table). Routes in local mode are left out. With several\n"
             "database shards (mysql.shards) every shard's table is scanned, one shard\n"
             "after the other, each line naming the shard first (\"shard 1 (ADDR): route\n"
             "NAME: dedup table TABLE\"); a shard that cannot be scanned is reported and\n"
             "the others are scanned all the same (exit status 1). `dedupd run` does\n"
             "the same with --apply every external.scan_interval.\n",
    .exits = "  0  scanned (and settled, with --apply)\n"
             "  1  failure: the database (any shard), a handler, or no handler in external\n"
             "     mode (the route's, with --route)\n"
             "  2  usage error, or no route of that name\n",
    .route_help = "only the dedup table of the route NAME (routes[].name;\n"
                  "default for a configuration without routes)",
    .flags = DD_CMD_CONFIG | DD_CMD_ROUTE | DD_CMD_HANDLERS,
    .opts_size = sizeof(dd_reconcile_opts_t),
    .opts = dd_reconcile_cmd_opts,
    .run = dd_reconcile_cmd_run,
};
