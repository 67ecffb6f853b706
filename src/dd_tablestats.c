/*
 * `dedupd stats`: the dedup table at a glance, for an operator. Rows by
 * status, the oldest and newest, what awaits the purge and the retention
 * settings, and the most frequent errors of failed rows (the table's
 * record of rejected keys; conflicts leave no row, so they are only in the
 * dead-letter topic and the metrics). Every query is an aggregate the
 * table's indexes make cheap, or a scan the output says it is.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_grants.h"

/* Runs a SELECT and returns its stored result, or NULL with errstr set. */
static MYSQL_RES *dd_tablestats_select(dd_db_t *db, const char *sql, char *errstr,
                                       size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    MYSQL_RES *res = NULL;

    if (mysql_query(mysql, sql) != 0 || !(res = mysql_store_result(mysql)))
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
    return res;
}

static void dd_tablestats_line(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dd_tablestats_line(const char *label, const char *fmt, ...)
{
    va_list ap;

    printf("%-28s ", label);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* "3d 4h", "2h 5m", "42s". */
static void dd_tablestats_age(long long s, char *out, size_t out_size)
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

static int dd_tablestats_by_status(dd_db_t *db, const char *table, char *errstr, size_t errstr_size)
{
    unsigned long long n[3] = {0, 0, 0}, other = 0;
    char sql[256];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql), "SELECT status, COUNT(*) FROM `%s` GROUP BY status", table);
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        int st = atoi(row[0]);
        if (st >= 0 && st <= 2)
            n[st] = strtoull(row[1], NULL, 10);
        else
            other += strtoull(row[1], NULL, 10);
    }
    mysql_free_result(res);
    dd_tablestats_line("rows", "%llu", n[0] + n[1] + n[2] + other);
    dd_tablestats_line("  applied (status 1)", "%llu", n[1]);
    dd_tablestats_line("  failed (status 2)", "%llu", n[2]);
    dd_tablestats_line("  processing (status 0)", "%llu", n[0]);
    if (other) dd_tablestats_line("  unknown status", "%llu", other);
    return DD_OK;
}

static int dd_tablestats_ages(dd_db_t *db, const char *table, char *errstr, size_t errstr_size)
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
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    row = mysql_fetch_row(res);
    if (row && row[0]) {
        dd_tablestats_age(atoll(row[1]), age, sizeof(age));
        dd_tablestats_line("oldest row", "%s (created %s ago)", row[0], age);
        dd_tablestats_age(atoll(row[3]), age, sizeof(age));
        dd_tablestats_line("newest row", "%s (created %s ago)", row[2], age);
    } else {
        dd_tablestats_line("oldest row", "-");
        dd_tablestats_line("newest row", "-");
    }
    mysql_free_result(res);
    return DD_OK;
}

static int dd_tablestats_expired(dd_db_t *db, const dd_conf_t *conf, char *errstr,
                                 size_t errstr_size)
{
    char sql[256], every[32];
    MYSQL_RES *res;
    MYSQL_ROW row;

    /* Uses the expire_at index: cheap even on a large table. */
    snprintf(sql, sizeof(sql),
             "SELECT COALESCE(SUM(status <> 0), 0), COALESCE(SUM(status = 0), 0) FROM `%s`"
             " WHERE expire_at < NOW(6)",
             conf->dedup.table);
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
    row = mysql_fetch_row(res);
    dd_tablestats_line("expired, awaiting purge", "%s", row ? row[0] : "0");
    dd_tablestats_line("expired, still processing", "%s (status 0: never purged)",
                       row ? row[1] : "0");
    mysql_free_result(res);
    dd_tablestats_age(conf->dedup.ttl_s, every, sizeof(every));
    if (conf->purge.interval_s > 0) {
        char iv[32];
        dd_tablestats_age(conf->purge.interval_s, iv, sizeof(iv));
        dd_tablestats_line("retention", "ttl %s; `dedupd run` purges every %s, %d rows per batch",
                           every, iv, conf->purge.batch);
    } else {
        dd_tablestats_line("retention", "ttl %s; background purge off (purge.interval = 0)", every);
    }
    return DD_OK;
}

/* Failed rows are the table's record of dead letters: each carries the
 * handler's error. Conflicts leave no row (the key belongs to the first
 * payload), so they are only in the dead-letter topic and the metrics. */
static int dd_tablestats_failures(dd_db_t *db, const char *table, char *errstr, size_t errstr_size)
{
    char sql[256];
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*), LEFT(COALESCE(error, '(no error recorded)'), 100) FROM `%s`"
             " WHERE status = 2 GROUP BY 2 ORDER BY 1 DESC, 2 LIMIT 5",
             table);
    if (!(res = dd_tablestats_select(db, sql, errstr, errstr_size))) return DD_ERR_FATAL;
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

static int dd_tablestats_run(const dd_conf_t *conf, void *opts)
{
    dd_db_t *db = NULL;
    char err[1024];
    int rc;

    (void)opts;
    rc = dd_db_new(&db, conf, err, sizeof(err));
    if (!rc) {
        dd_tablestats_line("table", "%s.%s", conf->mysql.database, conf->dedup.table);
        rc = dd_grants_check(db, conf, DD_GRANTS_READ, err, sizeof(err));
    }
    if (!rc) rc = dd_tablestats_by_status(db, conf->dedup.table, err, sizeof(err));
    if (!rc) rc = dd_tablestats_ages(db, conf->dedup.table, err, sizeof(err));
    if (!rc) rc = dd_tablestats_expired(db, conf, err, sizeof(err));
    if (!rc) rc = dd_tablestats_failures(db, conf->dedup.table, err, sizeof(err));
    if (rc) fprintf(stderr, "dedupd stats: %s\n", err);
    dd_db_destroy(db);
    return rc ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_stats = {
    .name = "stats",
    .args = "-c FILE",
    .summary = "the dedup table at a glance",
    .help = "usage: dedupd stats -c FILE\n"
            "\n"
            "Shows the dedup table at a glance: rows by status, the oldest and newest,\n"
            "what awaits the purge, and the most frequent errors of failed rows.\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE   configuration file (libconfig)\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 shown, 1 failure, 2 usage error.\n",
    .flags = DD_CMD_CONFIG,
    .run = dd_tablestats_run,
};
