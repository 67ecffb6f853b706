/*
 * `dedupd replay` (see dd_replay.h and docs/REPLAY.md).
 *
 * Reconciliation needs an answer to "did every message of this topic range
 * reach the database, exactly as sent?" without disturbing the live
 * consumer: so replay reads with assign() under its own group id, never
 * commits, and judges each message with the pipeline's own parse, key and
 * hash rules (dd_parse.c) against the dedup table. --apply repairs by
 * pushing the missing keys through a lane (dd_lane.c), the same claim +
 * handler transaction as `dedupd run`, so a live consumer working on the
 * same keys at the same time cannot make anything happen twice.
 *
 * Memory stays bounded by the batch size, not by the range: what replay
 * remembers about each key (its first message, its status, the apply
 * outcome) lives in session TEMPORARY tables, which the report and the
 * --orphans anti-join read back at the end.
 */
#include "dd_replay.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_db.h"
#include "dd_grants.h"
#include "dd_handler.h"
#include "dd_hash.h"
#include "dd_item.h"
#include "dd_json.h"
#include "dd_key.h"
#include "dd_lane.h"
#include "dd_log.h"
#include "dd_migrate.h"
#include "dd_parse.h"
#include "dd_utf8.h"

#define DD_REPLAY_BATCH 500        /* messages judged per round of lookups */
#define DD_REPLAY_MAX_PENDING 2000 /* --apply: items handed to the lane, not yet back */
#define DD_REPLAY_TIMEOUT_MS 10000 /* metadata, watermarks, offsets_for_times */
#define DD_REPLAY_MAX_TOPICS 64

/* What replay says about a key (or, for bad and copy conflicts, a message).
 * Stored as numbers in the temporary tables. */
typedef enum {
    DD_RS_NONE = 0,
    DD_RS_APPLIED,    /* a row with the same hash, applied */
    DD_RS_MISSING,    /* no row */
    DD_RS_CONFLICT,   /* a row with another hash, or a copy unlike the first */
    DD_RS_FAILED,     /* a failed (rejected) row with the same hash */
    DD_RS_PROCESSING, /* a row in state 0 (a lease holder is on it) */
    DD_RS_BAD,        /* no key can be derived */
    DD_RS_CNT
} dd_replay_status_t;

static const char *const dd_replay_status_names[DD_RS_CNT] = {
    "none", "applied", "missing", "conflict", "failed", "processing", "bad"};

/* What --apply did with a key. */
typedef enum {
    DD_RA_NONE = 0,
    DD_RA_REPAIRED,        /* the handler ran and committed */
    DD_RA_ALREADY_APPLIED, /* the claim found it applied meanwhile (a live consumer) */
    DD_RA_FAILED,          /* conflict, rejected or retries exhausted */
    DD_RA_CNT
} dd_replay_apply_t;

static const char *const dd_replay_apply_names[DD_RA_CNT] = {"none", "repaired", "already_applied",
                                                             "failed"};

static const char *const dd_replay_row_names[3] = {"processing", "applied", "failed"};

typedef struct {
    const char *config;
    dd_replay_pos_t from, to;
    const char *topics[DD_REPLAY_MAX_TOPICS];
    int topic_cnt;
    int32_t *parts; /* --partitions, or NULL for all */
    int part_cnt;
    int apply, orphans, csv;
    const char *report;
} dd_replay_args_t;

/* One partition's range [start, end), fixed when replay starts. */
typedef struct {
    const char *topic;
    int32_t partition;
    int64_t low, high; /* watermarks at start */
    int64_t start, end;
    int64_t pos; /* next offset to read */
    int done;
    /* TIME bounds, checked on each message's timestamp as well: brokers (and
     * the mock cluster) that cannot look offsets up by time answer -1. */
    int64_t from_ts, to_ts; /* -1: none */
} dd_replay_part_t;

typedef struct {
    uint64_t messages, keys;
    uint64_t status[DD_RS_CNT]; /* keys by status; [DD_RS_BAD] counts messages */
    uint64_t bad[DD_REASON_CNT];
    uint64_t copy_conflicts; /* later copies whose hash differs from the first */
    uint64_t apply[DD_RA_CNT];
    uint64_t orphans;
} dd_replay_sum_t;

/* A distinct key of the current batch. */
typedef struct {
    dd_item_t *first; /* its first message in this batch */
    int seen;         /* already met earlier in the range */
    unsigned char first_hash[DD_HASH_LEN];
    int has_row, row_status;
    unsigned char row_hash[DD_HASH_LEN];
    char row_error[256];
} dd_replay_ukey_t;

typedef struct {
    dd_replay_args_t *args;
    dd_conf_t *conf;
    dd_key_tmpl_t *tmpl;
    dd_hash_spec_t *hspec;
    dd_json_doc_t *doc; /* the message being parsed */
    rd_kafka_t *rk;
    dd_db_t *db;
    dd_buf_t sql;

    dd_replay_part_t *parts;
    int part_cnt, parts_left;
    int64_t total, progress; /* offsets in the range / passed so far */

    dd_item_t *batch[DD_REPLAY_BATCH];
    dd_item_t *sorted[DD_REPLAY_BATCH];
    dd_replay_ukey_t uk[DD_REPLAY_BATCH];
    size_t ukidx[DD_REPLAY_BATCH];
    size_t n;

    /* --apply */
    dd_handler_t *h;
    dd_lane_shared_t sh;
    int sh_ready;
    dd_lane_t *lane;
    int64_t pending;
    char owner[128];

    dd_replay_sum_t sum;
    int64_t t0_ms, progress_ms;
    int tty;
} dd_replay_t;


/* ---- argument parsing ---- */

static int dd_replay_digits(const char **p, int n, int *out)
{
    int v = 0;

    for (int i = 0; i < n; i++, (*p)++) {
        if (!isdigit((unsigned char)**p)) return -1;
        v = v * 10 + (**p - '0');
    }
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil), so no time zone or locale is involved. */
static int64_t dd_replay_days(int y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int dd_replay_mdays(int y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : days[m - 1];
}

/* The zone designator: "Z" or "+HH:MM" / "-HH:MM" / "+HHMM" / "+HH".
 * Returns the offset east of UTC in minutes, or INT32_MIN. */
static int32_t dd_replay_zone(const char *p)
{
    int hh, mm = 0, sign;

    if (p[0] == 'Z' && p[1] == '\0') return 0;
    if (*p != '+' && *p != '-') return INT32_MIN;
    sign = *p++ == '-' ? -1 : 1;
    if (dd_replay_digits(&p, 2, &hh)) return INT32_MIN;
    if (*p == ':') p++;
    if (*p && dd_replay_digits(&p, 2, &mm)) return INT32_MIN;
    if (*p || hh > 23 || mm > 59) return INT32_MIN;
    return sign * (hh * 60 + mm);
}

/* YYYY-MM-DDTHH:MM[:SS[.fff]] and a zone. Returns 0 and *ms, or -1. */
static int dd_replay_time_parse(const char *s, int64_t *ms)
{
    const char *p = s;
    int y, mo, d, h, mi, sec = 0, frac = 0, scale = 1000;
    int32_t zone;

    if (dd_replay_digits(&p, 4, &y) || *p++ != '-' || dd_replay_digits(&p, 2, &mo) || *p++ != '-' ||
        dd_replay_digits(&p, 2, &d) || (*p != 'T' && *p != 't' && *p != ' '))
        return -1;
    p++;
    if (dd_replay_digits(&p, 2, &h) || *p++ != ':' || dd_replay_digits(&p, 2, &mi)) return -1;
    if (*p == ':') {
        p++;
        if (dd_replay_digits(&p, 2, &sec)) return -1;
        if (*p == '.' || *p == ',') {
            if (!isdigit((unsigned char)*++p)) return -1;
            for (; isdigit((unsigned char)*p); p++)
                if (scale > 1) frac = frac * 10 + (*p - '0'), scale /= 10;
            frac *= scale;
        }
    }
    if (mo < 1 || mo > 12 || d < 1 || d > dd_replay_mdays(y, mo) || h > 23 || mi > 59 || sec > 59 ||
        (zone = dd_replay_zone(p)) == INT32_MIN)
        return -1;
    *ms = ((dd_replay_days(y, mo, d) * 24 + h) * 60 + mi - zone) * 60000LL + sec * 1000LL + frac;
    return 0;
}

int dd_replay_pos_parse(const char *s, int64_t now_ms, dd_replay_pos_t *pos, char *errstr,
                        size_t errstr_size)
{
    int64_t ms;
    char *end;

    memset(pos, 0, sizeof(*pos));
    if (!strcmp(s, "earliest") || !strcmp(s, "latest")) {
        pos->kind = s[0] == 'e' ? DD_REPLAY_POS_EARLIEST : DD_REPLAY_POS_LATEST;
        return DD_OK;
    }
    if (s[0] == '-') {
        if (dd_conf_parse_duration_ms(s + 1, &ms) != 0 || ms <= 0) goto bad;
        pos->kind = DD_REPLAY_POS_TIME;
        pos->value = now_ms - ms;
        return DD_OK;
    }
    if (isdigit((unsigned char)s[0]) && strspn(s, "0123456789") == strlen(s)) {
        errno = 0;
        pos->value = strtoll(s, &end, 10);
        if (errno) goto bad;
        pos->kind = DD_REPLAY_POS_OFFSET;
        return DD_OK;
    }
    if (dd_replay_time_parse(s, &ms) == 0) {
        pos->kind = DD_REPLAY_POS_TIME;
        pos->value = ms;
        return DD_OK;
    }
bad:
    dd_errstr_set(errstr, errstr_size,
                  "'%s' is not earliest, latest, an offset, an ISO-8601 time with a zone "
                  "(2026-11-29T10:00:00Z) or a duration back from now (-2h, -30m)",
                  s);
    return DD_ERR_ARG;
}

/* ms since the epoch as ISO-8601 UTC, for messages. */
static void dd_replay_time_fmt(int64_t ms, char *out, size_t out_size)
{
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    char day[32];

    if (!gmtime_r(&secs, &tm) || !strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(out, out_size, "%lld ms", (long long)ms);
        return;
    }
    snprintf(out, out_size, "%s.%03dZ", day, (int)(ms - (int64_t)secs * 1000));
}

int dd_replay_range_check(const dd_replay_pos_t *from, const dd_replay_pos_t *to, char *errstr,
                          size_t errstr_size)
{
    char a[48], b[48];

    if (from->kind == DD_REPLAY_POS_LATEST) {
        dd_errstr_set(errstr, errstr_size,
                      "--from latest selects nothing: the range [--from, --to) cannot go past "
                      "the end offsets replay starts with");
        return DD_ERR_ARG;
    }
    if (to->kind == DD_REPLAY_POS_EARLIEST) {
        dd_errstr_set(errstr, errstr_size,
                      "--to earliest selects nothing: the range [--from, --to) ends before the "
                      "first message (--to is exclusive)");
        return DD_ERR_ARG;
    }
    if (from->kind != to->kind || to->value > from->value) return DD_OK;
    if (from->kind == DD_REPLAY_POS_OFFSET) {
        snprintf(a, sizeof(a), "%lld", (long long)from->value);
        snprintf(b, sizeof(b), "%lld", (long long)to->value);
    } else {
        dd_replay_time_fmt(from->value, a, sizeof(a));
        dd_replay_time_fmt(to->value, b, sizeof(b));
    }
    if (to->value == from->value)
        dd_errstr_set(errstr, errstr_size,
                      "--to %s is the same as --from: the range [--from, --to) is empty (--to is "
                      "exclusive)",
                      b);
    else
        dd_errstr_set(errstr, errstr_size,
                      "--to %s is before --from %s: the range [--from, --to) is inverted", b, a);
    return DD_ERR_ARG;
}

static int dd_replay_i32cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

    return x < y ? -1 : x > y;
}

