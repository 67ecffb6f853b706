/*
 * dedupd command line: run | migrate | check | mock-kafka.
 *
 * The only place that exits. Each command loads the configuration, does its
 * job through the modules, and maps the result to an exit code: 0 success,
 * 1 failure, 2 usage error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_db.h"
#include "dd_grants.h"
#include "dd_handler.h"
#include "dd_log.h"
#include "dd_migrate.h"
#include "dd_mock.h"
#include "dd_http.h"
#include "dd_key.h"
#include "dd_pipeline.h"
#include "dd_purge.h"
#include "dd_replay.h"
#include "dd_tls.h"
#include "dd_validate.h"

#ifndef DEDUPD_VERSION
#define DEDUPD_VERSION "0.1.0"
#endif

static void dd_main_usage(FILE *out)
{
    fprintf(out,
            "usage: dedupd COMMAND [options]\n"
            "\n"
            "Commands:\n"
            "  run -c FILE [--exit-at-end]   consume, claim, apply exactly once, store offsets\n"
            "  migrate -c FILE               create or upgrade the dedup table, then the "
            "handler's tables\n"
            "  check -c FILE                 validate config, handler, Kafka and database\n"
            "  replay -c FILE --from {earliest|OFFSET|TIME} [--to {latest|OFFSET|TIME}]\n"
            "         [--topic T] [--partitions 0,2] [--apply] [--report FILE]\n"
            "         [--format json|csv] [--orphans]   reconcile the database with a topic\n"
            "  purge -c FILE                 delete expired dedup rows once, print the count\n"
            "  stats -c FILE                 the dedup table at a glance\n"
            "  mock-kafka [--brokers N] [--topic NAME:PARTITIONS]... [--bootstrap-file F]\n"
            "             [--control FIFO]   host a mock Kafka cluster for tests and demos\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE   configuration file (libconfig)\n"
            "  --exit-at-end       run: exit 0 once every assigned partition is applied and\n"
            "                      committed up to its end offset at start\n"
            "  -h, --help          this text;  --help-config  every setting\n"
            "  -V, --version       print the version\n");
}

/* Parses "-c FILE [--exit-at-end]" for run/migrate/check. */
static int dd_main_args(int argc, char **argv, const char **config, int *exit_at_end)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"exit-at-end", no_argument, NULL, 'e'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            *config = optarg;
            break;
        case 'e':
            if (!exit_at_end) {
                fprintf(stderr, "dedupd %s: --exit-at-end only applies to run\n", argv[0]);
                return 2;
            }
            *exit_at_end = 1;
            break;
        case 'h':
            dd_main_usage(stdout);
            exit(0);
        default:
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dedupd %s: unexpected argument '%s'\n", argv[0], argv[optind]);
        return 2;
    }
    if (!*config) {
        fprintf(stderr, "dedupd %s: missing -c FILE\n", argv[0]);
        return 2;
    }
    return 0;
}

