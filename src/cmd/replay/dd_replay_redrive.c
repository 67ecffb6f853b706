/*
 * `dedupd redrive` (docs/REPLAY.md, "Redrive"): dead letters back through
 * the claim path once their cause is fixed (a handler bug, a missing
 * grant). A dead letter carries its message's key, payload and headers,
 * and dedupd.* headers naming the source topic, partition and offset and
 * why it was dead-lettered (dd_dlq.h); so redrive is replay over the
 * dead-letter topic, each letter judged by the route whose dead letters
 * go there: a key without a row goes through the lane's claim + handler
 * transaction, a key since applied is a duplicate, a conflict stays a
 * conflict, a failed (rejected) row is tried again only as
 * dedup.retry_failed says (or --retry-failed). Nothing is dead-lettered
 * again: the letters stay where they are, and the report says what became
 * of each (dd_replay_entries.c).
 *
 * A letter is trusted no further than its route would have written it
 * (dd_replay_letter.c), and progress is the offsets of a consumer group of
 * its own on the dead-letter topic (<kafka.group>.redrive), committed only
 * past letters whose outcome is committed in the database and never past
 * one a filter left out (dd_replay_drive.c). A redrive killed and started
 * again goes on from there; what it redid between the last commit and the
 * kill is found applied by the claim, so nothing is applied twice.
 *
 * This file is the command: its options, each parsed strictly, and its
 * run.
 */
#include "dd_replay_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_log.h"

/* ---- the command line ---- */

static int dd_redrive_usage(const char *fmt, const char *opt, const char *arg)
{
    fprintf(stderr, "dedupd redrive: ");
    fprintf(stderr, fmt, opt, arg);
    fputc('\n', stderr);
    return DD_EXIT_USAGE;
}

/* --reason LIST: reasons by name, comma separated, none empty. */
static int dd_redrive_reasons(dd_redrive_args_t *rd, const char *list)
{
    const char *p = list;

    for (;;) {
        size_t len = strcspn(p, ",");
        int bit = -1;
        for (int i = 0; i < DD_REASON_CNT && bit < 0; i++) {
            const char *name = dd_reason2str((dd_reason_t)i);
            if (strlen(name) == len && !strncmp(name, p, len)) bit = i;
        }
        if (bit < 0)
            return dd_redrive_usage("%s '%s': expected dead-letter reasons, comma separated "
                                    "(dedupd --help-reasons lists them)",
                                    "--reason", list);
        rd->filter.reasons |= 1u << bit;
        if (!p[len]) return 0;
        p += len + 1;
    }
}

static int dd_redrive_time(const char *opt, const char *s, int64_t now, int64_t *ms)
{
    dd_replay_pos_t pos;
    char err[400];

    if (dd_replay_pos_parse(s, now, &pos, err, sizeof(err)) || pos.kind != DD_REPLAY_POS_TIME)
        return dd_redrive_usage("%s '%s': expected an ISO-8601 time with a zone or a duration "
                                "back from now (-2h)",
                                opt, s);
    *ms = pos.value;
    return 0;
}

static int dd_redrive_number(const char *opt, const char *s, size_t len, int64_t max, int64_t *out)
{
    char arg[64];

    if (!dd_redrive_number_parse(s, len, max, out)) return 0;
    snprintf(arg, sizeof(arg), "%.*s", (int)(len < 40 ? len : 40), s);
    fprintf(stderr, "dedupd redrive: %s '%s': expected a whole number from 0 to %lld\n", opt, arg,
            (long long)max);
    return DD_EXIT_USAGE;
}

/* --source-offsets A or A-B, A <= B. */
static int dd_redrive_offsets(dd_redrive_args_t *rd, const char *s)
{
    const char *dash = strchr(s, '-');
    size_t n = dash ? (size_t)(dash - s) : strlen(s);
    int64_t a, b;

    if (dd_redrive_number("--source-offsets", s, n, INT64_MAX, &a) ||
        dd_redrive_number("--source-offsets", dash ? dash + 1 : s, dash ? strlen(dash + 1) : n,
                          INT64_MAX, &b))
        return DD_EXIT_USAGE;
    if (b < a)
        return dd_redrive_usage("%s '%s': the range ends before it starts", "--source-offsets", s);
    rd->filter.src_lo = a;
    rd->filter.src_hi = b;
    return 0;
}

/* --rate N: dead letters per second, a plain decimal number above 0. */
static int dd_redrive_rate(dd_redrive_args_t *rd, const char *s)
{
    char *end;

    errno = 0;
    rd->rate = strtod(s, &end);
    if (s[0] && strspn(s, "0123456789.") == strlen(s) && !*end && !errno && isfinite(rd->rate) &&
        rd->rate > 0 && rd->rate <= 1e6)
        return 0;
    return dd_redrive_usage("%s '%s': expected dead letters per second, a number above 0 and at "
                            "most 1000000",
                            "--rate", s);
}

