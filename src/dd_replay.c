/*
 * `dedupd replay` (see dd_replay.h and docs/REPLAY.md).
 *
 * Reconciliation needs an answer to "did every message of this topic range
 * reach the database, exactly as sent?" without disturbing the live
 * consumer: so replay reads with assign() under its own group id, never
 * commits, and judges each message with the pipeline's own parse, key and
 * hash rules (dd_parse.c) against the dedup table. --apply repairs by
 * pushing the missing keys through a lane group (dd_lanes.h), the same claim +
 * handler transaction as `dedupd run`, so a live consumer working on the
 * same keys at the same time cannot make anything happen twice.
 *
 * Each message is judged by its topic's route: its key, hash and dedup
 * table, and with --apply its handler. --route reads one route's topics;
 * by default every route's.
 *
 * Memory stays bounded by the batch size, not by the range: what replay
 * remembers about each key (its first message, its status, the apply
 * outcome) lives in session TEMPORARY tables, which the report and the
 * --orphans anti-join read back at the end. With shards they live in shard
 * 0's session; --orphans copies each other shard's keys of the range into
 * a temporary table of that shard's session, so its anti-join runs there.
 */
#include "dd_replay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_grants.h"
#include "dd_kafka.h"
#include "dd_log.h"
#include "dd_migrate.h"

static int dd_replay_take(dd_replay_t *rp, rd_kafka_message_t *rkm, char *errstr,
                          size_t errstr_size)
{
    dd_replay_part_t *pt =
        rkm->rkt ? dd_replay_part_find(rp, rd_kafka_topic_name(rkm->rkt), rkm->partition) : NULL;

    if (rkm->err) {
        if (rkm->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && pt && rkm->offset >= pt->end)
            dd_replay_advance(rp, pt, pt->end);
        else if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            dd_log(DD_LOG_WARN, "Consumer error: %s", rd_kafka_message_errstr(rkm));
        rd_kafka_message_destroy(rkm);
        return DD_OK;
    }
    if (!pt || pt->done || rkm->offset < pt->pos || rkm->offset >= pt->end ||
        !dd_replay_in_time(rp, pt, rkm)) {
        if (pt && !pt->done && rkm->offset >= pt->end) dd_replay_advance(rp, pt, pt->end);
        rd_kafka_message_destroy(rkm);
        return DD_OK;
    }
    return dd_replay_message(rp, pt, rkm, errstr, errstr_size);
}

static int dd_replay_consume(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    dd_progress_init(&rp->progress_line, "replay");
    while (!rc && rp->parts_left > 0 && !atomic_load(&dd_stop_requested)) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rp->rk, 100);
        if (rkm) rc = dd_replay_take(rp, rkm, errstr, errstr_size);
        if (!rc && rp->lanes) rc = dd_replay_apply_drain(rp, 0, errstr, errstr_size);
        dd_progress_show(&rp->progress_line, rp->progress, rp->total);
    }
    if (!rc) rc = dd_replay_flush(rp, errstr, errstr_size);
    dd_progress_end(&rp->progress_line);
    return rc;
}

/* Shard s: its recorded layout (with shards: a key looked for in a shard
 * of another layout would be reported missing, and --apply would claim it
 * anew), then each table read there: its key format and the privileges
 * replay needs there (temporary tables in shard 0, where they live, and
 * with --orphans in every shard, for its anti-join). */
static int dd_replay_check_shard(dd_replay_t *rp, int s, char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = rp->conf;
    char who[340];
    int rc = dd_migrate_layout_check(dd_db_mysql(rp->sdb[s]),
                                     dd_conf_shard_name(conf, s, who, sizeof(who)), s,
                                     conf->shard_cnt, conf->shard_cnt > 1, errstr, errstr_size);

    if (rc) return rc; /* the message names the shard */
    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        const char *table = conf->routes[r].dedup.table;
        if (rp->only >= 0 && r != rp->only) continue;
        rc = dd_migrate_check_key_format(dd_db_mysql(rp->sdb[s]), table, errstr, errstr_size);
        if (!rc)
            rc = dd_grants_check(rp->sdb[s], conf, table,
                                 DD_GRANTS_READ |
                                     (s == 0 || rp->args->orphans ? DD_GRANTS_TEMP : 0) |
                                     (rp->args->apply ? DD_GRANTS_CLAIM : 0),
                                 errstr, errstr_size);
    }
    if (rc && conf->shard_cnt > 1) {
        char msg[800];
        snprintf(msg, sizeof(msg), "%.700s", errstr);
        snprintf(errstr, errstr_size, "shard %d: %s", s, msg);
    }
    return rc;
}