/* One "N" or "N-M" item of a partition list. */
static int dd_replay_part_item(const char *s, size_t len, long *lo, long *hi)
{
    char buf[32], *end;

    if (len == 0 || len >= sizeof(buf)) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (!isdigit((unsigned char)buf[0])) return -1;
    *lo = *hi = strtol(buf, &end, 10);
    if (*end == '-' && isdigit((unsigned char)end[1])) *hi = strtol(end + 1, &end, 10);
    return *end || *lo > *hi || *hi > 100000 ? -1 : 0;
}

int dd_replay_partitions_parse(const char *s, int32_t **partsp, int *cntp, char *errstr,
                               size_t errstr_size)
{
    int32_t *parts = NULL;
    int cnt = 0, cap = 0, rc = DD_OK;
    const char *p = s;

    *partsp = NULL;
    *cntp = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        long lo, hi;
        if (dd_replay_part_item(p, len, &lo, &hi)) {
            dd_errstr_set(errstr, errstr_size,
                          "--partitions '%s': expected partition numbers like 0,2,5-7", s);
            rc = DD_ERR_ARG;
            goto out;
        }
        for (long i = lo; i <= hi; i++) {
            if (cnt == cap) {
                int32_t *np = realloc(parts, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*np));
                if (!np) {
                    rc = DD_ERR_NOMEM;
                    goto out;
                }
                parts = np;
            }
            parts[cnt++] = (int32_t)i;
        }
        if (p[len] == '\0') break;
        p += len + 1;
    }
    qsort(parts, (size_t)cnt, sizeof(*parts), dd_replay_i32cmp);
    int u = 0;
    for (int i = 0; i < cnt; i++)
        if (u == 0 || parts[u - 1] != parts[i]) parts[u++] = parts[i];
    *partsp = parts;
    *cntp = u;
    parts = NULL;
out:
    free(parts);
    return rc;
}

static void dd_replay_usage(FILE *out)
{
    fprintf(
        out,
        "usage: dedupd replay -c FILE --from {earliest|OFFSET|TIME} [--to {latest|OFFSET|TIME}]\n"
        "                     [--topic T]... [--partitions 0,2,4-7] [--apply]\n"
        "                     [--report FILE] [--format json|csv] [--orphans]\n"
        "\n"
        "Reads [--from, --to) of each partition (assign, no group, no commits) and\n"
        "compares every message's business key and request hash with the dedup table.\n"
        "TIME: ISO-8601 with a zone (2026-11-29T10:00:00Z) or back from now (-2h, -30m).\n"
        "OFFSET applies to every partition; --to is exclusive and defaults to the end\n"
        "offsets when replay starts. --topic defaults to the configured topics.\n"
        "  --apply     run missing keys (and failed ones when dedup.retry_failed) through\n"
        "              the claim + handler transaction; report-only without it\n"
        "  --orphans   also list dedup rows first seen in the range whose key is not in it\n"
        "  --report    write the report to FILE instead of stdout\n"
        "Exit: 0 report written (see its summary), 1 error or interrupted, 2 usage.\n");
}

static int dd_replay_add_topics(dd_replay_args_t *args, char *list)
{
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (args->topic_cnt >= DD_REPLAY_MAX_TOPICS) {
            fprintf(stderr, "dedupd replay: at most %d topics\n", DD_REPLAY_MAX_TOPICS);
            return 2;
        }
        args->topics[args->topic_cnt++] = t;
    }
    return 0;
}

static int dd_replay_opt(dd_replay_args_t *args, int c, char *arg, int *have_from, int64_t now)
{
    char err[512];

    switch (c) {
    case 'c':
        args->config = arg;
        return 0;
    case 'f':
    case 't':
        if (dd_replay_pos_parse(arg, now, c == 'f' ? &args->from : &args->to, err, sizeof(err)))
            break;
        if (c == 'f') *have_from = 1;
        return 0;
    case 'T':
        return dd_replay_add_topics(args, arg);
    case 'p':
        free(args->parts);
        if (dd_replay_partitions_parse(arg, &args->parts, &args->part_cnt, err, sizeof(err))) break;
        return 0;
    case 'a':
        args->apply = 1;
        return 0;
    case 'o':
        args->orphans = 1;
        return 0;
    case 'r':
        args->report = arg;
        return 0;
    case 'F':
        if (strcmp(arg, "json") && strcmp(arg, "csv")) {
            snprintf(err, sizeof(err), "--format must be json or csv, not '%s'", arg);
            break;
        }
        args->csv = arg[0] == 'c';
        return 0;
    default:
        return 2;
    }
    fprintf(stderr, "dedupd replay: %s\n", err);
    return 2;
}

/* Returns 0, 2 (usage error, printed) or -1 (--help printed). */
static int dd_replay_args(dd_replay_args_t *args, int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"from", required_argument, NULL, 'f'},
                                         {"to", required_argument, NULL, 't'},
                                         {"topic", required_argument, NULL, 'T'},
                                         {"partitions", required_argument, NULL, 'p'},
                                         {"apply", no_argument, NULL, 'a'},
                                         {"orphans", no_argument, NULL, 'o'},
                                         {"report", required_argument, NULL, 'r'},
                                         {"format", required_argument, NULL, 'F'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct timespec ts;
    int c, rc, have_from = 0;
    char err[512];
    int64_t now;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    args->to.kind = DD_REPLAY_POS_LATEST;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        if (c == 'h') {
            dd_replay_usage(stdout);
            return -1;
        }
        if ((rc = dd_replay_opt(args, c, optarg, &have_from, now)) != 0) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "dedupd replay: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!args->config || !have_from) {
        fprintf(stderr, "dedupd replay: %s is required (see dedupd replay --help)\n",
                !args->config ? "-c FILE" : "--from");
        return 2;
    }
    if (dd_replay_range_check(&args->from, &args->to, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd replay: %s\n", err);
        return 2;
    }
    return 0;
}

/* ---- Kafka: the consumer and the ranges ---- */


/* The user's properties first, then what makes replay invisible to the
 * group: its own group id (assign() needs one; it never joins), no commits,
 * no stored offsets. */