static int dd_redrive_set(void *opts, int c, char *arg)
{
    dd_redrive_args_t *rd = opts;
    int64_t now = rd->base.now_ms, n;
    char err[512];

    switch (c) {
    case 'g':
        if (arg[0] && strlen(arg) < sizeof(rd->group)) {
            snprintf(rd->group, sizeof(rd->group), "%s", arg);
            return 0;
        }
        return dd_redrive_usage("%s '%.40s': expected a group name of 1 to 255 bytes", "--group",
                                arg);
    case 'f':
    case 't':
        if (dd_replay_pos_parse(arg, now, c == 'f' ? &rd->base.from : &rd->base.to, err,
                                sizeof(err)))
            return dd_redrive_usage("%s%s", "", err);
        rd->have_from |= c == 'f';
        return 0;
    case 'W':
        return dd_redrive_reasons(rd, arg);
    case 's':
        return dd_redrive_time("--since", arg, now, &rd->filter.since_ms);
    case 'u':
        return dd_redrive_time("--until", arg, now, &rd->filter.until_ms);
    case 'P':
        if (dd_redrive_number("--source-partition", arg, strlen(arg), INT32_MAX, &n))
            return DD_EXIT_USAGE;
        rd->filter.src_part = (int32_t)n;
        return 0;
    case 'O':
        return dd_redrive_offsets(rd, arg);
    case 'L':
        return dd_redrive_rate(rd, arg);
    case 'F':
        if (!strcmp(arg, "json") || !strcmp(arg, "csv")) {
            rd->base.csv = arg[0] == 'c';
            return 0;
        }
        return dd_redrive_usage("%s must be json or csv, not '%s'", "--format", arg);
    default:
        return DD_EXIT_USAGE;
    }
}

static void dd_redrive_init(void *opts)
{
    dd_redrive_args_t *rd = opts;

    dd_replay_args_init(&rd->base);
    rd->base.from.kind = DD_REPLAY_POS_EARLIEST;
    rd->filter.since_ms = rd->filter.until_ms = rd->filter.src_lo = rd->filter.src_hi = -1;
    rd->filter.src_part = -1;
}

static int dd_redrive_check(void *opts, int argc, char **argv)
{
    dd_redrive_args_t *rd = opts;
    char err[512];

    if (argc > 0) return dd_redrive_usage("%s'%s': unexpected argument", "", argv[0]);
    if (!rd->dlq || !rd->dlq[0])
        return dd_redrive_usage("%s%s", "--from-dlq TOPIC is required (see dedupd redrive --help)",
                                "");
    if (dd_replay_range_check(&rd->base.from, &rd->base.to, err, sizeof(err)) != DD_OK)
        return dd_redrive_usage("%s%s", "", err);
    if (rd->filter.since_ms >= 0 && rd->filter.until_ms >= 0 &&
        rd->filter.until_ms <= rd->filter.since_ms)
        return dd_redrive_usage("%s%s",
                                "--until is not after --since: ", "no dead letter can pass both");
    return 0;
}

#define DD_REDRIVE_STR(name, arg, field, help) DD_CMD_STR(name, arg, dd_redrive_args_t, field, help)
#define DD_REDRIVE_FLAG(name, field, help) DD_CMD_FLAG(name, dd_redrive_args_t, field, help)

