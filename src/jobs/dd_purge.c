/*
 * Retention of the dedup table.
 *
 * A key must be remembered as long as its message can come back; after that
 * the row is dead weight in the primary key every claim probes. Expired rows
 * are deleted in small autocommit transactions with a pause between them, so
 * the purge never holds many row locks or a long undo log next to the claim
 * transactions, and never touches rows in state 0 (a claim in progress, or a
 * lease that a later mode may take over). With shards, every route's table
 * in every shard, one after the other, each on a connection to its shard.
 */
#include "dd_purge.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_grants.h"
#include "dd_log.h"
#include "dd_migrate.h"

/* Pause between two delete batches: at least this, and at least as long as
 * the batch took, so the purge uses at most about half of the time of one
 * connection while claims run. */
#define DD_PURGE_PAUSE_MS 100
/* The first background pass runs this soon after start (or after
 * purge.interval when that is shorter), so frequent restarts do not starve
 * the purge. */
#define DD_PURGE_FIRST_PASS_MS 60000
struct dd_purge_s {
    const dd_conf_t *conf;
    dd_db_t **db; /* the purge thread's own connections, a shard each, opened lazily */
    pthread_t thread;
    int started;
    atomic_int stop; /* set by dd_purge_stop, read by the thread */
};

typedef struct {
    uint64_t deleted;
    int batches; /* DELETE statements that removed at least one row */
} dd_purge_result_t;

/* ---- one pass ---- */

/* One DELETE; *n gets its affected rows. dd_db_exec is not used because
 * draining results there resets the affected-rows count. */
static int dd_purge_delete(dd_db_t *db, const char *sql, uint64_t *n, char *errstr,
                           size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    unsigned int err;

    if (!mysql) {
        dd_errstr_set(errstr, errstr_size, "2006: not connected");
        return DD_ERR_RETRIABLE;
    }
    if (mysql_real_query(mysql, sql, (unsigned long)strlen(sql)) != 0) {
        err = mysql_errno(mysql);
        dd_errstr_set(errstr, errstr_size, "%u: %s", err, mysql_error(mysql));
        return dd_db_classify(err);
    }
    *n = (uint64_t)mysql_affected_rows(mysql);
    return DD_OK;
}

/* Deletes expired, finished rows of table batch by batch until a batch
 * comes back short or *stop is set. Each DELETE autocommits on its own. */
static int dd_purge_pass(dd_db_t *db, const dd_conf_t *conf, const char *table,
                         const atomic_int *stop, dd_purge_result_t *res, char *errstr,
                         size_t errstr_size)
{
    char sql[256];
    int rc = DD_OK;

    memset(res, 0, sizeof(*res));
    snprintf(sql, sizeof(sql),
             "DELETE FROM `%s` WHERE expire_at < NOW(6) AND status <> 0 ORDER BY expire_at "
             "LIMIT %d",
             table, conf->purge.batch);
    for (;;) {
        int64_t t0 = dd_now_ms(), took;
        uint64_t n = 0;

        rc = dd_purge_delete(db, sql, &n, errstr, errstr_size);
        if (rc || n == 0) break;
        res->deleted += n;
        res->batches++;
        if (n < (uint64_t)conf->purge.batch) break;
        took = dd_now_ms() - t0;
        if (dd_sleep_ms(took > DD_PURGE_PAUSE_MS ? took : DD_PURGE_PAUSE_MS, stop)) break;
    }
    return rc;
}

static const char *dd_purge_plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* ---- background thread ---- */

/* "TABLE", or with shards "TABLE in shard N", for lines and logs. */
static const char *dd_purge_where(const dd_conf_t *conf, const char *table, int shard, char *out,
                                  size_t out_size)
{
    if (conf->shard_cnt > 1)
        snprintf(out, out_size, "%s in shard %d", table, shard);
    else
        snprintf(out, out_size, "%s", table);
    return out;
}

/* One shard's pass over every route's table. A shard that fails is
 * logged and left for the next pass; the other shards are purged all the
 * same (a down shard holds back only its own retention). */