static int dd_replay_kafka_conf(rd_kafka_conf_t *kconf, const dd_conf_t *conf, char *errstr,
                                size_t errstr_size)
{
    static const char *const fixed[][2] = {{"enable.auto.commit", "false"},
                                           {"enable.auto.offset.store", "false"},
                                           {"enable.partition.eof", "true"},
                                           {"auto.offset.reset", "earliest"}};
    char group[300];
    int rc;

    rc = dd_conf_kafka_apply(conf, kconf, NULL, errstr, errstr_size);
    snprintf(group, sizeof(group), "%s.replay", conf->kafka.group);
    if (!rc) rc = dd_conf_kafka_set(kconf, "group.id", group, errstr, errstr_size);
    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(fixed); i++)
        rc = dd_conf_kafka_set(kconf, fixed[i][0], fixed[i][1], errstr, errstr_size);
    return rc;
}

static int dd_replay_kafka_new(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    char err[512];
    int rc = dd_replay_kafka_conf(kconf, rp->conf, errstr, errstr_size);

    if (rc) {
        rd_kafka_conf_destroy(kconf);
        return rc;
    }
    rd_kafka_conf_set_log_cb(kconf, dd_log_rdkafka);
    rp->rk = rd_kafka_new(RD_KAFKA_CONSUMER, kconf, err, sizeof(err));
    if (!rp->rk) {
        rd_kafka_conf_destroy(kconf);
        dd_errstr_set(errstr, errstr_size, "cannot create Kafka consumer: %s", err);
        return DD_ERR_FATAL;
    }
    rd_kafka_poll_set_consumer(rp->rk);
    return DD_OK;
}

/* Partition count of topic; retries while the cluster is settling. */
static int dd_replay_partition_count(dd_replay_t *rp, const char *topic, int *cnt, char *errstr,
                                     size_t errstr_size)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rp->rk, topic, NULL);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;

    for (int attempt = 0; attempt < 5; attempt++) {
        const struct rd_kafka_metadata *md = NULL;
        err = rd_kafka_metadata(rp->rk, 0, rkt, &md, DD_REPLAY_TIMEOUT_MS);
        if (!err) err = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
        if (!err) *cnt = md->topics[0].partition_cnt;
        if (md) rd_kafka_metadata_destroy(md);
        if (!err || err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) break;
        dd_sleep_ms(500, &dd_stop_requested);
    }
    rd_kafka_topic_destroy(rkt);
    if (err) dd_errstr_set(errstr, errstr_size, "topic %s: %s", topic, rd_kafka_err2str(err));
    return err ? DD_ERR_FATAL : DD_OK;
}

static int dd_replay_part_add(dd_replay_t *rp, const char *topic, int32_t partition)
{
    dd_replay_part_t *np = realloc(rp->parts, (size_t)(rp->part_cnt + 1) * sizeof(*np));

    if (!np) return DD_ERR_NOMEM;
    rp->parts = np;
    memset(&np[rp->part_cnt], 0, sizeof(*np));
    np[rp->part_cnt].topic = topic;
    np[rp->part_cnt].partition = partition;
    np[rp->part_cnt].from_ts = np[rp->part_cnt].to_ts = -1;
    rp->part_cnt++;
    return DD_OK;
}

/* The partitions to read: every partition of every topic, or the listed
 * ones, which must exist. */
static int dd_replay_partitions(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    const dd_replay_args_t *args = rp->args;
    int rc = DD_OK;

    for (int t = 0; !rc && t < args->topic_cnt; t++) {
        int cnt = 0;
        rc = dd_replay_partition_count(rp, args->topics[t], &cnt, errstr, errstr_size);
        for (int p = 0; !rc && !args->parts && p < cnt; p++)
            rc = dd_replay_part_add(rp, args->topics[t], p);
        for (int i = 0; !rc && i < args->part_cnt; i++) {
            if (args->parts[i] >= cnt) {
                dd_errstr_set(errstr, errstr_size, "topic %s has %d partition(s): no partition %d",
                              args->topics[t], cnt, (int)args->parts[i]);
                rc = DD_ERR_ARG;
            } else {
                rc = dd_replay_part_add(rp, args->topics[t], args->parts[i]);
            }
        }
    }
    return rc;
}

/* Resolves TIME positions of every partition in one offsets_for_times call;
 * out[i] is the first offset at or after the time, or -1 for none. */
static int dd_replay_times(dd_replay_t *rp, int64_t ts, int64_t *out, char *errstr,
                           size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(rp->part_cnt);
    rd_kafka_resp_err_t err;

    for (int i = 0; i < rp->part_cnt; i++)
        rd_kafka_topic_partition_list_add(list, rp->parts[i].topic, rp->parts[i].partition)
            ->offset = ts;
    err = rd_kafka_offsets_for_times(rp->rk, list, DD_REPLAY_TIMEOUT_MS);
    for (int i = 0; !err && i < rp->part_cnt; i++) {
        rd_kafka_topic_partition_t *p = &list->elems[i];
        if (p->err)
            err = p->err;
        else
            out[i] = p->offset >= 0 ? p->offset : -1;
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (err)
        dd_errstr_set(errstr, errstr_size, "offsets for time %lld: %s", (long long)ts,
                      rd_kafka_err2str(err));
    return err ? DD_ERR_FATAL : DD_OK;
}

static int64_t dd_replay_clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The timestamp of a partition's last message, or -1. */
static int64_t dd_replay_last_ts(dd_replay_t *rp, const dd_replay_part_t *pt)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    int64_t deadline = dd_now_ms() + DD_REPLAY_TIMEOUT_MS, ts = -1;

    rd_kafka_topic_partition_list_add(list, pt->topic, pt->partition)->offset = pt->high - 1;
    rd_kafka_assign(rp->rk, list);
    while (ts < 0 && dd_now_ms() < deadline && !dd_stop_requested) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rp->rk, 100);
        if (rkm && !rkm->err && rkm->partition == pt->partition &&
            !strcmp(rd_kafka_topic_name(rkm->rkt), pt->topic))
            ts = rd_kafka_message_timestamp(rkm, NULL);
        if (rkm) rd_kafka_message_destroy(rkm);
    }
    rd_kafka_assign(rp->rk, NULL);
    rd_kafka_topic_partition_list_destroy(list);
    return ts;
}

/* A TIME position the broker answered -1 for ("no message at or after
 * it"). For --to that means the whole partition. For --from it means an
 * empty range, unless the last message is in fact that recent: then the
 * broker cannot search by time (the mock cluster cannot), and replay reads
 * from the low watermark, skipping messages older than the time. */
static int64_t dd_replay_time_none(dd_replay_t *rp, dd_replay_part_t *pt, int64_t ts, int is_end)
{
    int64_t last;

    if (is_end || pt->high <= pt->low) return pt->high;
    last = dd_replay_last_ts(rp, pt);
    if (last >= 0 && last < ts) return pt->high;
    dd_log(DD_LOG_INFO,
           "%s [%d]: the broker did not look the time up; reading from offset "
           "%lld and skipping older messages.",
           pt->topic, (int)pt->partition, (long long)pt->low);
    return pt->low;
}

/* One end of every partition's range, from a position. */
static int dd_replay_resolve(dd_replay_t *rp, const dd_replay_pos_t *pos, int is_end, char *errstr,
                             size_t errstr_size)
{
    int64_t *val = calloc((size_t)rp->part_cnt, sizeof(*val));
    int rc = val ? DD_OK : DD_ERR_NOMEM;

    if (!rc && pos->kind == DD_REPLAY_POS_TIME)
        rc = dd_replay_times(rp, pos->value, val, errstr, errstr_size);
    for (int i = 0; !rc && i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        int64_t v = pos->kind == DD_REPLAY_POS_EARLIEST ? pt->low
                    : pos->kind == DD_REPLAY_POS_LATEST ? pt->high
                                                        : pos->value;
        if (pos->kind == DD_REPLAY_POS_TIME) {
            v = val[i] >= 0 ? val[i] : dd_replay_time_none(rp, pt, pos->value, is_end);
            *(is_end ? &pt->to_ts : &pt->from_ts) = pos->value;
        }
        /* Offsets below the low watermark are gone (retention): start there. */
        v = dd_replay_clamp(v, pt->low, pt->high);
        if (is_end)
            pt->end = v;
        else
            pt->start = v;
    }
    free(val);
    return rc;
}

static int dd_replay_ranges(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (int i = 0; !rc && i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            rp->rk, pt->topic, pt->partition, &pt->low, &pt->high, DD_REPLAY_TIMEOUT_MS);
        if (err) {
            dd_errstr_set(errstr, errstr_size, "watermarks of %s [%d]: %s", pt->topic,
                          (int)pt->partition, rd_kafka_err2str(err));
            rc = DD_ERR_FATAL;
        }
    }
    if (!rc) rc = dd_replay_resolve(rp, &rp->args->from, 0, errstr, errstr_size);
    if (!rc) rc = dd_replay_resolve(rp, &rp->args->to, 1, errstr, errstr_size);
    for (int i = 0; !rc && i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        if (pt->end < pt->start) pt->end = pt->start;
        pt->pos = pt->start;
        pt->done = pt->start >= pt->end;
        rp->parts_left += !pt->done;
        rp->total += pt->end - pt->start;
        dd_log(DD_LOG_INFO, "Replaying %s [%d] offsets %lld to %lld (watermarks %lld..%lld).",
               pt->topic, (int)pt->partition, (long long)pt->start, (long long)pt->end,
               (long long)pt->low, (long long)pt->high);
    }
    /* Legitimate (a time window nothing was produced in), but often a typo. */
    if (!rc && rp->total == 0)
        dd_log(DD_LOG_WARN,
               "Nothing to replay: [--from, --to) holds no message in any of the "
               "%d partition(s); the report will be empty.",
               rp->part_cnt);
    return rc;
}