static const dd_cmd_opt_t dd_redrive_opts[] = {
    DD_REDRIVE_STR("from-dlq", "TOPIC", dlq,
                   "required: the dead-letter topic to read (a route's\n"
                   "dlq.topic, or <topic>.dlq of a topic a route consumes)"),
    DD_CMD_SET("group", "NAME", 'g',
               "the consumer group keeping redrive's progress (default:\n"
               "kafka.group with .redrive appended)"),
    DD_CMD_SET("from", "POS", 'f',
               "start there (earliest, an OFFSET or a TIME, as replay's)\n"
               "instead of where the group left off"),
    DD_CMD_SET("to", "POS", 't',
               "stop there, exclusive (default: the end offsets when\n"
               "redrive starts)"),
    DD_CMD_SET("reason", "LIST", 'W',
               "only dead letters of these reasons (comma separated:\n"
               "rejected,retries_exhausted,...)"),
    DD_CMD_SET("since", "TIME", 's',
               "only dead letters with a timestamp at or after TIME (the\n"
               "original message's; ISO-8601 with a zone, or back from\n"
               "now: -2h)"),
    DD_CMD_SET("until", "TIME", 'u', "only dead letters with a timestamp before TIME"),
    DD_REDRIVE_STR("key", "GLOB", filter.key_glob,
                   "only dead letters whose business key, rendered from\n"
                   "the payload, matches GLOB (fnmatch: pay:m1:*)"),
    DD_REDRIVE_STR("source-topic", "T", filter.src_topic,
                   "only dead letters of messages of topic T"),
    DD_CMD_SET("source-partition", "N", 'P', "only dead letters of messages of partition N"),
    DD_CMD_SET("source-offsets", "A[-B]", 'O', "only dead letters of messages at offsets A to B"),
    DD_CMD_SET("rate", "N", 'L', "at most N dead letters per second (default: no limit)"),
    DD_REDRIVE_FLAG("dry-run", dry_run, "judge and report only: nothing is applied or committed"),
    DD_REDRIVE_FLAG("retry-failed", retry_failed,
                    "try failed (rejected) keys again even where\n"
                    "dedup.retry_failed is false"),
    DD_REDRIVE_STR("report", "FILE", base.report,
                   "write the report (an entry per letter) to FILE instead\n"
                   "of stdout"),
    DD_CMD_SET("format", "FORMAT", 'F', "json (the default) or csv"),
    DD_REDRIVE_STR("summary", "FILE", base.summary,
                   "also write the summary (JSON) to FILE; it always goes to\n"
                   "stderr as a table"),
    DD_REDRIVE_FLAG("fail-on-findings", base.fail_on_findings,
                    "exit 3 when letters are refused, conflicting, left or\n"
                    "failed (with --dry-run: would run)"),
    DD_CMD_OPT_END,
};

/* What the configuration makes of the command line: --from-dlq must be a
 * dead-letter topic of a route, --source-topic a topic whose dead letters
 * go there. Returns 0 or DD_EXIT_USAGE (logged). */
static int dd_redrive_topics_check(const dd_conf_t *conf, const dd_redrive_args_t *rd)
{
    const char *t = rd->filter.src_topic;
    char want[512];
    int r, other;

    if (dd_conf_dlq_route(conf, rd->dlq) < 0) {
        dd_log(DD_LOG_ERROR,
               "dedupd redrive: --from-dlq %s is not a dead-letter topic of %s (a route's "
               "dlq.topic, or <topic>.dlq of a topic a route consumes): nothing was read",
               rd->dlq, conf->path);
        return DD_EXIT_USAGE;
    }
    if (!t) return 0;
    r = dd_conf_route_find(conf, t, &other);
    if (r >= 0 && other < 0 && dd_conf_dlq_topic(&conf->routes[r], t, want, sizeof(want)) &&
        !strcmp(want, rd->dlq))
        return 0;
    dd_log(DD_LOG_ERROR,
           "dedupd redrive: --source-topic %s: no dead letter of it goes to %s: nothing was read",
           t, rd->dlq);
    return DD_EXIT_USAGE;
}

/* Where the report goes, opened before anything is read: a report that
 * cannot be written is known before letters are applied. */
static FILE *dd_redrive_open_report(const dd_redrive_args_t *rd)
{
    FILE *out = rd->base.report ? fopen(rd->base.report, "w") : stdout;

    if (!out)
        dd_log(DD_LOG_ERROR, "dedupd redrive: cannot write %s: %s", rd->base.report,
               strerror(errno));
    return out;
}

/* The exit code of a run that ended with rc (complete: the range read to
 * its end). */
static int dd_redrive_exit(const dd_replay_t *rp, int rc, int complete)
{
    if (rc || !complete) return DD_EXIT_FAIL;
    if (rp->rs->ent.cnt[DD_RO_APPLY_FAILED]) return DD_EXIT_APPLY_FAILED;
    if (rp->args->fail_on_findings && dd_redrive_findings(rp)) return DD_EXIT_FINDINGS;
    return DD_EXIT_OK;
}

/* Setup, the letters, the end (dd_redrive_finish) and the report, which
 * is written whatever happened before it. */
static int dd_redrive_go(dd_replay_t *rp, FILE *out)
{
    char err[1024] = "", ferr[1024] = "";
    int rc, frc, complete;

    if ((rc = dd_replay_setup(rp, err, sizeof(err))))
        snprintf(rp->rs->error, sizeof(rp->rs->error), "%s", err);
    if (!rc) rc = dd_redrive_consume(rp, err, sizeof(err));
    frc = dd_redrive_finish(rp, ferr, sizeof(ferr));
    if (!rc && frc) {
        rc = frc;
        snprintf(err, sizeof(err), "%s", ferr);
    }
    complete = !rc && !atomic_load(&dd_stop_requested) && rp->parts_left == 0;
    if (rc) dd_log(DD_LOG_ERROR, "dedupd redrive: %s", err);
    if ((frc = dd_redrive_report(rp, out, complete, ferr, sizeof(ferr)))) {
        dd_log(DD_LOG_ERROR, "dedupd redrive: %s", ferr);
        rc = rc ? rc : frc;
    } else {
        dd_redrive_print_summary(rp, complete);
    }
    if (!rc && !complete)
        dd_log(DD_LOG_WARN,
               "dedupd redrive: interrupted by %s; the report covers what was read, and the group "
               "%s has committed the letters that have their outcome: run it again to go on.",
               dd_signal_name(atomic_load(&dd_stop_requested)), rp->rd->group);
    return dd_redrive_exit(rp, rc, complete);
}

