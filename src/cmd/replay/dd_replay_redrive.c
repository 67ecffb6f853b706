/*
 * `dedupd redrive` (docs/REPLAY.md, "Redrive"): dead letters back through
 * the claim path once their cause is fixed (a handler bug, a missing
 * grant). A dead letter carries its message's key, payload and headers,
 * and dedupd.* headers naming the source topic, partition and offset and
 * why it was dead-lettered (dd_dlq.h); so redrive is replay over the
 * dead-letter topic, each letter judged by its source topic's route: a
 * key without a row goes through the lane's claim + handler transaction, a
 * key since applied is a duplicate, a conflict stays a conflict, a failed
 * (rejected) row is tried again only as dedup.retry_failed says (or
 * --retry-failed). Nothing is dead-lettered again: the letters stay where
 * they are.
 *
 * Progress is the offsets of a consumer group of its own on the
 * dead-letter topic (<kafka.group>.redrive), committed only once every
 * letter before them has its outcome committed in the database. A redrive
 * killed and started again goes on from there; what it redid between the
 * last commit and the kill is found applied by the claim, so nothing is
 * applied twice.
 */
#include "dd_replay_int.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_log.h"

#define DD_REDRIVE_TICK_MS 1000 /* progress is committed at most this often */

/* The value of header name of rkm as a string in buf (cut to fit); 0 when
 * the message has no such header. */
static int dd_redrive_header(rd_kafka_message_t *rkm, const char *name, char *buf, size_t size)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *val = NULL;
    size_t len = 0;

    buf[0] = '\0';
    if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(hdrs, name, &val, &len) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    if (len >= size) len = size - 1;
    if (val) memcpy(buf, val, len);
    buf[len] = '\0';
    return 1;
}

static int dd_redrive_reason_bit(const char *name)
{
    for (int i = 0; i < DD_REASON_CNT; i++)
        if (!strcmp(name, dd_reason2str((dd_reason_t)i))) return i;
    return -1;
}

/* 1 when the letter passes every filter of the command line. */
static int dd_redrive_wanted(const dd_redrive_args_t *rd, rd_kafka_message_t *rkm)
{
    char v[512];
    int64_t ts = rd_kafka_message_timestamp(rkm, NULL);
    int bit;

    if (rd->reasons) {
        bit = dd_redrive_header(rkm, "dedupd.reason", v, sizeof(v)) ? dd_redrive_reason_bit(v) : -1;
        if (bit < 0 || !(rd->reasons & (1u << bit))) return 0;
    }
    if (rd->src_topic &&
        (!dd_redrive_header(rkm, "dedupd.topic", v, sizeof(v)) || strcmp(v, rd->src_topic)))
        return 0;
    if (rd->src_part >= 0 &&
        (!dd_redrive_header(rkm, "dedupd.partition", v, sizeof(v)) || atol(v) != rd->src_part))
        return 0;
    if (rd->src_lo >= 0) {
        long long off = dd_redrive_header(rkm, "dedupd.offset", v, sizeof(v)) ? atoll(v) : -1;
        if (off < rd->src_lo || off > rd->src_hi) return 0;
    }
    if (rd->key_glob &&
        (!dd_redrive_header(rkm, "dedupd.biz_key", v, sizeof(v)) || fnmatch(rd->key_glob, v, 0)))
        return 0;
    if (rd->since_ms >= 0 && ts < rd->since_ms) return 0;
    if (rd->until_ms >= 0 && ts >= rd->until_ms) return 0;
    return 1;
}

/* The route of a letter's source topic (dedupd.topic), or -1 with why. */
static int dd_redrive_route(const dd_replay_t *rp, rd_kafka_message_t *rkm, char *why,
                            size_t why_size)
{
    char topic[300];
    int other = -1, route;

    if (!dd_redrive_header(rkm, "dedupd.topic", topic, sizeof(topic))) {
        if (!rp->conf->has_routes) return 0;
        snprintf(why, why_size, "it has no dedupd.topic header naming its source topic");
        return -1;
    }
    if (!rp->conf->has_routes) return 0;
    route = dd_conf_route_find(rp->conf, topic, &other);
    if (route < 0)
        snprintf(why, why_size, "no route of %s has its source topic %s", rp->conf->path, topic);
    else if (other >= 0)
        snprintf(why, why_size, "two routes match its source topic %s", topic);
    return other >= 0 ? -1 : route;
}