static int dd_replay_assign(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(rp->part_cnt);
    rd_kafka_resp_err_t err;

    for (int i = 0; i < rp->part_cnt; i++)
        if (!rp->parts[i].done)
            rd_kafka_topic_partition_list_add(list, rp->parts[i].topic, rp->parts[i].partition)
                ->offset = rp->parts[i].start;
    err = rd_kafka_assign(rp->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) dd_errstr_set(errstr, errstr_size, "assign: %s", rd_kafka_err2str(err));
    return err ? DD_ERR_FATAL : DD_OK;
}

static dd_replay_part_t *dd_replay_part_find(dd_replay_t *rp, const char *topic, int32_t partition)
{
    for (int i = 0; i < rp->part_cnt; i++)
        if (rp->parts[i].partition == partition && !strcmp(rp->parts[i].topic, topic))
            return &rp->parts[i];
    return NULL;
}

/* Moves a partition's position; a partition at its end is paused so the
 * consumer stops fetching what replay would throw away. */
static void dd_replay_advance(dd_replay_t *rp, dd_replay_part_t *pt, int64_t next)
{
    if (pt->done) return;
    next = next > pt->end ? pt->end : next;
    if (next > pt->pos) {
        rp->progress += next - pt->pos;
        pt->pos = next;
    }
    if (pt->pos >= pt->end) {
        rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(list, pt->topic, pt->partition);
        rd_kafka_pause_partitions(rp->rk, list);
        rd_kafka_topic_partition_list_destroy(list);
        pt->done = 1;
        rp->parts_left--;
    }
}

/* ---- database: lookups and the temporary tables ---- */

static int dd_replay_exec(dd_replay_t *rp, const char *sql, size_t len, char *errstr,
                          size_t errstr_size)
{
    if (rp->sql.oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory building a statement");
        return DD_ERR_NOMEM;
    }
    return dd_db_exec(rp->db, sql, len, errstr, errstr_size);
}

static MYSQL_RES *dd_replay_query(dd_replay_t *rp, int use, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(rp->db);
    MYSQL_RES *res = NULL;

    if (rp->sql.oom)
        dd_errstr_set(errstr, errstr_size, "out of memory building a statement");
    else if (mysql_real_query(mysql, rp->sql.p, (unsigned long)rp->sql.len) != 0 ||
             !(res = use ? mysql_use_result(mysql) : mysql_store_result(mysql)))
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
    return res;
}

/* dd_replay_key: per key, its first message in the range and the verdict.
 * dd_replay_event: bad messages and copies unlike their key's first one.
 * InnoDB, so a large range spills to disk instead of memory. */
static int dd_replay_temp_tables(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    static const char *const ddl[] = {
        "CREATE TEMPORARY TABLE dd_replay_key ("
        " biz_key VARBINARY(255) NOT NULL PRIMARY KEY, msg_hash BINARY(32) NOT NULL,"
        " topic VARCHAR(249) NOT NULL, kpartition INT NOT NULL, koffset BIGINT NOT NULL,"
        " status TINYINT NOT NULL, reason VARCHAR(32) NULL, stored_hash BINARY(32) NULL,"
        " detail VARCHAR(1024) NULL, outcome TINYINT NOT NULL DEFAULT 0,"
        " outcome_error VARCHAR(1024) NULL) ENGINE=InnoDB",
        "CREATE TEMPORARY TABLE dd_replay_event ("
        " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, biz_key VARBINARY(255) NULL,"
        " msg_hash BINARY(32) NULL, topic VARCHAR(249) NOT NULL, kpartition INT NOT NULL,"
        " koffset BIGINT NOT NULL, status TINYINT NOT NULL, reason VARCHAR(32) NULL,"
        " stored_hash BINARY(32) NULL, detail VARCHAR(1024) NULL) ENGINE=InnoDB",
    };
    int rc = DD_OK;

    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(ddl); i++)
        rc = dd_replay_exec(rp, ddl[i], strlen(ddl[i]), errstr, errstr_size);
    return rc;
}

static int dd_replay_keycmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);

    return c ? c : (alen < blen ? -1 : alen > blen);
}