static void dd_purge_background_shard(dd_purge_t *purge, int shard)
{
    const dd_conf_t *conf = purge->conf;
    dd_db_t **db = &purge->db[shard];
    dd_purge_result_t res;
    char err[512], where[160];
    int rc = DD_OK;

    for (int r = 0; !rc && r < conf->route_cnt && !atomic_load(&purge->stop); r++) {
        const char *table = conf->routes[r].dedup.table;
        int64_t t0 = dd_now_ms();

        dd_purge_where(conf, table, shard, where, sizeof(where));
        if (!*db)
            rc = dd_db_new_shard(db, conf, shard, err, sizeof(err));
        else if (!dd_db_mysql(*db))
            rc = dd_db_reconnect(*db, err, sizeof(err));
        if (!rc) rc = dd_purge_pass(*db, conf, table, &purge->stop, &res, err, sizeof(err));
        if (rc) {
            dd_log(DD_LOG_WARN, "Purge of %s failed, trying again in %llds: %s", where,
                   (long long)conf->purge.interval_s, err);
            /* Start the next pass on a fresh connection. */
            dd_db_destroy(*db);
            *db = NULL;
            return;
        }
        dd_log(res.deleted ? DD_LOG_INFO : DD_LOG_DEBUG,
               "Purge deleted %llu expired %s from %s in %d %s (%lld ms).",
               (unsigned long long)res.deleted, dd_purge_plural(res.deleted, "row", "rows"), where,
               res.batches, dd_purge_plural((uint64_t)res.batches, "batch", "batches"),
               (long long)(dd_now_ms() - t0));
    }
}

/* One pass over every route's table in every shard. */
static void dd_purge_background_pass(dd_purge_t *purge)
{
    for (int s = 0; s < purge->conf->shard_cnt && !atomic_load(&purge->stop); s++)
        dd_purge_background_shard(purge, s);
}

static void *dd_purge_thread_main(void *arg)
{
    dd_purge_t *purge = arg;
    int64_t wait_ms = purge->conf->purge.interval_s * 1000;

    if (wait_ms > DD_PURGE_FIRST_PASS_MS) wait_ms = DD_PURGE_FIRST_PASS_MS;
    while (!dd_sleep_ms(wait_ms, &purge->stop)) {
        dd_purge_background_pass(purge);
        wait_ms = purge->conf->purge.interval_s * 1000;
    }
    return NULL;
}

int dd_purge_new(dd_purge_t **purgep, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    dd_purge_t *purge = calloc(1, sizeof(*purge));

    *purgep = NULL;
    if (!purge) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    purge->conf = conf;
    purge->db = calloc((size_t)conf->shard_cnt, sizeof(*purge->db));
    if (!purge->db) {
        free(purge);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    *purgep = purge;
    return DD_OK;
}

int dd_purge_start(dd_purge_t *purge, char *errstr, size_t errstr_size)
{
    if (purge->conf->purge.interval_s <= 0) {
        dd_log(DD_LOG_INFO, "Background purge is off (purge.interval = 0).");
        return DD_OK;
    }
    if (pthread_create(&purge->thread, NULL, dd_purge_thread_main, purge) != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot start the purge thread");
        return DD_ERR_FATAL;
    }
    purge->started = 1;
    return DD_OK;
}

void dd_purge_stop(dd_purge_t *purge)
{
    if (!purge || !purge->started) return;
    atomic_store(&purge->stop, 1);
    pthread_join(purge->thread, NULL);
    purge->started = 0;
}

void dd_purge_destroy(dd_purge_t *purge)
{
    if (!purge) return;
    dd_purge_stop(purge);
    for (int s = 0; purge->db && s < purge->conf->shard_cnt; s++)
        dd_db_destroy(purge->db[s]);
    free(purge->db);
    free(purge);
}

/* ---- `dedupd purge` ---- */

typedef struct {
    int dry_run;
} dd_purge_opts_t;

static const dd_cmd_opt_t dd_purge_cmd_opts[] = {
    DD_CMD_FLAG("dry-run", dd_purge_opts_t, dry_run,
                "count the rows a purge would delete now, delete nothing\n"
                "(needs only SELECT on the dedup table)"),
    DD_CMD_OPT_END,
};

/* --dry-run: counts what a pass would delete now (the same condition,
 * through the same expire_at index), deleting nothing. */
static int dd_purge_count(dd_db_t *db, const char *table, uint64_t *n, char *errstr,
                          size_t errstr_size)
{
    char sql[256];

    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM `%s` WHERE expire_at < NOW(6) AND status <> 0",
             table);
    return dd_db_count(dd_db_mysql(db), sql, n, errstr, errstr_size);
}