static int dd_main_load(const char *path, dd_conf_t **conf)
{
    char err[1024];

    if (dd_conf_load(conf, path, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd: %s\n", err);
        return 1;
    }
    dd_log_setup((dd_log_level_t)(*conf)->log.level, (dd_log_format_t)(*conf)->log.format);
    return 0;
}

static void dd_main_summary(dd_pipeline_t *pl)
{
    dd_stats_t s;
    uint64_t dl = 0;

    dd_pipeline_stats(pl, &s);
    for (int i = 0; i < DD_REASON_CNT; i++)
        dl += s.dead_letters[i];
    printf("summary messages=%llu applied=%llu duplicates=%llu conflicts=%llu retries=%llu "
           "dead_letters=%llu",
           (unsigned long long)s.messages, (unsigned long long)s.applied,
           (unsigned long long)s.duplicates, (unsigned long long)s.conflicts,
           (unsigned long long)s.retries, (unsigned long long)dl);
    for (int i = 0; i < DD_REASON_CNT; i++)
        printf(" dlq_%s=%llu", dd_reason2str((dd_reason_t)i),
               (unsigned long long)s.dead_letters[i]);
    printf(" db_retries=%llu batches=%llu batched=%llu batch_declined=%llu claim_races=%llu",
           (unsigned long long)s.db_errors_retriable, (unsigned long long)s.batches,
           (unsigned long long)s.batched, (unsigned long long)s.batch_declined,
           (unsigned long long)s.claim_races);
    /* poll -> finished latency, and the time from the first message polled
     * to the last one finished (what the bench divides by) */
    printf(" latency_p50_ms=%.3f latency_p99_ms=%.3f active_s=%.3f fetch_wait_s=%.3f\n",
           (double)dd_pipeline_latency_us(&s, 0.50) / 1000.0,
           (double)dd_pipeline_latency_us(&s, 0.99) / 1000.0,
           s.first_poll_ms ? (double)(s.last_finish_ms - s.first_poll_ms) / 1000.0 : 0.0,
           (double)s.fetch_wait_us / 1e6);
    fflush(stdout);
}

/* The dedup table must hold keys of the format this dedupd renders. */
static int dd_main_check_table(const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    dd_db_t *db = NULL;
    int rc = dd_db_open(&db, conf, errstr, errstr_size);

    if (!rc)
        rc = dd_migrate_check_key_format(dd_db_mysql(db), conf->dedup.table, errstr, errstr_size);
    if (!rc) rc = dd_grants_check(db, conf, dd_grants_run_needs(conf), errstr, errstr_size);
    dd_db_close(db);
    return rc;
}

/* run: what the start-up validation found goes to the log. */
static void dd_main_run_report(void *opaque, dd_validate_level_t level, const char *what,
                               const char *text)
{
    static const dd_log_level_t levels[] = {DD_LOG_DEBUG, DD_LOG_WARN, DD_LOG_ERROR};

    dd_log(levels[level], "%s: %s", what, text);
}

static int dd_main_run(int argc, char **argv)
{
    const char *path = NULL;
    int exit_at_end = 0, rc;
    dd_conf_t *conf = NULL;
    dd_handler_t *h = NULL;
    dd_pipeline_t *pl = NULL;
    dd_http_t *http = NULL;
    dd_purge_t *purge = NULL;
    dd_stats_t end = {0};
    char err[1024];

    if ((rc = dd_main_args(argc, argv, &path, &exit_at_end)) != 0)
        return rc;
    if (dd_main_load(path, &conf))
        return 1;
    dd_signals_install();
    rc = dd_validate_conf(conf, &h, dd_main_run_report, NULL, err, sizeof(err));
    if (!rc)
        rc = dd_main_check_table(conf, err, sizeof(err));
    if (!rc)
        rc = dd_pipeline_new(&pl, conf, h, err, sizeof(err));
    if (!rc && conf->http.listen)
        rc = dd_http_start(&http, conf, pl, err, sizeof(err));
    if (!rc)
        rc = dd_purge_start(&purge, conf, err, sizeof(err));
    if (!rc) {
        dd_log(DD_LOG_INFO, "dedupd %s starting: group %s, %d worker(s), handler %s.",
               DEDUPD_VERSION, conf->kafka.group, conf->workers, dd_handler_name(h));
        rc = dd_pipeline_run(pl, exit_at_end, &dd_stop_requested, err, sizeof(err));
        dd_main_summary(pl);
        dd_pipeline_stats(pl, &end);
    }
    if (rc) dd_log(DD_LOG_ERROR, "Stopping: %s", err);
    dd_purge_stop(purge);
    dd_http_stop(http);
    dd_pipeline_destroy(pl);
    dd_handler_destroy(h);
    dd_conf_destroy(conf);
    /* The last line, once everything is released, says how it ended. */
    if (!rc && end.abandoned)
        dd_log(DD_LOG_WARN,
               "Stopped, abandoning %lld message(s) (%lld of them waiting for "
               "their dead letter's acknowledgement): their offsets were not committed, so "
               "they are consumed again after a restart.",
               (long long)end.abandoned, (long long)end.abandoned_dlq);
    else if (!rc)
        dd_log(DD_LOG_INFO, "Stopped cleanly.");
    return rc ? 1 : 0;
}

static int dd_main_migrate(int argc, char **argv)
{
    const char *path = NULL;
    dd_conf_t *conf = NULL;
    dd_handler_t *h = NULL;
    dd_db_t *db = NULL;
    char err[1024];
    int rc, version = 0;

    if ((rc = dd_main_args(argc, argv, &path, NULL)) != 0)
        return rc;
    if (dd_main_load(path, &conf))
        return 1;
    rc = dd_handler_load(&h, conf->handler.path, conf->handler.config, err, sizeof(err));
    if (!rc)
        rc = dd_db_open(&db, conf, err, sizeof(err));
    if (!rc)
        rc = dd_migrate_run(dd_db_mysql(db), conf->dedup.table, err, sizeof(err));
    if (!rc)
        rc = dd_migrate_version(dd_db_mysql(db), conf->dedup.table, &version, err, sizeof(err));
    if (!rc)
        rc = dd_handler_migrate(h, dd_db_mysql(db), err, sizeof(err));
    if (rc)
        fprintf(stderr, "dedupd migrate: %s\n", err);
    else
        printf("dedup table %s is at schema version %d, key format %d; handler %s migrated.\n",
               conf->dedup.table, version, DD_KEY_FORMAT, dd_handler_name(h));
    dd_db_close(db);
    dd_handler_destroy(h);
    dd_conf_destroy(conf);
    return rc ? 1 : 0;
}

/* check: Kafka part. Reads metadata of every configured topic. */
static int dd_main_check_kafka(const dd_conf_t *conf)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    const struct rd_kafka_metadata *md = NULL;
    char err[512];
    rd_kafka_t *rk;
    int bad = 0;

    /* The user's properties too: a secured cluster needs its SASL/TLS settings. */
    if (dd_conf_kafka_apply(conf, kconf, NULL, err, sizeof(err)) ||
        dd_conf_kafka_set(kconf, "allow.auto.create.topics", "false", err, sizeof(err)))
        rk = NULL;
    else
        rk = rd_kafka_new(RD_KAFKA_CONSUMER, kconf, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(kconf);
        printf("FAIL kafka: %s\n", err);
        return 1;
    }
    for (int i = 0; i < conf->kafka.topic_cnt; i++) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, conf->kafka.topics[i], NULL);
        rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        if (!e && md->topic_cnt == 1 && !md->topics[0].err)
            printf("ok   kafka: topic %s has %d partition(s) at %s\n", conf->kafka.topics[i],
                   md->topics[0].partition_cnt, conf->kafka.brokers);
        else {
            printf("FAIL kafka: topic %s at %s: %s\n", conf->kafka.topics[i],
                   conf->kafka.brokers,
                   rd_kafka_err2str(e ? e : md->topics[0].err));
            bad = 1;
        }
        if (md)
            rd_kafka_metadata_destroy(md);
        md = NULL;
        rd_kafka_topic_destroy(rkt);
    }
    rd_kafka_destroy(rk);
    return bad;
}