/* The batch's key of a result row (binary search: uk is sorted by key). */
static dd_replay_ukey_t *dd_replay_ukey_find(dd_replay_t *rp, size_t u, const char *key, size_t len)
{
    size_t lo = 0, hi = u;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        dd_item_t *it = rp->uk[mid].first;
        int c = dd_replay_keycmp(it->key, it->key_len, key, len);
        if (c == 0) return &rp->uk[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void dd_replay_in_list(dd_replay_t *rp, size_t u, int only_new)
{
    int first = 1;

    dd_buf_puts(&rp->sql, " WHERE biz_key IN (");
    for (size_t i = 0; i < u; i++) {
        if (only_new && rp->uk[i].seen) continue;
        if (!first) dd_buf_puts(&rp->sql, ",");
        dd_buf_hex(&rp->sql, rp->uk[i].first->key, rp->uk[i].first->key_len);
        first = 0;
    }
    dd_buf_puts(&rp->sql, ")");
}

/* Which of the batch's keys were met earlier in the range, and their
 * first message's hash. */
static int dd_replay_lookup_seen(dd_replay_t *rp, size_t u, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql, "SELECT biz_key, msg_hash FROM dd_replay_key");
    dd_replay_in_list(rp, u, 0);
    if (!(res = dd_replay_query(rp, 0, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_replay_ukey_t *k = dd_replay_ukey_find(rp, u, row[0], len[0]);
        if (k && len[1] == DD_HASH_LEN) {
            k->seen = 1;
            memcpy(k->first_hash, row[1], DD_HASH_LEN);
        }
    }
    mysql_free_result(res);
    return DD_OK;
}

/* The dedup rows of the keys met for the first time. */
static int dd_replay_lookup_rows(dd_replay_t *rp, size_t u, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    size_t fresh = 0;

    for (size_t i = 0; i < u; i++)
        fresh += !rp->uk[i].seen;
    if (fresh == 0) return DD_OK;
    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql, "SELECT biz_key, request_hash, status, error FROM `%s`",
                  rp->conf->dedup.table);
    dd_replay_in_list(rp, u, 1);
    if (!(res = dd_replay_query(rp, 0, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_replay_ukey_t *k = dd_replay_ukey_find(rp, u, row[0], len[0]);
        if (!k || k->seen) continue;
        k->has_row = 1;
        if (len[1] == DD_HASH_LEN) memcpy(k->row_hash, row[1], DD_HASH_LEN);
        k->row_status = atoi(row[2]);
        snprintf(k->row_error, sizeof(k->row_error), "%s", row[3] ? row[3] : "");
    }
    mysql_free_result(res);
    return DD_OK;
}

/* ---- judging a batch ---- */

static void dd_replay_item_free(dd_item_t *item)
{
    if (!item) return;
    cJSON_Delete(item->json);
    if (item->rkm) rd_kafka_message_destroy(item->rkm);
    free(item->response);
    free(item);
}

static int dd_replay_item_cmp(const void *a, const void *b)
{
    const dd_item_t *x = *(dd_item_t *const *)a, *y = *(dd_item_t *const *)b;
    int c = dd_replay_keycmp(x->key, x->key_len, y->key, y->key_len);

    return c ? c : (x->seq < y->seq ? -1 : x->seq > y->seq);
}

/* Groups the batch's good messages by key; uk[] gets one entry per key,
 * sorted, leading with the key's first message in the batch. */
static size_t dd_replay_group(dd_replay_t *rp)
{
    size_t g = 0, u = 0;

    for (size_t i = 0; i < rp->n; i++)
        if (rp->batch[i]->outcome != DD_OUT_DLQ) rp->sorted[g++] = rp->batch[i];
    qsort(rp->sorted, g, sizeof(*rp->sorted), dd_replay_item_cmp);
    for (size_t i = 0; i < g; i++) {
        dd_item_t *it = rp->sorted[i];
        if (u == 0 || dd_replay_keycmp(rp->uk[u - 1].first->key, rp->uk[u - 1].first->key_len,
                                       it->key, it->key_len) != 0) {
            memset(&rp->uk[u], 0, sizeof(rp->uk[u]));
            rp->uk[u].first = it;
            memcpy(rp->uk[u].first_hash, it->hash, DD_HASH_LEN);
            u++;
        }
        rp->ukidx[it->seq] = u - 1;
    }
    return u;
}

static dd_replay_status_t dd_replay_judge(const dd_replay_ukey_t *k, const char **reason)
{
    *reason = NULL;
    if (!k->has_row) {
        *reason = "no_row";
        return DD_RS_MISSING;
    }
    if (memcmp(k->row_hash, k->first_hash, DD_HASH_LEN) != 0) {
        *reason = "hash_differs";
        return DD_RS_CONFLICT;
    }
    if (k->row_status == DD_ROW_APPLIED) return DD_RS_APPLIED;
    if (k->row_status == DD_ROW_FAILED) {
        *reason = "rejected";
        return DD_RS_FAILED;
    }
    *reason = "lease";
    return DD_RS_PROCESSING;
}

static void dd_replay_put_pos(dd_replay_t *rp, const dd_item_t *it)
{
    const char *topic = rd_kafka_topic_name(it->rkm->rkt);

    dd_buf_quote(&rp->sql, dd_db_mysql(rp->db), topic, strlen(topic));
    dd_buf_printf(&rp->sql, ",%d,%lld,", (int)it->rkm->partition, (long long)it->rkm->offset);
}

static void dd_replay_put_text(dd_replay_t *rp, const char *s)
{
    if (s && *s)
        dd_buf_quote(&rp->sql, dd_db_mysql(rp->db), s, strnlen(s, 1024));
    else
        dd_buf_puts(&rp->sql, "NULL");
}

/* Records the keys met for the first time; the verdict is final for them. */
static int dd_replay_record_keys(dd_replay_t *rp, size_t u, char *errstr, size_t errstr_size)
{
    int any = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql, "INSERT INTO dd_replay_key (biz_key, msg_hash, topic, kpartition, "
                          "koffset, status, reason, stored_hash, detail) VALUES ");
    for (size_t i = 0; i < u; i++) {
        dd_replay_ukey_t *k = &rp->uk[i];
        const char *reason;
        dd_replay_status_t st;
        if (k->seen) continue;
        st = dd_replay_judge(k, &reason);
        rp->sum.keys++;
        rp->sum.status[st]++;
        dd_buf_puts(&rp->sql, any++ ? ",(" : "(");
        dd_buf_hex(&rp->sql, k->first->key, k->first->key_len);
        dd_buf_puts(&rp->sql, ",");
        dd_buf_hex(&rp->sql, k->first_hash, DD_HASH_LEN);
        dd_buf_puts(&rp->sql, ",");
        dd_replay_put_pos(rp, k->first);
        dd_buf_printf(&rp->sql, "%d,", (int)st);
        dd_replay_put_text(rp, reason);
        dd_buf_puts(&rp->sql, ",");
        if (k->has_row)
            dd_buf_hex(&rp->sql, k->row_hash, DD_HASH_LEN);
        else
            dd_buf_puts(&rp->sql, "NULL");
        dd_buf_puts(&rp->sql, ",");
        dd_replay_put_text(rp, st == DD_RS_FAILED ? k->row_error : NULL);
        dd_buf_puts(&rp->sql, ")");
    }
    return any ? dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size) : DD_OK;
}

/* A bad message, or a copy whose hash differs from its key's first message. */
static void dd_replay_put_event(dd_replay_t *rp, const dd_item_t *it, int *any,
                                const unsigned char *first_hash)
{
    dd_buf_puts(&rp->sql, (*any)++ ? ",(" : "(");
    if (first_hash) {
        dd_buf_hex(&rp->sql, it->key, it->key_len);
        dd_buf_puts(&rp->sql, ",");
        dd_buf_hex(&rp->sql, it->hash, DD_HASH_LEN);
    } else {
        dd_buf_puts(&rp->sql, "NULL,NULL");
    }
    dd_buf_puts(&rp->sql, ",");
    dd_replay_put_pos(rp, it);
    dd_buf_printf(&rp->sql, "%d,'%s',", first_hash ? DD_RS_CONFLICT : DD_RS_BAD,
                  first_hash ? "copy_differs" : dd_reason2str(it->reason));
    if (first_hash)
        dd_buf_hex(&rp->sql, first_hash, DD_HASH_LEN);
    else
        dd_buf_puts(&rp->sql, "NULL");
    dd_buf_puts(&rp->sql, ",");
    dd_replay_put_text(rp, first_hash ? "hash differs from the first message of this key in the "
                                        "range"
                                      : it->error);
    dd_buf_puts(&rp->sql, ")");
}

static int dd_replay_record_events(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int any = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql, "INSERT INTO dd_replay_event (biz_key, msg_hash, topic, kpartition, "
                          "koffset, status, reason, stored_hash, detail) VALUES ");
    for (size_t i = 0; i < rp->n; i++) {
        dd_item_t *it = rp->batch[i];
        const dd_replay_ukey_t *k;
        if (it->outcome == DD_OUT_DLQ) {
            rp->sum.status[DD_RS_BAD]++;
            rp->sum.bad[it->reason]++;
            dd_replay_put_event(rp, it, &any, NULL);
            continue;
        }
        k = &rp->uk[rp->ukidx[i]];
        if ((k->seen || k->first != it) && memcmp(it->hash, k->first_hash, DD_HASH_LEN) != 0) {
            rp->sum.copy_conflicts++;
            dd_replay_put_event(rp, it, &any, k->first_hash);
        }
    }
    return any ? dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size) : DD_OK;
}

static int dd_replay_apply_push(dd_replay_t *rp, dd_item_t *item, char *errstr, size_t errstr_size);

/* Hands the first message of each key that needs repair to the lane; frees
 * the rest of the batch. */
static int dd_replay_dispatch(dd_replay_t *rp, size_t u, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (size_t i = 0; rp->args->apply && i < u; i++) {
        dd_replay_ukey_t *k = &rp->uk[i];
        const char *reason;
        dd_replay_status_t st;
        if (k->seen) continue;
        st = dd_replay_judge(k, &reason);
        if (st == DD_RS_MISSING || (st == DD_RS_FAILED && rp->conf->dedup.retry_failed)) {
            rp->batch[k->first->seq] = NULL;
            if (!rc)
                rc = dd_replay_apply_push(rp, k->first, errstr, errstr_size);
            else
                dd_replay_item_free(k->first);
        }
    }
    for (size_t i = 0; i < rp->n; i++)
        dd_replay_item_free(rp->batch[i]);
    rp->n = 0;
    return rc;
}

static int dd_replay_flush(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    size_t u;
    int rc = DD_OK;

    if (rp->n == 0) return DD_OK;
    u = dd_replay_group(rp);
    if (u > 0) rc = dd_replay_lookup_seen(rp, u, errstr, errstr_size);
    if (!rc && u > 0) rc = dd_replay_lookup_rows(rp, u, errstr, errstr_size);
    if (!rc && u > 0) rc = dd_replay_record_keys(rp, u, errstr, errstr_size);
    if (!rc) rc = dd_replay_record_events(rp, errstr, errstr_size);
    if (rc) {
        u = 0; /* nothing goes to the lane after a failed lookup */
        rp->args->apply = 0;
    }
    int drc = dd_replay_dispatch(rp, u, errstr, errstr_size);
    return rc ? rc : drc;
}

/* Parses one message into the batch (bad ones marked DD_OUT_DLQ). */
static int dd_replay_message(dd_replay_t *rp, rd_kafka_message_t *rkm, char *errstr,
                             size_t errstr_size)
{
    dd_item_t *item = calloc(1, sizeof(*item));

    if (!item) {
        rd_kafka_message_destroy(rkm);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    item->rkm = rkm;
    item->seq = rp->n;
    rp->sum.messages++;
    if (dd_parse_message(rp->doc, rp->conf, rp->tmpl, rkm->payload, rkm->len, &item->json,
                         item->key, &item->key_len, &item->reason, item->error,
                         sizeof(item->error)) != DD_OK) {
        item->outcome = DD_OUT_DLQ;
    } else if (dd_hash_doc(rp->hspec, rp->doc, item->hash) != DD_OK) {
        rp->batch[rp->n++] = item; /* freed with the batch */
        dd_errstr_set(errstr, errstr_size, "cannot compute the request hash of %s [%d] at "
                      "offset %lld (out of memory or a libcrypto error)",
                      rd_kafka_topic_name(rkm->rkt), (int)rkm->partition, (long long)rkm->offset);
        return DD_ERR_NOMEM;
    } else {
        item->hashed = 1;
    }
    rp->batch[rp->n++] = item;
    return rp->n == DD_REPLAY_BATCH ? dd_replay_flush(rp, errstr, errstr_size) : DD_OK;
}

/* ---- --apply: one lane ---- */

static int dd_replay_apply_start(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = rp->conf;
    char host[64] = "localhost";
    int rc;

    rc = dd_handler_load(&rp->h, conf->handler.path, conf->handler.config, errstr, errstr_size);
    if (rc) return rc;
    dd_handler_set_max_response(rp->h, (size_t)conf->handler.max_response_bytes);
    pthread_mutex_init(&rp->sh.mu, NULL);
    pthread_cond_init(&rp->sh.cv, NULL);
    rp->sh_ready = 1;
    gethostname(host, sizeof(host) - 1);
    snprintf(rp->owner, sizeof(rp->owner), "%s:%d replay", host, (int)getpid());
    rp->sh.conf = conf;
    rp->sh.h = rp->h;
    rp->sh.hspec = rp->hspec;
    dd_claim_opts_init(&rp->sh.copts, conf, rp->owner);
    return dd_lane_start(&rp->lane, &rp->sh, 0, errstr, errstr_size);
}

/* Records the lane's verdicts in dd_replay_key: one statement for the
 * repaired keys, one per failure (they carry an error). */
static int dd_replay_apply_record(dd_replay_t *rp, dd_item_t *list, char *errstr,
                                  size_t errstr_size)
{
    int rc = DD_OK, any = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql, "UPDATE dd_replay_key SET outcome = %d WHERE biz_key IN (",
                  DD_RA_REPAIRED);
    for (dd_item_t *it = list; it; it = it->next) {
        if (it->outcome != DD_OUT_APPLIED) continue;
        dd_buf_puts(&rp->sql, any++ ? "," : "");
        dd_buf_hex(&rp->sql, it->key, it->key_len);
    }
    dd_buf_puts(&rp->sql, ")");
    if (any) rc = dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size);
    for (dd_item_t *it = list; !rc && it; it = it->next) {
        int failed = it->outcome != DD_OUT_APPLIED && it->outcome != DD_OUT_DUPLICATE;
        if (it->outcome == DD_OUT_APPLIED) continue;
        dd_buf_reset(&rp->sql);
        dd_buf_printf(&rp->sql, "UPDATE dd_replay_key SET outcome = %d, outcome_error = ",
                      failed ? DD_RA_FAILED : DD_RA_ALREADY_APPLIED);
        if (failed) {
            char why[300];
            snprintf(why, sizeof(why), "%s: %s", dd_reason2str(it->reason), it->error);
            dd_replay_put_text(rp, why);
        } else {
            dd_buf_puts(&rp->sql, "NULL");
        }
        dd_buf_puts(&rp->sql, " WHERE biz_key = ");
        dd_buf_hex(&rp->sql, it->key, it->key_len);
        rc = dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size);
    }
    return rc;
}

