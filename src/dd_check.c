/*
 * `dedupd check`: what `dedupd run` would find wrong, before it runs. The
 * start-up validation of run (dd_validate, in the same words), then the
 * database (connection, schema version, key format) and Kafka (every
 * configured topic's metadata, with the user's properties: a secured
 * cluster needs its SASL/TLS settings). One "ok"/"WARN"/"FAIL" line per
 * finding, every finding shown even after a failure.
 */
#include <stdio.h>

#include <librdkafka/rdkafka.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_grants.h"
#include "dd_handler.h"
#include "dd_kafka.h"
#include "dd_key.h"
#include "dd_migrate.h"
#include "dd_tls.h"
#include "dd_validate.h"

/* Every configured topic exists. Looked up in the metadata of all topics:
 * a request naming a misspelled topic would create it on a cluster that
 * creates topics on demand, and check would pass. Returns 1 when one
 * failed. */
static int dd_check_kafka(const dd_conf_t *conf)
{
    rd_kafka_t *rk = NULL;
    char err[512];
    int bad = 0, cnt;

    if (dd_kafka_reader_new(&rk, conf, NULL, err, sizeof(err)) != DD_OK) {
        printf("FAIL kafka: %s\n", err);
        return 1;
    }
    for (int i = 0; i < conf->kafka.topic_cnt; i++) {
        if (dd_kafka_topic_partitions(rk, conf->kafka.topics[i], 10000, &cnt, err, sizeof(err)) ==
            DD_OK) {
            printf("ok   kafka: topic %s has %d partition(s) at %s\n", conf->kafka.topics[i], cnt,
                   conf->kafka.brokers);
        } else {
            printf("FAIL kafka: %s at %s\n", err, conf->kafka.brokers);
            bad = 1;
        }
    }
    rd_kafka_destroy(rk);
    return bad;
}

/* The dedup table: at the newest schema version, recording this key
 * format. Returns 1 when something failed. */
static int dd_check_table(const dd_conf_t *conf, dd_db_t *db)
{
    char err[1024];
    int version = 0, bad = 0;

    if (dd_migrate_version(dd_db_mysql(db), conf->dedup.table, &version, err, sizeof(err)) ==
            DD_OK &&
        version == dd_migrations[dd_migration_cnt - 1].version) {
        printf("ok   dedup table: %s at schema version %d\n", conf->dedup.table, version);
    } else {
        printf("FAIL dedup table: %s is at schema version %d, run `dedupd migrate`\n",
               conf->dedup.table, version);
        bad = 1;
    }
    if (dd_migrate_check_key_format(dd_db_mysql(db), conf->dedup.table, err, sizeof(err)) ==
        DD_OK) {
        printf("ok   key format: %s records format %d\n", conf->dedup.table, DD_KEY_FORMAT);
    } else {
        printf("FAIL key format: %s\n", err);
        bad = 1;
    }
    if (dd_grants_check(db, conf, dd_grants_run_needs(conf), err, sizeof(err)) == DD_OK) {
        printf("ok   privileges: %s may do what dedupd run does on %s\n", conf->mysql.user,
               conf->dedup.table);
    } else {
        printf("FAIL privileges: %s\n", err);
        bad = 1;
    }
    return bad;
}

/* Every finding of the start-up validation is printed. */
static void dd_check_report(void *opaque, dd_validate_level_t level, const char *what,
                            const char *text)
{
    static const char *const tags[] = {"ok  ", "WARN", "FAIL"};
    int *warnings = opaque;

    printf("%s %s: %s\n", tags[level], what, text);
    *warnings += level == DD_VALIDATE_WARN;
}

static int dd_check_run(const dd_conf_t *conf, void *opts)
{
    dd_handler_t *h = NULL;
    dd_db_t *db = NULL;
    char err[1024];
    int bad = 0, warnings = 0;

    (void)opts;
    printf("ok   config: %s\n", conf->path);
    /* What `dedupd run` checks before it starts, in the same words. */
    if (dd_validate_conf(conf, &h, dd_check_report, &warnings, err, sizeof(err)) != DD_OK) bad = 1;
    if (dd_db_new(&db, conf, err, sizeof(err)) == DD_OK) {
        char tls[200] = "unix socket, no TLS";
        if (!conf->mysql.socket) dd_tls_describe(dd_db_mysql(db), tls, sizeof(tls));
        printf("ok   database: connected to %s as %s (%s)\n", conf->mysql.database,
               conf->mysql.user, tls);
        bad |= dd_check_table(conf, db);
    } else {
        printf("FAIL database: %s\n", err);
        bad = 1;
    }
    bad |= dd_check_kafka(conf);
    dd_db_destroy(db);
    dd_handler_destroy(h);
    if (bad)
        printf("check failed\n");
    else if (warnings)
        printf("check passed, with %d warning(s)\n", warnings);
    else
        printf("check passed\n");
    return bad ? DD_EXIT_FAIL : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_check = {
    .name = "check",
    .args = "-c FILE",
    .summary = "validate config, handler, Kafka and database",
    .help = "usage: dedupd check -c FILE\n"
            "\n"
            "Validates what `dedupd run` validates before it starts, then connects to the\n"
            "database (schema version, key format, privileges) and looks every topic up\n"
            "in the cluster's metadata (without creating it). One line per finding: ok,\n"
            "WARN or FAIL.\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE   configuration file (libconfig)\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status:\n"
            "  0  passed (maybe with warnings)\n"
            "  1  a check failed\n"
            "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .run = dd_check_run,
};