static int dd_replay_setup(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_replay_args_t *args = rp->args;
    const dd_conf_t *conf = rp->conf;
    int rc = DD_OK;

    rp->only = -1;
    if (args->route && (rp->only = dd_conf_route_named(conf, args->route)) < 0) {
        dd_errstr_set(errstr, errstr_size, "--route %s: %s has no route of that name", args->route,
                      conf->path);
        return DD_ERR_ARG;
    }
    if (args->apply) rc = dd_routes_load_handlers(conf, rp->hs, errstr, errstr_size);
    if (!rc)
        rc = dd_routes_new(&rp->routes, conf, args->apply ? rp->hs : NULL, errstr, errstr_size);
    if (!rc && !(rp->doc = dd_json_doc_new())) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
    }
    if (!rc) rc = dd_db_new_shard(&rp->db, conf, 0, errstr, errstr_size);
    if (!rc) rp->sdb[0] = rp->db;
    for (int s = 1; !rc && s < conf->shard_cnt; s++)
        rc = dd_db_new_shard(&rp->sdb[s], conf, s, errstr, errstr_size);
    for (int s = 0; !rc && s < conf->shard_cnt; s++)
        rc = dd_replay_check_shard(rp, s, errstr, errstr_size);
    if (!rc) rc = dd_replay_temp_tables(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_kafka_new(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_partitions(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_ranges(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_group_offsets(rp, errstr, errstr_size);
    if (!rc && args->apply) rc = dd_replay_apply_start(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_assign(rp, errstr, errstr_size);
    return rc;
}

static void dd_replay_destroy(dd_replay_t *rp)
{
    if (!rp) return;
    for (size_t i = 0; i < rp->n; i++)
        dd_item_destroy(rp->batch[i], NULL);
    dd_lanes_destroy(rp->lanes); /* before the handlers it calls */
    dd_routes_destroy(rp->routes);
    dd_routes_destroy_handlers(rp->hs, rp->conf->route_cnt);
    if (rp->rk) {
        rd_kafka_consumer_close(rp->rk);
        rd_kafka_destroy(rp->rk);
    }
    for (int s = 1; s < DD_CONF_SHARD_MAX; s++)
        dd_db_destroy(rp->sdb[s]);
    dd_db_destroy(rp->db);
    dd_buf_release(&rp->sql);
    dd_kafka_topics_free(rp->topics, rp->topic_cnt);
    dd_json_doc_destroy(rp->doc);
    free(rp->parts);
    free(rp);
}

static void dd_replay_release(void *opts)
{
    free(((dd_replay_args_t *)opts)->parts);
}

/* --route naming no route is a usage error, as a bad argument. */
static int dd_replay_route_unknown(const dd_conf_t *conf, const dd_replay_args_t *args)
{
    if (!args->route || dd_conf_route_named(conf, args->route) >= 0) return 0;
    dd_log(DD_LOG_ERROR, "dedupd replay: --route %s: %s has no route of that name", args->route,
           conf->path);
    return 1;
}

static int dd_replay_cmd_run(const dd_conf_t *conf, void *opts)
{
    dd_replay_t *rp = NULL;
    char err[1024] = "", aerr[1024] = "";
    uint64_t findings;
    int rc, arc, complete;

    dd_signals_install();
    if (dd_replay_route_unknown(conf, opts)) return DD_EXIT_USAGE;
    rp = calloc(1, sizeof(*rp));
    if (!rp) {
        fprintf(stderr, "dedupd replay: out of memory\n");
        return DD_EXIT_FAIL;
    }
    rp->args = opts;
    rp->conf = conf;
    rc = dd_replay_setup(rp, err, sizeof(err));
    if (!rc) rc = dd_replay_consume(rp, err, sizeof(err));
    arc = dd_replay_apply_finish(rp, aerr, sizeof(aerr));
    if (!rc && arc) {
        rc = arc;
        snprintf(err, sizeof(err), "%s", aerr);
    }
    complete = !atomic_load(&dd_stop_requested) && rp->parts_left == 0;
    if (!rc) rc = dd_replay_report(rp, complete, err, sizeof(err));
    if (!rc) dd_replay_print_summary(rp, complete);
    if (rc)
        dd_log(DD_LOG_ERROR, "dedupd replay: %s", err);
    else if (!complete)
        dd_log(DD_LOG_WARN, "dedupd replay: interrupted by %s; the report covers what was read.",
               dd_signal_name(atomic_load(&dd_stop_requested)));
    findings = rc ? 0 : dd_replay_findings(rp);
    dd_replay_destroy(rp);
    if (rc || !complete) return DD_EXIT_FAIL;
    return findings && ((dd_replay_args_t *)opts)->fail_on_findings ? DD_EXIT_FINDINGS : DD_EXIT_OK;
}

const dd_cmd_t dd_cmd_replay = {
    .name = "replay",
    .args = "-c FILE --from POS [--to POS] [options]",
    .summary = "reconcile the database with a topic",
    .help =
        "usage: dedupd replay -c FILE --from {earliest|OFFSET|TIME} [--to {latest|OFFSET|TIME}]\n"
        "                     [--route NAME] [--topic T]... [--partitions 0,2,4-7]\n"
        "                     [--apply]\n"
        "                     [--report FILE] [--format json|csv] [--summary FILE]\n"
        "                     [--orphans] [--fail-on-findings] [--all-consumed]\n"
        "\n"
        "Reads [--from, --to) of each partition (assign, no group, no commits) and\n"
        "compares every message's business key and request hash with the dedup table.\n"
        "A key without a row whose message the live group has not consumed yet (at or\n"
        "past its committed offset) is pending, not missing.\n"
        "\n"
        "Options:\n"
        "  -c, --config FILE    configuration file (libconfig)\n"
        "  --from POS           required: earliest, an OFFSET for every partition, or a\n"
        "                       TIME: ISO-8601 with a zone (2026-11-29T10:00:00Z) or back\n"
        "                       from now (-2h, -30m)\n"
        "  --to POS             the end, exclusive: latest (the default: the end offsets\n"
        "                       when replay starts), an OFFSET or a TIME\n"
        "  --route NAME         read the topics of the route NAME only (routes[].name; by\n"
        "                       default every route's, each message judged by its\n"
        "                       topic's route)\n"
        "  --topic T            a topic to read (repeatable, or comma separated; default:\n"
        "                       the routes' topics, kafka.topics without routes)\n"
        "  --partitions LIST    partitions to read, numbers and ranges (default: all)\n"
        "  --apply              run missing keys (and failed ones when\n"
        "                       dedup.retry_failed) through the claim + handler\n"
        "                       transaction; report-only without it. A route whose\n"
        "                       handler is in external mode is reported only (refused\n"
        "                       with --route naming it)\n"
        "  --report FILE        write the report to FILE instead of stdout\n"
        "  --format FORMAT      json (the default) or csv (a header and one row per\n"
        "                       entry, nothing else)\n"
        "  --summary FILE       also write the summary (JSON) to FILE; it always goes to\n"
        "                       stderr as a table\n"
        "  --orphans            also list dedup rows first seen in the range whose key is\n"
        "                       not in it\n"
        "  --fail-on-findings   exit 3 when keys are missing, conflicting or failed (after\n"
        "                       --apply: not repaired), in another shard (wrong_shard),\n"
        "                       or copies conflict\n"
        "  --all-consumed       judge every message as consumed by the live group: a key\n"
        "                       without a row is missing, never pending (after a group\n"
        "                       reset, or to rebuild another database from the topic)\n"
        "  -h, --help           this text\n"
        "\n"
        "Exit status:\n"
        "  0  the report was written (with --fail-on-findings: and it has no findings)\n"
        "  1  an error, or interrupted (the report covers what was read)\n"
        "  2  usage error, an empty or inverted range included, or no route of that\n"
        "     name\n"
        "  3  --fail-on-findings, and the report has findings\n",
    .flags = DD_CMD_CONFIG,
    .opts_size = sizeof(dd_replay_args_t),
    .parse = dd_replay_args_parse,
    .run = dd_replay_cmd_run,
    .release = dd_replay_release,
};