/* Takes what the lane finished (waiting up to wait_ms), records and frees
 * it. Dead-letter verdicts are reported, never sent. */
static int dd_replay_apply_drain(dd_replay_t *rp, int wait_ms, char *errstr, size_t errstr_size)
{
    dd_item_t *list, *next;
    int rc;

    list = dd_lane_take_done(&rp->sh, wait_ms);
    rc = dd_replay_apply_record(rp, list, errstr, errstr_size);
    for (; list; list = next) {
        next = list->next;
        rp->sum.apply[list->outcome == DD_OUT_APPLIED     ? DD_RA_REPAIRED
                      : list->outcome == DD_OUT_DUPLICATE ? DD_RA_ALREADY_APPLIED
                                                          : DD_RA_FAILED]++;
        if (list->outcome == DD_OUT_DLQ)
            dd_log_msg(DD_LOG_WARN, rd_kafka_topic_name(list->rkm->rkt), list->rkm->partition,
                       list->rkm->offset, list->key, "Not repaired (%s): %s",
                       dd_reason2str(list->reason), list->error);
        rp->pending--;
        dd_replay_item_free(list);
    }
    if (!rc && rp->sh.fatal) {
        dd_errstr_set(errstr, errstr_size, "%s", rp->sh.fatal_err);
        rc = DD_ERR_FATAL;
    }
    return rc;
}

static int dd_replay_apply_push(dd_replay_t *rp, dd_item_t *item, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    item->next = NULL;
    rp->pending++;
    dd_lane_push(rp->lane, item);
    while (!rc && rp->pending >= DD_REPLAY_MAX_PENDING)
        rc = dd_replay_apply_drain(rp, 100, errstr, errstr_size);
    return rc;
}

/* Lets the lane finish its queue, then joins it. */
static int dd_replay_apply_finish(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_item_t *leftover = NULL, *next;
    int rc = DD_OK;

    if (!rp->lane) return DD_OK;
    rp->sh.stop_soft = 1;
    /* After SIGINT/SIGTERM only the transaction under way is finished. */
    while (!rc && rp->pending > 0 && !dd_stop_requested)
        rc = dd_replay_apply_drain(rp, 100, errstr, errstr_size);
    rp->sh.stop_hard = 1;
    dd_lane_join(rp->lane, &leftover);
    rp->lane = NULL;
    if (!rc) rc = dd_replay_apply_drain(rp, 0, errstr, errstr_size); /* the last transaction */
    for (; leftover; leftover = next) {
        next = leftover->next;
        rp->pending--;
        dd_replay_item_free(leftover);
    }
    return rc;
}

/* ---- the report ---- */

/* One line of the report, from dd_replay_key / dd_replay_event (a verdict)
 * or from dd_replay_orphan (status "orphan"). NULL fields are left out. */
typedef struct {
    const char *status, *reason, *topic;
    const char *partition, *offset;
    const char *key;
    size_t key_len;
    const char *hash, *stored_hash, *detail, *apply, *apply_error, *row_status, *created_at;
} dd_replay_entry_t;

static void dd_replay_json_str(FILE *out, const char *s, size_t n)
{
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void dd_replay_json_field(FILE *out, const char *name, const char *v, int number)
{
    if (!v) return;
    fprintf(out, ",\"%s\":", name);
    if (number)
        fputs(v, out);
    else
        dd_replay_json_str(out, v, strlen(v));
}

static void dd_replay_json_entry(FILE *out, const dd_replay_entry_t *e, int first)
{
    static const char hex[] = "0123456789abcdef";

    fputs(first ? "\n    {" : ",\n    {", out);
    fputs("\"key\":", out);
    if (!e->key) {
        fputs("null", out);
    } else if (dd_utf8_valid(e->key, e->key_len)) {
        dd_replay_json_str(out, e->key, e->key_len);
    } else {
        /* Keys are bytes; a JSON string cannot hold invalid UTF-8. */
        fputs("null,\"key_hex\":\"", out);
        for (size_t i = 0; i < e->key_len; i++)
            fprintf(out, "%c%c", hex[(unsigned char)e->key[i] >> 4], hex[e->key[i] & 15]);
        fputc('"', out);
    }
    dd_replay_json_field(out, "status", e->status, 0);
    dd_replay_json_field(out, "reason", e->reason, 0);
    dd_replay_json_field(out, "topic", e->topic, 0);
    dd_replay_json_field(out, "partition", e->partition, 1);
    dd_replay_json_field(out, "offset", e->offset, 1);
    dd_replay_json_field(out, "hash", e->hash, 0);
    dd_replay_json_field(out, "stored_hash", e->stored_hash, 0);
    dd_replay_json_field(out, "row_status", e->row_status, 0);
    dd_replay_json_field(out, "created_at", e->created_at, 0);
    dd_replay_json_field(out, "detail", e->detail, 0);
    dd_replay_json_field(out, "apply", e->apply, 0);
    dd_replay_json_field(out, "apply_error", e->apply_error, 0);
    fputc('}', out);
}

static void dd_replay_csv_field(FILE *out, const char *v, size_t n, int last)
{
    if (v && strcspn(v, ",\"\r\n") < n) {
        fputc('"', out);
        for (size_t i = 0; i < n; i++) {
            if (v[i] == '"') fputc('"', out);
            fputc(v[i], out);
        }
        fputc('"', out);
    } else if (v) {
        fwrite(v, 1, n, out);
    }
    fputc(last ? '\n' : ',', out);
}

#define DD_REPLAY_CSV_HEADER                                                                       \
    "status,reason,topic,partition,offset,key,hash,stored_hash,detail,apply,apply_error\n"

static void dd_replay_csv_entry(FILE *out, const dd_replay_entry_t *e)
{
    const char *v[] = {e->status, e->reason, e->topic, e->partition, e->offset};
    char detail[1200];

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++)
        dd_replay_csv_field(out, v[i], v[i] ? strlen(v[i]) : 0, 0);
    dd_replay_csv_field(out, e->key, e->key ? e->key_len : 0, 0);
    dd_replay_csv_field(out, e->hash, e->hash ? strlen(e->hash) : 0, 0);
    dd_replay_csv_field(out, e->stored_hash, e->stored_hash ? strlen(e->stored_hash) : 0, 0);
    if (e->row_status)
        snprintf(detail, sizeof(detail), "row status %s, created %s", e->row_status,
                 e->created_at ? e->created_at : "?");
    else
        snprintf(detail, sizeof(detail), "%s", e->detail ? e->detail : "");
    dd_replay_csv_field(out, detail, strlen(detail), 0);
    dd_replay_csv_field(out, e->apply, e->apply ? strlen(e->apply) : 0, 0);
    dd_replay_csv_field(out, e->apply_error, e->apply_error ? strlen(e->apply_error) : 0, 1);
}

static const char *dd_replay_name(const char *const *names, int cnt, const char *num)
{
    int v = num ? atoi(num) : -1;

    return v >= 0 && v < cnt ? names[v] : "unknown";
}

/* Streams the verdicts that are not `applied`, in topic/partition/offset
 * order, to the report. Returns 0 or DD_ERR_FATAL. */
