/*
 * `dedupd replay` command line (see dd_replay.h): positions, ISO-8601
 * times and durations, partition lists. Times are parsed without the C
 * library's time zone machinery (days_from_civil), so the result depends on
 * nothing but the text.
 */
#include "dd_replay_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dd_common.h"

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

int dd_replay_args_set(void *opts, int c, char *arg)
{
    dd_replay_args_t *args = opts;
    char err[512];

    switch (c) {
    case 'f':
    case 't':
        if (dd_replay_pos_parse(arg, args->now_ms, c == 'f' ? &args->from : &args->to, err,
                                sizeof(err)))
            break;
        if (c == 'f') args->have_from = 1;
        return 0;
    case 'T':
        return dd_replay_add_topics(args, arg);
    case 'p':
        free(args->parts);
        if (dd_replay_partitions_parse(arg, &args->parts, &args->part_cnt, err, sizeof(err))) break;
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

void dd_replay_args_init(void *opts)
{
    dd_replay_args_t *args = opts;
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    args->now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    args->to.kind = DD_REPLAY_POS_LATEST;
}

int dd_replay_args_check(void *opts, int argc, char **argv)
{
    dd_replay_args_t *args = opts;
    char err[512];

    if (argc > 0) {
        fprintf(stderr, "dedupd replay: unexpected argument '%s'\n", argv[0]);
        return 2;
    }
    if (!args->have_from) {
        fprintf(stderr, "dedupd replay: --from is required (see dedupd replay --help)\n");
        return 2;
    }
    if (dd_replay_range_check(&args->from, &args->to, err, sizeof(err)) != DD_OK) {
        fprintf(stderr, "dedupd replay: %s\n", err);
        return 2;
    }
    return 0;
}

const dd_cmd_opt_t dd_replay_args_opts[] = {
    DD_CMD_SET("from", "POS", 'f',
               "required: earliest, an OFFSET for every partition, or a\n"
               "TIME: ISO-8601 with a zone (2026-11-29T10:00:00Z) or back\n"
               "from now (-2h, -30m)"),
    DD_CMD_SET("to", "POS", 't',
               "the end, exclusive: latest (the default: the end offsets\n"
               "when replay starts), an OFFSET or a TIME"),
    DD_CMD_SET("topic", "T", 'T',
               "a topic to read (repeatable, or comma separated; default:\n"
               "the routes' topics, kafka.topics without routes)"),
    DD_CMD_SET("partitions", "LIST", 'p', "partitions to read, numbers and ranges (default: all)"),
    DD_CMD_FLAG("apply", dd_replay_args_t, apply,
                "run missing keys (and failed ones when\n"
                "dedup.retry_failed) through the claim + handler\n"
                "transaction; report-only without it. A route whose\n"
                "handler is in external mode is reported only (refused\n"
                "with --route naming it)"),
    DD_CMD_STR("report", "FILE", dd_replay_args_t, report,
               "write the report to FILE instead of stdout"),
    DD_CMD_SET("format", "FORMAT", 'F',
               "json (the default) or csv (a header and one row per\n"
               "entry, nothing else)"),
    DD_CMD_STR("summary", "FILE", dd_replay_args_t, summary,
               "also write the summary (JSON) to FILE; it always goes to\n"
               "stderr as a table"),
    DD_CMD_FLAG("orphans", dd_replay_args_t, orphans,
                "also list dedup rows first seen in the range whose key is\n"
                "not in it"),
    DD_CMD_FLAG("fail-on-findings", dd_replay_args_t, fail_on_findings,
                "exit 3 when keys are missing, conflicting or failed (after\n"
                "--apply: not repaired), in another shard (wrong_shard),\n"
                "or copies conflict"),
    DD_CMD_FLAG("all-consumed", dd_replay_args_t, all_consumed,
                "judge every message as consumed by the live group: a key\n"
                "without a row is missing, never pending (after a group\n"
                "reset, or to rebuild another database from the topic)"),
    DD_CMD_OPT_END,
};
