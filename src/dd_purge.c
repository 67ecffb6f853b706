/*
 * Retention of the dedup table.
 *
 * A key must be remembered as long as its message can come back; after that
 * the row is dead weight in the primary key every claim probes. Expired rows
 * are deleted in small autocommit transactions with a pause between them, so
 * the purge never holds many row locks or a long undo log next to the claim
 * transactions, and never touches rows in state 0 (a claim in progress, or a
 * lease that a later mode may take over).
 */
#include "dd_purge.h"

#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
/* With retry.max_attempts = 0 (unlimited) the retry part of the window
 * assumes this many attempts. */
#define DD_PURGE_UNLIMITED_ATTEMPTS 100

struct dd_purge_s {
    const dd_conf_t *conf;
    dd_db_t *db; /* the purge thread's own connection, opened lazily */
    pthread_t thread;
    volatile int stop;
};

typedef struct {
    uint64_t deleted;
    int batches; /* DELETE statements that removed at least one row */
} dd_purge_result_t;

/* ---- the idempotency window ---- */

/* An integer librdkafka property from kafka.properties (last one wins), or
 * def when it is not set. */
static int64_t dd_purge_kprop(const dd_conf_t *conf, const char *name, int64_t def)
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
static int64_t dd_purge_retry_ms(const dd_conf_t *conf)
{
    int attempts =
        conf->retry.max_attempts ? conf->retry.max_attempts : DD_PURGE_UNLIMITED_ATTEMPTS;
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
int64_t dd_purge_window_s(const dd_conf_t *conf)
{
    int64_t ms = dd_purge_kprop(conf, "max.poll.interval.ms", 300000) +
                 dd_purge_kprop(conf, "session.timeout.ms", 45000) +
                 dd_purge_kprop(conf, "auto.commit.interval.ms", 5000) + conf->shutdown_timeout_ms +
                 dd_purge_retry_ms(conf);

    return (ms + 999) / 1000;
}

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

/* Deletes expired, finished rows batch by batch until a batch comes back
 * short or *stop is set. Each DELETE autocommits on its own. */
static int dd_purge_pass(dd_db_t *db, const dd_conf_t *conf, volatile const int *stop,
                         dd_purge_result_t *res, char *errstr, size_t errstr_size)
{
    char sql[256];
    int rc = DD_OK;

    memset(res, 0, sizeof(*res));
    snprintf(sql, sizeof(sql),
             "DELETE FROM `%s` WHERE expire_at < NOW(6) AND status <> 0 ORDER BY expire_at "
             "LIMIT %d",
             conf->dedup.table, conf->purge.batch);
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

static void dd_purge_background_pass(dd_purge_t *purge)
{
    const dd_conf_t *conf = purge->conf;
    dd_purge_result_t res;
    int64_t t0 = dd_now_ms();
    char err[512];
    int rc;

    if (!purge->db)
        rc = dd_db_open(&purge->db, conf, err, sizeof(err));
    else if (!dd_db_mysql(purge->db))
        rc = dd_db_reconnect(purge->db, err, sizeof(err));
    else
        rc = DD_OK;
    if (!rc) rc = dd_purge_pass(purge->db, conf, &purge->stop, &res, err, sizeof(err));
    if (rc) {
        dd_log(DD_LOG_WARN, "Purge of %s failed, trying again in %llds: %s", conf->dedup.table,
               (long long)conf->purge.interval_s, err);
        /* Start the next pass on a fresh connection. */
        dd_db_close(purge->db);
        purge->db = NULL;
        return;
    }
    dd_log(res.deleted ? DD_LOG_INFO : DD_LOG_DEBUG,
           "Purge deleted %llu expired %s from %s in %d %s (%lld ms).",
           (unsigned long long)res.deleted, dd_purge_plural(res.deleted, "row", "rows"),
           conf->dedup.table, res.batches,
           dd_purge_plural((uint64_t)res.batches, "batch", "batches"),
           (long long)(dd_now_ms() - t0));
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

int dd_purge_start(dd_purge_t **purgep, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    dd_purge_t *purge;

    *purgep = NULL;
    if (conf->purge.interval_s <= 0) {
        dd_log(DD_LOG_INFO, "Background purge is off (purge.interval = 0).");
        return DD_OK;
    }
    purge = calloc(1, sizeof(*purge));
    if (!purge) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    purge->conf = conf;
    if (pthread_create(&purge->thread, NULL, dd_purge_thread_main, purge) != 0) {
        free(purge);
        dd_errstr_set(errstr, errstr_size, "cannot start the purge thread");
        return DD_ERR_FATAL;
    }
    *purgep = purge;
    return DD_OK;
}

void dd_purge_stop(dd_purge_t *purge)
{
    if (!purge) return;
    purge->stop = 1;
    pthread_join(purge->thread, NULL);
    dd_db_close(purge->db);
    free(purge);
}

/* ---- commands ---- */

/* "-c FILE": loads the configuration and connects. Returns an exit code. */
static int dd_purge_cmd_open(int argc, char **argv, dd_conf_t **confp, dd_db_t **dbp)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {NULL, 0, NULL, 0}};
    const char *path = NULL;
    char err[1024];
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        if (c != 'c') return 2;
        path = optarg;
    }
    if (optind < argc || !path) {
        fprintf(stderr, "usage: dedupd %s -c FILE\n", argv[0]);
        return 2;
    }
    if (dd_conf_load(confp, path, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd %s: %s\n", argv[0], err);
        return 1;
    }
    dd_log_setup((dd_log_level_t)(*confp)->log.level, (dd_log_format_t)(*confp)->log.format);
    if (dd_db_open(dbp, *confp, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd %s: %s\n", argv[0], err);
        return 1;
    }
    return 0;
}

int dd_purge_main(int argc, char **argv)
{
    dd_conf_t *conf = NULL;
    dd_db_t *db = NULL;
    dd_purge_result_t res;
    char err[1024];
    int rc;

    rc = dd_purge_cmd_open(argc, argv, &conf, &db);
    if (rc) goto out;
    /* Expiry does not depend on keys, but a table of another key format
     * is one no dedupd of this version should be maintaining. */
    if (dd_migrate_check_key_format(dd_db_mysql(db), conf->dedup.table, err, sizeof(err)) !=
            DD_OK ||
        dd_grants_check(db, conf, DD_GRANTS_PURGE, err, sizeof(err)) != DD_OK ||
        dd_purge_pass(db, conf, NULL, &res, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd purge: %s\n", err);
        rc = 1;
        goto out;
    }
    printf("deleted %llu expired %s from %s in %d %s\n", (unsigned long long)res.deleted,
           dd_purge_plural(res.deleted, "row", "rows"), conf->dedup.table, res.batches,
           dd_purge_plural((uint64_t)res.batches, "batch", "batches"));
out:
    dd_db_close(db);
    dd_conf_destroy(conf);
    return rc;
}

/* ---- stats ---- */

/* Runs a SELECT and returns its stored result, or NULL with errstr set. */
static MYSQL_RES *dd_stats_select(dd_db_t *db, const char *sql, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    MYSQL_RES *res = NULL;

    if (mysql_query(mysql, sql) != 0 || !(res = mysql_store_result(mysql)))
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
    return res;
}

static void dd_stats_line(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dd_stats_line(const char *label, const char *fmt, ...)
{
    va_list ap;

    printf("%-28s ", label);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* "3d 4h", "2h 5m", "42s". */
static void dd_stats_age(long long s, char *out, size_t out_size)
{
    if (s >= 86400)
        snprintf(out, out_size, "%lldd %lldh", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        snprintf(out, out_size, "%lldh %lldm", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(out, out_size, "%lldm %llds", s / 60, s % 60);
    else
        snprintf(out, out_size, "%llds", s);
}

static int dd_stats_by_status(dd_db_t *db, const char *table, char *errstr, size_t errstr_size)
{
    unsigned long long n[3] = {0, 0, 0}, other = 0;
    char sql[256];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql), "SELECT status, COUNT(*) FROM `%s` GROUP BY status", table);
    if (!(res = dd_stats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        int st = atoi(row[0]);
        if (st >= 0 && st <= 2)
            n[st] = strtoull(row[1], NULL, 10);
        else
            other += strtoull(row[1], NULL, 10);
    }
    mysql_free_result(res);
    dd_stats_line("rows", "%llu", n[0] + n[1] + n[2] + other);
    dd_stats_line("  applied (status 1)", "%llu", n[1]);
    dd_stats_line("  failed (status 2)", "%llu", n[2]);
    dd_stats_line("  processing (status 0)", "%llu", n[0]);
    if (other) dd_stats_line("  unknown status", "%llu", other);
    return DD_OK;
}

static int dd_stats_ages(dd_db_t *db, const char *table, char *errstr, size_t errstr_size)
{
    char sql[512], age[32];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql),
             "SELECT DATE_FORMAT(MIN(created_at), '%%Y-%%m-%%d %%H:%%i:%%s'),"
             " TIMESTAMPDIFF(SECOND, MIN(created_at), NOW(6)),"
             " DATE_FORMAT(MAX(created_at), '%%Y-%%m-%%d %%H:%%i:%%s'),"
             " TIMESTAMPDIFF(SECOND, MAX(created_at), NOW(6)) FROM `%s`",
             table);
    if (!(res = dd_stats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    row = mysql_fetch_row(res);
    if (row && row[0]) {
        dd_stats_age(atoll(row[1]), age, sizeof(age));
        dd_stats_line("oldest row", "%s (created %s ago)", row[0], age);
        dd_stats_age(atoll(row[3]), age, sizeof(age));
        dd_stats_line("newest row", "%s (created %s ago)", row[2], age);
    } else {
        dd_stats_line("oldest row", "-");
        dd_stats_line("newest row", "-");
    }
    mysql_free_result(res);
    return DD_OK;
}

static int dd_stats_expired(dd_db_t *db, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    char sql[256], every[32];
    MYSQL_RES *res;
    MYSQL_ROW row;

    /* Uses the expire_at index: cheap even on a large table. */
    snprintf(sql, sizeof(sql),
             "SELECT COALESCE(SUM(status <> 0), 0), COALESCE(SUM(status = 0), 0) FROM `%s`"
             " WHERE expire_at < NOW(6)",
             conf->dedup.table);
    if (!(res = dd_stats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    row = mysql_fetch_row(res);
    dd_stats_line("expired, awaiting purge", "%s", row ? row[0] : "0");
    dd_stats_line("expired, still processing", "%s (status 0: never purged)", row ? row[1] : "0");
    mysql_free_result(res);
    dd_stats_age(conf->dedup.ttl_s, every, sizeof(every));
    if (conf->purge.interval_s > 0) {
        char iv[32];
        dd_stats_age(conf->purge.interval_s, iv, sizeof(iv));
        dd_stats_line("retention", "ttl %s; `dedupd run` purges every %s, %d rows per batch", every,
                      iv, conf->purge.batch);
    } else {
        dd_stats_line("retention", "ttl %s; background purge off (purge.interval = 0)", every);
    }
    return DD_OK;
}

/* Failed rows are the table's record of dead letters: each carries the
 * handler's error. Conflicts leave no row (the key belongs to the first
 * payload), so they are only in the dead-letter topic and the metrics. */
static int dd_stats_failures(dd_db_t *db, const char *table, char *errstr, size_t errstr_size)
{
    char sql[256];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*), LEFT(COALESCE(error, '(no error recorded)'), 100) FROM `%s`"
             " WHERE status = 2 GROUP BY 2 ORDER BY 1 DESC, 2 LIMIT 5",
             table);
    if (!(res = dd_stats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    if (mysql_num_rows(res) > 0) printf("failed rows by error (top 5):\n");
    while ((row = mysql_fetch_row(res)))
        printf("  %8s  %s\n", row[0], row[1]);
    mysql_free_result(res);
    printf("dead letters: the table records rejected keys as failed rows (status 2, with the "
           "error);\nconflicts are not stored in the table (a conflicting message goes to the "
           "dead-letter\ntopic only): see dedupd_conflicts_total and "
           "dedupd_dead_letters_total on /metrics.\n");
    return DD_OK;
}

int dd_stats_main(int argc, char **argv)
{
    dd_conf_t *conf = NULL;
    dd_db_t *db = NULL;
    char err[1024];
    int rc;

    rc = dd_purge_cmd_open(argc, argv, &conf, &db);
    if (rc) goto out;
    dd_stats_line("table", "%s.%s", conf->mysql.database, conf->dedup.table);
    rc = dd_grants_check(db, conf, DD_GRANTS_READ, err, sizeof(err));
    if (!rc) rc = dd_stats_by_status(db, conf->dedup.table, err, sizeof(err));
    if (!rc) rc = dd_stats_ages(db, conf->dedup.table, err, sizeof(err));
    if (!rc) rc = dd_stats_expired(db, conf, err, sizeof(err));
    if (!rc) rc = dd_stats_failures(db, conf->dedup.table, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "dedupd stats: %s\n", err);
        rc = 1;
    }
out:
    dd_db_close(db);
    dd_conf_destroy(conf);
    return rc;
}