/* Waits for the rate's next slot. */
static void dd_redrive_pace(dd_redrive_args_t *rd)
{
    int64_t now = dd_now_us(), gap;

    if (rd->rate <= 0) return;
    gap = (int64_t)(1e6 / rd->rate);
    if (rd->next_us > now) {
        dd_sleep_ms((int)((rd->next_us - now + 999) / 1000), &dd_stop_requested);
        now = rd->next_us;
    }
    rd->next_us = now + gap;
}

/* One dead letter of the range: filtered, paced, its route found, judged. */
static int dd_replay_redrive_message(dd_replay_t *rp, rd_kafka_message_t *rkm, char *errstr,
                                     size_t errstr_size)
{
    dd_redrive_args_t *rd = rp->rd;
    char why[400] = "", v[32];
    int route;

    if (!dd_redrive_wanted(rd, rkm)) {
        rp->sum.filtered++;
        rd_kafka_message_destroy(rkm);
        return DD_OK;
    }
    route = dd_redrive_route(rp, rkm, why, sizeof(why));
    if (route >= 0 && dd_redrive_header(rkm, "dedupd.truncated", v, sizeof(v)))
        snprintf(why, sizeof(why), "its payload was truncated to fit (original length %s)", v);
    else if (route >= 0 && !rkm->payload)
        snprintf(why, sizeof(why), "it has no payload (sent bare, or a tombstone)");
    if (why[0]) {
        rp->sum.unredrivable++;
        dd_log_msg(DD_LOG_WARN, rd_kafka_topic_name(rkm->rkt), rkm->partition, rkm->offset, NULL,
                   "Dead letter not redriven: %s.", why);
        rd_kafka_message_destroy(rkm);
        return DD_OK;
    }
    dd_redrive_pace(rd);
    return dd_replay_message(rp, route, rkm, errstr, errstr_size);
}

/* Where redrive starts each partition: --from, or where its group is. */
static void dd_replay_redrive_resume(dd_replay_t *rp)
{
    rp->total = 0;
    rp->parts_left = 0;
    for (int i = 0; i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        if (!rp->rd->have_from && pt->group_committed > pt->start)
            pt->start = pt->group_committed < pt->end ? pt->group_committed : pt->end;
        pt->pos = pt->start;
        pt->done = pt->start >= pt->end;
        rp->parts_left += !pt->done;
        rp->total += pt->end - pt->start;
        dd_log(DD_LOG_INFO, "Redriving %s [%d] offsets %lld to %lld (group %s at %lld).", pt->topic,
               (int)pt->partition, (long long)pt->start, (long long)pt->end, rp->rd->group,
               (long long)pt->group_committed);
    }
}

/* Commits each partition's position (every letter before it has its
 * outcome) for the redrive group. */