static int dd_replay_write_entries(dd_replay_t *rp, FILE *out, char *errstr, size_t errstr_size)
{
    static const char cols[] = "status, reason, topic, kpartition, koffset, biz_key, "
                               "LOWER(HEX(msg_hash)), LOWER(HEX(stored_hash)), detail";
    MYSQL_RES *res;
    MYSQL_ROW row;
    int n = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql,
                  "SELECT %s, outcome, outcome_error FROM dd_replay_key WHERE status <> %d "
                  "UNION ALL SELECT %s, 0, NULL FROM dd_replay_event ORDER BY 3, 4, 5",
                  cols, DD_RS_APPLIED, cols);
    if (!(res = dd_replay_query(rp, 1, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        int outcome = atoi(row[9]);
        dd_replay_entry_t e = {
            .status = dd_replay_name(dd_replay_status_names, DD_RS_CNT, row[0]),
            .reason = row[1],
            .topic = row[2],
            .partition = row[3],
            .offset = row[4],
            .key = row[5],
            .key_len = len[5],
            .hash = row[6],
            .stored_hash = row[7],
            .detail = row[8],
            .apply_error = row[10],
            .apply = outcome ? dd_replay_name(dd_replay_apply_names, DD_RA_CNT, row[9]) : NULL,
        };
        if (rp->args->csv)
            dd_replay_csv_entry(out, &e);
        else
            dd_replay_json_entry(out, &e, n == 0);
        n++;
    }
    mysql_free_result(res);
    return DD_OK;
}

/* --orphans: dedup rows whose first-seen position is inside the replayed
 * range but whose key never showed up in it. The anti-join runs in the
 * database against dd_replay_key (a full scan of the dedup table: it has
 * no index on topic/partition/offset), into a temporary table. */
static int dd_replay_find_orphans(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(rp->db);
    MYSQL_RES *res;
    MYSQL_ROW row;
    int any = 0, rc;

    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql,
                  "CREATE TEMPORARY TABLE dd_replay_orphan ENGINE=InnoDB AS SELECT d.biz_key, "
                  "d.topic, d.kpartition, d.koffset, d.status, d.request_hash, d.created_at "
                  "FROM `%s` d WHERE NOT EXISTS (SELECT 1 FROM dd_replay_key k WHERE "
                  "k.biz_key = d.biz_key) AND (FALSE",
                  rp->conf->dedup.table);
    for (int i = 0; i < rp->part_cnt; i++) {
        const dd_replay_part_t *pt = &rp->parts[i];
        if (pt->start >= pt->end) continue;
        dd_buf_puts(&rp->sql, " OR (d.topic = ");
        dd_buf_quote(&rp->sql, mysql, pt->topic, strlen(pt->topic));
        dd_buf_printf(&rp->sql,
                      " AND d.kpartition = %d AND d.koffset >= %lld AND d.koffset < %lld)",
                      (int)pt->partition, (long long)pt->start, (long long)pt->end);
        any = 1;
    }
    dd_buf_puts(&rp->sql, any ? ")" : ") AND FALSE");
    rc = dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size);
    if (rc) return rc;
    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql, "SELECT COUNT(*) FROM dd_replay_orphan");
    if (!(res = dd_replay_query(rp, 0, errstr, errstr_size))) return DD_ERR_FATAL;
    if ((row = mysql_fetch_row(res))) rp->sum.orphans = strtoull(row[0], NULL, 10);
    mysql_free_result(res);
    return DD_OK;
}

static int dd_replay_write_orphans(dd_replay_t *rp, FILE *out, char *errstr, size_t errstr_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    int n = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_puts(&rp->sql, "SELECT biz_key, topic, kpartition, koffset, status, "
                          "LOWER(HEX(request_hash)), created_at FROM dd_replay_orphan "
                          "ORDER BY topic, kpartition, koffset");
    if (!(res = dd_replay_query(rp, 1, errstr, errstr_size))) return DD_ERR_FATAL;
    while ((row = mysql_fetch_row(res))) {
        unsigned long *len = mysql_fetch_lengths(res);
        dd_replay_entry_t e = {
            .status = "orphan",
            .reason = "key_not_in_range",
            .key = row[0],
            .key_len = len[0],
            .topic = row[1],
            .partition = row[2],
            .offset = row[3],
            .row_status = dd_replay_name(dd_replay_row_names, 3, row[4]),
            .stored_hash = row[5],
            .created_at = row[6],
        };
        if (rp->args->csv)
            dd_replay_csv_entry(out, &e);
        else
            dd_replay_json_entry(out, &e, n == 0);
        n++;
    }
    mysql_free_result(res);
    return DD_OK;
}

/* The summary's name=value pairs, shared by the JSON object, the CSV
 * trailer and the table on stderr. */
typedef struct {
    const char *name;
    uint64_t value;
} dd_replay_kv_t;

static size_t dd_replay_kvs(const dd_replay_t *rp, dd_replay_kv_t *kv)
{
    const dd_replay_sum_t *s = &rp->sum;
    size_t n = 0;

    kv[n++] = (dd_replay_kv_t){"messages", s->messages};
    kv[n++] = (dd_replay_kv_t){"keys", s->keys};
    for (int i = DD_RS_APPLIED; i < DD_RS_CNT; i++)
        kv[n++] = (dd_replay_kv_t){dd_replay_status_names[i], s->status[i]};
    for (int i = DD_REASON_BAD_JSON; i <= DD_REASON_PAYLOAD_TOO_LARGE; i++)
        kv[n++] = (dd_replay_kv_t){dd_reason2str((dd_reason_t)i), s->bad[i]};
    kv[n++] = (dd_replay_kv_t){"copy_conflicts", s->copy_conflicts};
    if (rp->args->apply) {
        kv[n++] = (dd_replay_kv_t){"repaired", s->apply[DD_RA_REPAIRED]};
        kv[n++] = (dd_replay_kv_t){"already_applied", s->apply[DD_RA_ALREADY_APPLIED]};
        kv[n++] = (dd_replay_kv_t){"apply_failed", s->apply[DD_RA_FAILED]};
    }
    if (rp->args->orphans) kv[n++] = (dd_replay_kv_t){"orphans", s->orphans};
    return n;
}

#define DD_REPLAY_KV_MAX 24

static void dd_replay_write_head(dd_replay_t *rp, FILE *out, int complete)
{
    dd_replay_kv_t kv[DD_REPLAY_KV_MAX];
    size_t n = dd_replay_kvs(rp, kv);

    fprintf(out, "{\n  \"summary\": {\"mode\":\"%s\",\"complete\":%s",
            rp->args->apply ? "apply" : "report", complete ? "true" : "false");
    for (size_t i = 0; i < n; i++)
        fprintf(out, ",\"%s\":%llu", kv[i].name, (unsigned long long)kv[i].value);
    fputs("},\n  \"ranges\": [", out);
    for (int i = 0; i < rp->part_cnt; i++) {
        const dd_replay_part_t *pt = &rp->parts[i];
        fputs(i ? ",\n    {\"topic\":" : "\n    {\"topic\":", out);
        dd_replay_json_str(out, pt->topic, strlen(pt->topic));
        fprintf(out, ",\"partition\":%d,\"from\":%lld,\"to\":%lld,\"read_to\":%lld}",
                (int)pt->partition, (long long)pt->start, (long long)pt->end, (long long)pt->pos);
    }
    fputs("\n  ],\n  \"entries\": [", out);
}

static void dd_replay_write_trailer(dd_replay_t *rp, FILE *out, int complete)
{
    dd_replay_kv_t kv[DD_REPLAY_KV_MAX];
    size_t n = dd_replay_kvs(rp, kv);

    fprintf(out, "# summary mode=%s complete=%d", rp->args->apply ? "apply" : "report", complete);
    for (size_t i = 0; i < n; i++)
        fprintf(out, " %s=%llu", kv[i].name, (unsigned long long)kv[i].value);
    fputc('\n', out);
    for (int i = 0; i < rp->part_cnt; i++)
        fprintf(out, "# range topic=%s partition=%d from=%lld to=%lld read_to=%lld\n",
                rp->parts[i].topic, (int)rp->parts[i].partition, (long long)rp->parts[i].start,
                (long long)rp->parts[i].end, (long long)rp->parts[i].pos);
}

static int dd_replay_write(dd_replay_t *rp, FILE *out, int complete, char *errstr,
                           size_t errstr_size)
{
    int rc;

    if (rp->args->csv)
        fputs(DD_REPLAY_CSV_HEADER, out);
    else
        dd_replay_write_head(rp, out, complete);
    rc = dd_replay_write_entries(rp, out, errstr, errstr_size);
    if (!rc && rp->args->orphans && !rp->args->csv) fputs("\n  ],\n  \"orphans\": [", out);
    if (!rc && rp->args->orphans) rc = dd_replay_write_orphans(rp, out, errstr, errstr_size);
    if (rp->args->csv)
        dd_replay_write_trailer(rp, out, complete);
    else
        fputs("\n  ]\n}\n", out);
    return rc;
}