/* One table of one shard: checks, then the pass (or the count), and its
 * line. */
static int dd_purge_table(dd_db_t *db, const dd_conf_t *conf, const char *table, int shard,
                          int dry_run, char *errstr, size_t errstr_size)
{
    dd_purge_result_t res;
    uint64_t would = 0, batches;
    char where[160];
    int rc;

    /* Expiry does not depend on keys, but a table of another key format
     * is one no dedupd of this version should be maintaining. */
    rc = dd_migrate_check_key_format(dd_db_mysql(db), table, errstr, errstr_size);
    if (!rc)
        rc = dd_grants_check(db, conf, table, dry_run ? DD_GRANTS_READ : DD_GRANTS_PURGE, errstr,
                             errstr_size);
    if (!rc && dry_run) rc = dd_purge_count(db, table, &would, errstr, errstr_size);
    if (!rc && !dry_run) rc = dd_purge_pass(db, conf, table, NULL, &res, errstr, errstr_size);
    if (rc) return rc;
    dd_purge_where(conf, table, shard, where, sizeof(where));
    batches = (would + (uint64_t)conf->purge.batch - 1) / (uint64_t)conf->purge.batch;
    if (dry_run)
        printf("would delete %llu expired %s from %s in %llu %s (dry run: nothing deleted)\n",
               (unsigned long long)would, dd_purge_plural(would, "row", "rows"), where,
               (unsigned long long)batches, dd_purge_plural(batches, "batch", "batches"));
    else
        printf("deleted %llu expired %s from %s in %d %s\n", (unsigned long long)res.deleted,
               dd_purge_plural(res.deleted, "row", "rows"), where, res.batches,
               dd_purge_plural((uint64_t)res.batches, "batch", "batches"));
    fflush(stdout);
    return DD_OK;
}

static int dd_purge_cmd_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_purge_opts_t *o = opts;
    const dd_conf_t *conf = ctx->conf;
    int only = ctx->only;
    dd_db_t *db = NULL;
    char err[1024];
    int rc = DD_OK;

    /* Shard by shard, each on its own connection; a shard that fails is
     * reported and the others are purged all the same. */
    for (int s = 0; s < conf->shard_cnt; s++) {
        int src = dd_db_new_shard(&db, conf, s, err, sizeof(err));
        for (int r = 0; !src && r < conf->route_cnt; r++)
            if (only < 0 || r == only)
                src = dd_purge_table(db, conf, conf->routes[r].dedup.table, s, o->dry_run, err,
                                     sizeof(err));
        if (src && conf->shard_cnt > 1)
            dd_log(DD_LOG_ERROR, "dedupd purge: shard %d: %s", s, err);
        else if (src)
            dd_log(DD_LOG_ERROR, "dedupd purge: %s", err);
        if (src) rc = src;
        dd_db_destroy(db);
        db = NULL;
    }
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_purge = {
    .name = "purge",
    .args = "-c FILE [--dry-run] [--route NAME]",
    .summary = "delete expired dedup rows once, print the count",
    .usage = "usage: dedupd purge -c FILE [--dry-run] [--route NAME]\n"
             "\n"
             "Deletes the expired rows of every route's dedup table (expire_at in the past,\n"
             "never a row in state 0) in batches of purge.batch, as `dedupd run` does every\n"
             "purge.interval, and prints how many, a line per table. With mysql.shards,\n"
             "every table in every shard, a line each (\"... from TABLE in shard N ...\").\n",
    .exits = "  0  purged (or counted, with --dry-run)\n"
             "  1  failure: the database (of any shard: the others are purged all the same),\n"
             "     a missing privilege, a table of another key format\n"
             "  2  usage error, or no route of that name\n",
    .route_help = "only the dedup table of the route NAME (routes[].name;\n"
                  "default for a configuration without routes)",
    .flags = DD_CMD_CONFIG | DD_CMD_ROUTE,
    .opts_size = sizeof(dd_purge_opts_t),
    .opts = dd_purge_cmd_opts,
    .run = dd_purge_cmd_run,
};