static int dd_redrive_cmd_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    dd_redrive_args_t *rd = opts;
    dd_redrive_run_t rs = {0};
    dd_replay_t *rp = NULL;
    FILE *out = NULL;
    int code = DD_EXIT_FAIL;

    dd_signals_install();
    if (!rd->group[0] && snprintf(rd->group, sizeof(rd->group), "%s.redrive", conf->kafka.group) >=
                             (int)sizeof(rd->group)) {
        dd_log(DD_LOG_ERROR, "dedupd redrive: kafka.group is too long for a group of its own: "
                             "name one with --group");
        return DD_EXIT_USAGE;
    }
    if ((code = dd_redrive_topics_check(conf, rd))) return code;
    /* --retry-failed: the configuration was loaded for this command alone,
     * and the claim reads retry_failed from it. */
    for (int r = 0; rd->retry_failed && r < conf->route_cnt; r++)
        ((dd_conf_t *)conf)->routes[r].dedup.retry_failed = 1;
    rd->base.apply = !rd->dry_run;
    rd->base.all_consumed = 1; /* a letter's key without a row is missing, never pending */
    if (!(out = dd_redrive_open_report(rd))) return DD_EXIT_FAIL;
    if (!(rs.ent.spill = tmpfile()) || !(rp = calloc(1, sizeof(*rp)))) {
        dd_log(DD_LOG_ERROR, "dedupd redrive: %s", rp ? strerror(errno) : "out of memory");
        if (rd->base.report) fclose(out);
        dd_redrive_run_release(&rs);
        return DD_EXIT_FAIL;
    }
    rp->args = &rd->base;
    rp->rd = rd;
    rp->rs = &rs;
    rp->hooks = &dd_redrive_hooks;
    rp->conf = conf;
    code = dd_redrive_go(rp, out);
    dd_replay_destroy(rp);
    dd_redrive_run_release(&rs);
    return code;
}

const dd_cmd_t dd_cmd_redrive = {
    .name = "redrive",
    .args = "-c FILE --from-dlq TOPIC [options]",
    .summary = "run dead letters through the claim path again",
    .usage = "usage: dedupd redrive -c FILE --from-dlq TOPIC [--group NAME]\n"
             "                      [--from POS] [--to POS] [--reason LIST]\n"
             "                      [--since TIME] [--until TIME] [--key GLOB]\n"
             "                      [--source-topic T] [--source-partition N]\n"
             "                      [--source-offsets A[-B]] [--rate N] [--dry-run]\n"
             "                      [--retry-failed] [--report FILE] [--format json|csv]\n"
             "                      [--summary FILE] [--fail-on-findings]\n"
             "\n"
             "Reads the dead-letter topic TOPIC from where its group left off to its end\n"
             "when redrive starts, and runs each dead letter that passes the filters through\n"
             "the claim + handler transaction of the route whose dead letters go to TOPIC,\n"
             "when its headers say it came from a topic of that route: a key without a row\n"
             "is applied, a key since applied is a duplicate, a conflict stays a conflict, a\n"
             "failed (rejected) key is tried again only as dedup.retry_failed says. A letter\n"
             "that route would not have written there, or with malformed headers, is\n"
             "refused. Nothing is dead-lettered again; the report has an entry for every\n"
             "letter read. The group commits past the letters whose outcome is committed,\n"
             "never past one a filter left out, so a redrive killed and started again goes\n"
             "on where it was without applying anything twice, and a later redrive reads\n"
             "what a filtered one left.\n",
    .exits = "  0  the range was redriven (or judged, with --dry-run) and the report written\n"
             "  1  an error, or interrupted (the report covers what was read; run it again to\n"
             "     go on)\n"
             "  2  usage error, --from-dlq not a dead-letter topic included\n"
             "  3  --fail-on-findings, and the complete report has findings\n"
             "  4  letters were run and not applied (the handler rejected them again, a\n"
             "     conflict at the claim, retries exhausted)\n",
    .flags = DD_CMD_CONFIG,
    .opts_size = sizeof(dd_redrive_args_t),
    .opts = dd_redrive_opts,
    .init = dd_redrive_init,
    .set = dd_redrive_set,
    .check = dd_redrive_check,
    .run = dd_redrive_cmd_run,
};