static int dd_redrive_commit(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(rp->part_cnt);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;

    for (int i = 0; i < rp->part_cnt; i++)
        if (rp->parts[i].pos > rp->parts[i].group_committed)
            rd_kafka_topic_partition_list_add(list, rp->parts[i].topic, rp->parts[i].partition)
                ->offset = rp->parts[i].pos;
    if (list->cnt) err = rd_kafka_commit(rp->rk, list, 0);
    for (int i = 0; !err && i < list->cnt; i++) {
        dd_replay_part_t *pt =
            dd_replay_part_find(rp, list->elems[i].topic, list->elems[i].partition);
        if (pt) pt->group_committed = list->elems[i].offset;
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (err)
        dd_errstr_set(errstr, errstr_size, "committing the progress of group %s: %s", rp->rd->group,
                      rd_kafka_err2str(err));
    return err ? DD_ERR_FATAL : DD_OK;
}

/* At most each second (final: now): judges the batch, waits for the lane's
 * outcomes, then commits the group's position past them. */
static int dd_replay_redrive_tick(dd_replay_t *rp, int final, char *errstr, size_t errstr_size)
{
    dd_redrive_args_t *rd = rp->rd;
    int64_t now = dd_now_ms();
    int rc;

    if (rd->dry_run || (!final && now - rd->flushed_ms < DD_REDRIVE_TICK_MS)) return DD_OK;
    rd->flushed_ms = now;
    rc = dd_replay_flush(rp, errstr, errstr_size);
    while (!rc && rp->pending > 0 && !atomic_load(&dd_stop_requested))
        rc = dd_replay_apply_drain(rp, 100, errstr, errstr_size);
    if (rc || rp->pending > 0) return rc;
    return dd_redrive_commit(rp, errstr, errstr_size);
}

/* How redrive plugs into replay's run (dd_replay_run.c). */
static const dd_replay_hooks_t dd_redrive_hooks = {
    .resume = dd_replay_redrive_resume,
    .message = dd_replay_redrive_message,
    .tick = dd_replay_redrive_tick,
};

/* ---- the command line ---- */

static int dd_redrive_reasons(dd_redrive_args_t *rd, char *list)
{
    for (char *save = NULL, *r = strtok_r(list, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
        int bit = dd_redrive_reason_bit(r);
        if (bit < 0) {
            fprintf(stderr,
                    "dedupd redrive: --reason %s: not a dead-letter reason (see "
                    "dedupd_dead_letters_total's reason label)\n",
                    r);
            return 2;
        }
        rd->reasons |= 1u << bit;
    }
    return 0;
}

static int dd_redrive_time(const char *opt, const char *s, int64_t now, int64_t *ms)
{
    dd_replay_pos_t pos;
    char err[400];

    if (dd_replay_pos_parse(s, now, &pos, err, sizeof(err)) || pos.kind != DD_REPLAY_POS_TIME) {
        fprintf(stderr,
                "dedupd redrive: %s '%s': expected an ISO-8601 time with a zone or a "
                "duration back from now (-2h)\n",
                opt, s);
        return 2;
    }
    *ms = pos.value;
    return 0;
}

static int dd_redrive_number(const char *opt, const char *s, long long lo, long long *out)
{
    char *end;

    errno = 0;
    *out = strtoll(s, &end, 10);
    if (errno || end == s || *end || *out < lo) {
        fprintf(stderr, "dedupd redrive: %s '%s': expected a whole number >= %lld\n", opt, s, lo);
        return 2;
    }
    return 0;
}

static int dd_redrive_offsets(dd_redrive_args_t *rd, const char *s)
{
    char lo[32];
    const char *dash = strchr(s, '-');
    long long a, b;
    size_t n = dash ? (size_t)(dash - s) : strlen(s);

    snprintf(lo, sizeof(lo), "%.*s", (int)(n < sizeof(lo) ? n : sizeof(lo) - 1), s);
    if (dd_redrive_number("--source-offsets", lo, 0, &a) ||
        dd_redrive_number("--source-offsets", dash ? dash + 1 : lo, a, &b))
        return 2;
    rd->src_lo = a;
    rd->src_hi = b;
    return 0;
}

static int dd_redrive_set(void *opts, int c, char *arg)
{
    dd_redrive_args_t *rd = opts;
    int64_t now = rd->base.now_ms;
    char err[512];
    long long n;

    switch (c) {
    case 'g':
        snprintf(rd->group, sizeof(rd->group), "%s", arg);
        return 0;
    case 'f':
    case 't':
        if (dd_replay_pos_parse(arg, now, c == 'f' ? &rd->base.from : &rd->base.to, err,
                                sizeof(err))) {
            fprintf(stderr, "dedupd redrive: %s\n", err);
            return 2;
        }
        rd->have_from |= c == 'f';
        return 0;
    case 'W':
        return dd_redrive_reasons(rd, arg);
    case 's':
        return dd_redrive_time("--since", arg, now, &rd->since_ms);
    case 'u':
        return dd_redrive_time("--until", arg, now, &rd->until_ms);
    case 'P':
        if (dd_redrive_number("--source-partition", arg, 0, &n)) return 2;
        rd->src_part = (int32_t)n;
        return 0;
    case 'O':
        return dd_redrive_offsets(rd, arg);
    case 'L':
        rd->rate = strtod(arg, NULL);
        if (rd->rate > 0) return 0;
        fprintf(stderr, "dedupd redrive: --rate '%s': expected dead letters per second > 0\n", arg);
        return 2;
    case 'F':
        if (!strcmp(arg, "json") || !strcmp(arg, "csv")) {
            rd->base.csv = arg[0] == 'c';
            return 0;
        }
        fprintf(stderr, "dedupd redrive: --format must be json or csv, not '%s'\n", arg);
        return 2;
    default:
        return 2;
    }
}

static void dd_redrive_init(void *opts)
{
    dd_redrive_args_t *rd = opts;

    dd_replay_args_init(&rd->base);
    rd->base.from.kind = DD_REPLAY_POS_EARLIEST;
    rd->since_ms = rd->until_ms = rd->src_lo = rd->src_hi = -1;
    rd->src_part = -1;
}

static int dd_redrive_check(void *opts, int argc, char **argv)
{
    dd_redrive_args_t *rd = opts;
    char err[512];

    if (argc > 0) {
        fprintf(stderr, "dedupd redrive: unexpected argument '%s'\n", argv[0]);
        return 2;
    }
    if (!rd->dlq) {
        fprintf(stderr, "dedupd redrive: --from-dlq TOPIC is required (see dedupd redrive "
                        "--help)\n");
        return 2;
    }
    if (dd_replay_range_check(&rd->base.from, &rd->base.to, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd redrive: %s\n", err);
        return 2;
    }
    return 0;
}

#define DD_REDRIVE_STR(name, arg, field, help) DD_CMD_STR(name, arg, dd_redrive_args_t, field, help)
#define DD_REDRIVE_FLAG(name, field, help) DD_CMD_FLAG(name, dd_redrive_args_t, field, help)

static const dd_cmd_opt_t dd_redrive_opts[] = {
    DD_REDRIVE_STR("from-dlq", "TOPIC", dlq, "required: the dead-letter topic to read"),
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
               "original message's timestamp; ISO-8601 with a zone, or\n"
               "back from now: -2h)"),
    DD_CMD_SET("until", "TIME", 'u', "only dead letters with a timestamp before TIME"),
    DD_REDRIVE_STR("key", "GLOB", key_glob,
                   "only dead letters whose business key matches GLOB\n"
                   "(fnmatch: pay:m1:*)"),
    DD_REDRIVE_STR("source-topic", "T", src_topic, "only dead letters of messages of topic T"),
    DD_CMD_SET("source-partition", "N", 'P', "only dead letters of messages of partition N"),
    DD_CMD_SET("source-offsets", "A[-B]", 'O', "only dead letters of messages at offsets A to B"),
    DD_CMD_SET("rate", "N", 'L', "at most N dead letters per second (default: no limit)"),
    DD_REDRIVE_FLAG("dry-run", dry_run, "judge and report only: nothing is applied or committed"),
    DD_REDRIVE_FLAG("retry-failed", retry_failed,
                    "try failed (rejected) keys again even where\n"
                    "dedup.retry_failed is false"),
    DD_REDRIVE_STR("report", "FILE", base.report,
                   "write the report (as replay's) to FILE instead of stdout"),
    DD_CMD_SET("format", "FORMAT", 'F', "json (the default) or csv"),
    DD_REDRIVE_STR("summary", "FILE", base.summary,
                   "also write the summary (JSON) to FILE; it always goes to\n"
                   "stderr as a table"),
    DD_CMD_OPT_END,
};

/* Setup, the letters, the lane's last outcomes, the last commit. */
static int dd_redrive_go(dd_replay_t *rp, int *complete, char *err, size_t err_size)
{
    char aerr[1024] = "";
    int rc = dd_replay_setup(rp, err, err_size), arc;

    if (!rc) rc = dd_replay_consume(rp, err, err_size);
    arc = dd_replay_apply_finish(rp, aerr, sizeof(aerr));
    if (!rc && arc) {
        rc = arc;
        snprintf(err, err_size, "%s", aerr);
    }
    *complete = !atomic_load(&dd_stop_requested) && rp->parts_left == 0;
    if (!rc && *complete && !rp->rd->dry_run && rp->pending == 0)
        rc = dd_redrive_commit(rp, err, err_size);
    if (!rc) rc = dd_replay_report(rp, *complete, err, err_size);
    return rc;
}

static int dd_redrive_cmd_run(const dd_cmd_ctx_t *ctx, void *opts)
{
    const dd_conf_t *conf = ctx->conf;
    dd_redrive_args_t *rd = opts;
    dd_replay_t *rp;
    char err[1024] = "";
    int rc, complete = 0;

    dd_signals_install();
    if (!rd->group[0]) snprintf(rd->group, sizeof(rd->group), "%s.redrive", conf->kafka.group);
    /* --retry-failed: the configuration was loaded for this command alone,
     * and the claim reads retry_failed from it. */
    for (int r = 0; rd->retry_failed && r < conf->route_cnt; r++)
        ((dd_conf_t *)conf)->routes[r].dedup.retry_failed = 1;
    rd->base.apply = !rd->dry_run;
    rd->base.all_consumed = 1; /* a letter's key without a row is missing, never pending */
    if (!(rp = calloc(1, sizeof(*rp)))) {
        fprintf(stderr, "dedupd redrive: out of memory\n");
        return DD_EXIT_FAIL;
    }
    rp->args = &rd->base;
    rp->rd = rd;
    rp->hooks = &dd_redrive_hooks;
    rp->conf = conf;
    rc = dd_redrive_go(rp, &complete, err, sizeof(err));
    if (!rc) dd_replay_print_summary(rp, complete);
    if (rc)
        dd_log(DD_LOG_ERROR, "dedupd redrive: %s", err);
    else if (!complete)
        dd_log(DD_LOG_WARN,
               "dedupd redrive: interrupted by %s; the group %s has committed the letters whose "
               "outcome is committed: run it again to go on.",
               dd_signal_name(atomic_load(&dd_stop_requested)), rd->group);
    dd_replay_destroy(rp);
    return rc || !complete ? DD_EXIT_FAIL : DD_EXIT_OK;
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
             "                      [--summary FILE]\n"
             "\n"
             "Reads the dead-letter topic TOPIC from where its group left off to its end\n"
             "when redrive starts, and runs each dead letter that passes the filters through\n"
             "the claim + handler transaction of its source topic's route: a key without a\n"
             "row is applied, a key since applied is a duplicate, a conflict stays a\n"
             "conflict, a failed (rejected) key is tried again only as dedup.retry_failed\n"
             "says. Nothing is dead-lettered again. The group commits past the letters\n"
             "whose outcome is committed, so a redrive killed and started again goes on\n"
             "where it was without applying anything twice.\n",
    .exits = "  0  the range was redriven (or judged, with --dry-run) and the report written\n"
             "  1  an error, or interrupted (run it again to go on)\n"
             "  2  usage error\n",
    .flags = DD_CMD_CONFIG,
    .opts_size = sizeof(dd_redrive_args_t),
    .opts = dd_redrive_opts,
    .init = dd_redrive_init,
    .set = dd_redrive_set,
    .check = dd_redrive_check,
    .run = dd_redrive_cmd_run,
};
