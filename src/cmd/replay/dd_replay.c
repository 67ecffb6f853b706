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

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_log.h"

static void dd_replay_release(void *opts)
{
    free(((dd_replay_args_t *)opts)->parts);
}

static int dd_replay_cmd_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    dd_replay_t *rp = NULL;
    char err[1024] = "", aerr[1024] = "";
    uint64_t findings;
    int rc, arc, complete;

    dd_signals_install();
    ((dd_replay_args_t *)opts)->route = ctx->route;
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
    .usage =
        "usage: dedupd replay -c FILE --from {earliest|OFFSET|TIME} [--to {latest|OFFSET|TIME}]\n"
        "                     [--route NAME] [--topic T]... [--partitions 0,2,4-7]\n"
        "                     [--apply]\n"
        "                     [--report FILE] [--format json|csv] [--summary FILE]\n"
        "                     [--orphans] [--fail-on-findings] [--all-consumed]\n"
        "\n"
        "Reads [--from, --to) of each partition (assign, no group, no commits) and\n"
        "compares every message's business key and request hash with the dedup table.\n"
        "A key without a row whose message the live group has not consumed yet (at or\n"
        "past its committed offset) is pending, not missing.\n",
    .exits = "  0  the report was written (with --fail-on-findings: and it has no findings)\n"
             "  1  an error, or interrupted (the report covers what was read)\n"
             "  2  usage error, an empty or inverted range included, or no route of that\n"
             "     name\n"
             "  3  --fail-on-findings, and the report has findings\n",
    .opts = dd_replay_args_opts,
    .route_help = "read the topics of the route NAME only (routes[].name; by\n"
                  "default every route's, each message judged by its\n"
                  "topic's route)",
    .flags = DD_CMD_CONFIG | DD_CMD_ROUTE,
    .opts_size = sizeof(dd_replay_args_t),
    .init = dd_replay_args_init,
    .set = dd_replay_args_set,
    .check = dd_replay_args_check,
    .run = dd_replay_cmd_run,
    .release = dd_replay_release,
};