static int dd_replay_report(dd_replay_t *rp, int complete, char *errstr, size_t errstr_size)
{
    const char *path = rp->args->report;
    FILE *out = path ? fopen(path, "w") : stdout;
    int rc = DD_OK;

    if (!out) {
        dd_errstr_set(errstr, errstr_size, "cannot write %s: %s", path, strerror(errno));
        return DD_ERR_IO;
    }
    if (rp->args->orphans) rc = dd_replay_find_orphans(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_write(rp, out, complete, errstr, errstr_size);
    if (fflush(out) != 0 || ferror(out)) {
        if (!rc)
            dd_errstr_set(errstr, errstr_size, "writing %s: %s", path ? path : "stdout",
                          strerror(errno));
        rc = rc ? rc : DD_ERR_IO;
    }
    if (path && fclose(out) != 0 && !rc) {
        dd_errstr_set(errstr, errstr_size, "writing %s: %s", path, strerror(errno));
        rc = DD_ERR_IO;
    }
    return rc;
}

/* ---- the terminal: progress and summary on stderr ---- */

static void dd_replay_progress(dd_replay_t *rp, int final)
{
    int64_t now = dd_now_ms(), left = rp->total - rp->progress;
    double secs, rate;

    if (!rp->tty || (!final && now - rp->progress_ms < 250)) return;
    rp->progress_ms = now;
    if (final) {
        fputs("\r\033[K", stderr);
        return;
    }
    secs = (double)(now - rp->t0_ms) / 1000.0;
    rate = secs > 0 ? (double)rp->progress / secs : 0;
    fprintf(stderr, "\rreplay: %lld / %lld messages (%d%%), %.0f msg/s, ETA ",
            (long long)rp->progress, (long long)rp->total,
            rp->total ? (int)(100 * rp->progress / rp->total) : 100, rate);
    if (rate > 0)
        fprintf(stderr, "%.0fs\033[K", (double)left / rate);
    else
        fputs("?\033[K", stderr);
}

static void dd_replay_print_summary(dd_replay_t *rp, int complete)
{
    dd_replay_kv_t kv[DD_REPLAY_KV_MAX];
    size_t n = dd_replay_kvs(rp, kv);
    double secs = (double)(dd_now_ms() - rp->t0_ms) / 1000.0;

    fprintf(stderr, "dedupd replay (%s%s): %d partition(s) in %.1f s\n",
            rp->args->apply ? "apply" : "report only", complete ? "" : ", INTERRUPTED",
            rp->part_cnt, secs);
    for (size_t i = 0; i < n; i++) {
        int sub =
            i >= 2 + (DD_RS_CNT - 1) && i < 2 + (DD_RS_CNT - 1) + (DD_REASON_PAYLOAD_TOO_LARGE + 1);
        if (sub && kv[i].value == 0)
            continue; /* bad-message breakdown: only the reasons that occurred */
        fprintf(stderr, "  %s%-*s %12llu\n", sub ? "  " : "", sub ? 16 : 18, kv[i].name,
                (unsigned long long)kv[i].value);
    }
}

/* ---- the run ---- */

/* Applies the TIME bounds to a message in the range. Returns 1 when the
 * message is to be judged; moves the range's ends as the bounds show them,
 * so --orphans looks at the range that was actually judged. */
static int dd_replay_in_time(dd_replay_t *rp, dd_replay_part_t *pt, rd_kafka_message_t *rkm)
{
    int64_t ts = rd_kafka_message_timestamp(rkm, NULL);

    if (pt->to_ts >= 0 && ts >= pt->to_ts) {
        pt->end = rkm->offset;
        dd_replay_advance(rp, pt, pt->end);
        return 0;
    }
    dd_replay_advance(rp, pt, rkm->offset + 1);
    if (pt->from_ts < 0) return 1;
    if (ts >= 0 && ts < pt->from_ts) {
        pt->start = rkm->offset + 1;
        return 0;
    }
    pt->from_ts = -1; /* the first message at or after the time: take the rest */
    return 1;
}

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
    return dd_replay_message(rp, rkm, errstr, errstr_size);
}

static int dd_replay_consume(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    rp->t0_ms = dd_now_ms();
    while (!rc && rp->parts_left > 0 && !dd_stop_requested) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rp->rk, 100);
        if (rkm) rc = dd_replay_take(rp, rkm, errstr, errstr_size);
        if (!rc && rp->lane) rc = dd_replay_apply_drain(rp, 0, errstr, errstr_size);
        dd_replay_progress(rp, 0);
    }
    if (!rc) rc = dd_replay_flush(rp, errstr, errstr_size);
    dd_replay_progress(rp, 1);
    return rc;
}

static int dd_replay_setup(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_replay_args_t *args = rp->args;
    dd_conf_t *conf;
    int rc = dd_conf_load(&rp->conf, args->config, errstr, errstr_size);

    if (rc) return rc;
    conf = rp->conf;
    dd_log_setup((dd_log_level_t)conf->log.level, (dd_log_format_t)conf->log.format);
    for (int i = 0; !args->topic_cnt && i < conf->kafka.topic_cnt && i < DD_REPLAY_MAX_TOPICS; i++)
        args->topics[i] = conf->kafka.topics[i];
    if (!args->topic_cnt) args->topic_cnt = conf->kafka.topic_cnt;
    rc = dd_key_tmpl_new(&rp->tmpl, conf->dedup.key, errstr, errstr_size);
    if (!rc)
        rc = dd_hash_spec_new(&rp->hspec, conf->dedup.hash, conf->dedup.hash_cnt, errstr,
                              errstr_size);
    if (!rc && !(rp->doc = dd_json_doc_new())) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
    }
    if (!rc) rc = dd_db_open(&rp->db, conf, errstr, errstr_size);
    if (!rc)
        rc = dd_migrate_check_key_format(dd_db_mysql(rp->db), conf->dedup.table, errstr,
                                         errstr_size);
    if (!rc)
        rc = dd_grants_check(rp->db, conf,
                             DD_GRANTS_READ | DD_GRANTS_TEMP | (args->apply ? DD_GRANTS_CLAIM : 0),
                             errstr, errstr_size);
    if (!rc) rc = dd_replay_temp_tables(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_kafka_new(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_partitions(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_ranges(rp, errstr, errstr_size);
    if (!rc && args->apply) rc = dd_replay_apply_start(rp, errstr, errstr_size);
    if (!rc) rc = dd_replay_assign(rp, errstr, errstr_size);
    return rc;
}

static void dd_replay_free_list(dd_item_t *list)
{
    dd_item_t *next;

    for (; list; list = next) {
        next = list->next;
        dd_replay_item_free(list);
    }
}

static void dd_replay_destroy(dd_replay_t *rp)
{
    dd_item_t *leftover = NULL;

    if (!rp) return;
    for (size_t i = 0; i < rp->n; i++)
        dd_replay_item_free(rp->batch[i]);
    if (rp->lane) {
        rp->sh.stop_hard = 1;
        dd_lane_join(rp->lane, &leftover);
    }
    dd_replay_free_list(leftover);
    if (rp->sh_ready) {
        dd_replay_free_list(rp->sh.done_head);
        pthread_mutex_destroy(&rp->sh.mu);
        pthread_cond_destroy(&rp->sh.cv);
    }
    dd_handler_destroy(rp->h);
    if (rp->rk) {
        rd_kafka_consumer_close(rp->rk);
        rd_kafka_destroy(rp->rk);
    }
    dd_db_close(rp->db);
    dd_buf_free(&rp->sql);
    dd_key_tmpl_destroy(rp->tmpl);
    dd_hash_spec_destroy(rp->hspec);
    dd_json_doc_destroy(rp->doc);
    dd_conf_destroy(rp->conf);
    free(rp->parts);
    free(rp);
}


int dd_replay_main(int argc, char **argv)
{
    dd_replay_args_t args;
    dd_replay_t *rp = NULL;
    char err[1024] = "", aerr[1024] = "";
    int rc, arc, complete;

    memset(&args, 0, sizeof(args));
    rc = dd_replay_args(&args, argc, argv);
    if (rc) {
        free(args.parts);
        return rc < 0 ? 0 : rc;
    }
    dd_signals_install();
    rp = calloc(1, sizeof(*rp));
    if (!rp) {
        free(args.parts);
        fprintf(stderr, "dedupd replay: out of memory\n");
        return 1;
    }
    rp->args = &args;
    rp->tty = isatty(2);
    rc = dd_replay_setup(rp, err, sizeof(err));
    if (!rc) rc = dd_replay_consume(rp, err, sizeof(err));
    arc = dd_replay_apply_finish(rp, aerr, sizeof(aerr));
    if (!rc && arc) {
        rc = arc;
        snprintf(err, sizeof(err), "%s", aerr);
    }
    complete = !dd_stop_requested && rp->parts_left == 0;
    if (!rc) rc = dd_replay_report(rp, complete, err, sizeof(err));
    if (!rc) dd_replay_print_summary(rp, complete);
    if (rc)
        fprintf(stderr, "dedupd replay: %s\n", err);
    else if (!complete)
        fprintf(stderr, "dedupd replay: interrupted; the report covers what was read.\n");
    dd_replay_destroy(rp);
    free(args.parts);
    return rc || !complete ? 1 : 0;
}