/* check: every finding of the start-up validation is printed. */
static void dd_main_check_report(void *opaque, dd_validate_level_t level, const char *what,
                                 const char *text)
{
    static const char *const tags[] = {"ok  ", "WARN", "FAIL"};
    int *warnings = opaque;

    printf("%s %s: %s\n", tags[level], what, text);
    *warnings += level == DD_VALIDATE_WARN;
}

static int dd_main_check(int argc, char **argv)
{
    const char *path = NULL;
    dd_conf_t *conf = NULL;
    dd_handler_t *h = NULL;
    dd_db_t *db = NULL;
    char err[1024];
    int rc, bad = 0, version = 0, warnings = 0;

    if ((rc = dd_main_args(argc, argv, &path, NULL)) != 0)
        return rc;
    if (dd_main_load(path, &conf))
        return 1;
    printf("ok   config: %s\n", conf->path);
    /* What `dedupd run` checks before it starts, in the same words. */
    if (dd_validate_conf(conf, &h, dd_main_check_report, &warnings, err, sizeof(err)) != DD_OK)
        bad = 1;
    if (dd_db_open(&db, conf, err, sizeof(err)) == DD_OK) {
        char tls[200] = "unix socket, no TLS";
        if (!conf->mysql.socket) dd_tls_describe(dd_db_mysql(db), tls, sizeof(tls));
        printf("ok   database: connected to %s as %s (%s)\n", conf->mysql.database,
               conf->mysql.user, tls);
        if (dd_migrate_version(dd_db_mysql(db), conf->dedup.table, &version, err,
                               sizeof(err)) == DD_OK &&
            version == dd_migrations[dd_migration_cnt - 1].version)
            printf("ok   dedup table: %s at schema version %d\n", conf->dedup.table, version);
        else
            printf("FAIL dedup table: %s is at schema version %d, run `dedupd migrate`\n",
                   conf->dedup.table, version),
                bad = 1;
        if (dd_migrate_check_key_format(dd_db_mysql(db), conf->dedup.table, err, sizeof(err)) ==
            DD_OK)
            printf("ok   key format: %s records format %d\n", conf->dedup.table, DD_KEY_FORMAT);
        else
            printf("FAIL key format: %s\n", err), bad = 1;
        if (dd_grants_check(db, conf, dd_grants_run_needs(conf), err, sizeof(err)) == DD_OK)
            printf("ok   privileges: %s may do what dedupd run does on %s\n", conf->mysql.user,
                   conf->dedup.table);
        else
            printf("FAIL privileges: %s\n", err), bad = 1;
    } else {
        printf("FAIL database: %s\n", err);
        bad = 1;
    }
    bad |= dd_main_check_kafka(conf);
    dd_db_close(db);
    dd_handler_destroy(h);
    dd_conf_destroy(conf);
    if (bad)
        printf("check failed\n");
    else if (warnings)
        printf("check passed, with %d warning(s)\n", warnings);
    else
        printf("check passed\n");
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;

    if (!cmd) {
        dd_main_usage(stderr);
        return 2;
    }
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        dd_main_usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--help-config")) {
        dd_conf_print_reference(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--help-config=markdown")) {
        dd_conf_print_reference_md(stdout); /* the table in README.md and docs/CONFIG.md */
        return 0;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("dedupd %s (librdkafka %s, handler ABI %d)\n", DEDUPD_VERSION,
               rd_kafka_version_str(), DEDUPD_HANDLER_ABI_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return dd_main_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "migrate"))
        return dd_main_migrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "check"))
        return dd_main_check(argc - 1, argv + 1);
    if (!strcmp(cmd, "mock-kafka"))
        return dd_mock_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "replay"))
        return dd_replay_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "purge"))
        return dd_purge_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "stats"))
        return dd_stats_main(argc - 1, argv + 1);
    fprintf(stderr, "dedupd: unknown command '%s'\n\n", cmd);
    dd_main_usage(stderr);
    return 2;
}
