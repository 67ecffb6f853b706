/*
 * Prometheus rendering of a pipeline snapshot.
 *
 * Counters are printed as exact integers (never through a double), so a
 * scrape can be compared with the run's summary line digit for digit. The
 * counters a message counts in carry its route's label, and only that
 * series exists for them: sum() over the label is the total, as the
 * summary line prints it. External mode's counters and the compensation
 * scan's gauges are a route's too (its handler's mode, its table). The
 * histogram's buckets arrive non-cumulative from the lanes and are summed
 * here, because Prometheus buckets are cumulative ("le" = less or equal);
 * so are those of the latency histograms, a series set per route.
 */
#include "dd_metrics.h"
#include "dd_metrics_def.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "dd_common.h"
#include "dd_registry.h"

#ifndef DEDUPD_VERSION
#define DEDUPD_VERSION "0.1.0"
#endif

const dd_metric_def_t dd_metric_defs[DD_METRIC_CNT] = {
#define DD_METRICS_DEF(id, name, type, labels, flags, help, doc)                                   \
    [DD_METRIC_##id] = {name, DD_METRIC_##type, labels, flags, help, doc},
    DD_METRIC_TABLE(DD_METRICS_DEF)
#undef DD_METRICS_DEF
};

const char *dd_metric_type2str(dd_metric_type_t type)
{
    return type == DD_METRIC_COUNTER ? "counter" : type == DD_METRIC_GAUGE ? "gauge" : "histogram";
}

#define DD_METRICS_NAME(m) (dd_metric_defs[DD_METRIC_##m].name)

/* The HELP and TYPE lines of metric m, from the table. */
static void dd_metrics_head(FILE *f, dd_metric_t m)
{
    const dd_metric_def_t *d = &dd_metric_defs[m];

    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name,
            dd_metric_type2str(d->type));
}

static void dd_metrics_counter(FILE *f, dd_metric_t m, uint64_t v)
{
    dd_metrics_head(f, m);
    fprintf(f, "%s %llu\n", dd_metric_defs[m].name, (unsigned long long)v);
}

static void dd_metrics_gauge(FILE *f, dd_metric_t m, long long v)
{
    dd_metrics_head(f, m);
    fprintf(f, "%s %lld\n", dd_metric_defs[m].name, v);
}

/* A label value: backslash, double quote and newline are escaped. */
static void dd_metrics_label(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '\n') {
            fputs("\\n", f);
            continue;
        }
        if (*s == '\\' || *s == '"') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A sample in seconds, with prec decimals. */
static void dd_metrics_seconds(FILE *f, dd_metric_t m, int prec, double v)
{
    dd_metrics_head(f, m);
    fprintf(f, "%s %.*f\n", dd_metric_defs[m].name, prec, v);
}

/* A counter per route: name{route="..."} v, one series per route. */
static void dd_metrics_route_counter(FILE *f, dd_metric_t m, const dd_stats_t *s,
                                     const char *const *routes, int route_cnt, size_t field)
{
    dd_metrics_head(f, m);
    for (int r = 0; r < route_cnt; r++) {
        fprintf(f, "%s{route=", dd_metric_defs[m].name);
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %llu\n",
                (unsigned long long)*(const uint64_t *)((const char *)&s->route[r] + field));
    }
}

#define DD_METRICS_RS(field) offsetof(dd_route_stats_t, field)

/* The dead letters: a series per route and reason the snapshot lists. */
static void dd_metrics_dead_letters(FILE *f, const dd_stats_t *s, const char *const *routes,
                                    int route_cnt)
{
    dd_metrics_head(f, DD_METRIC_DEAD_LETTERS);
    for (int r = 0; r < route_cnt; r++) {
        for (int i = 0; i < DD_REASON_CNT; i++) {
            if (!dd_stats_reason_listed((dd_reason_t)i, s->shard_cnt)) continue;
            fprintf(f, "%s{route=", DD_METRICS_NAME(DEAD_LETTERS));
            dd_metrics_label(f, routes[r]);
            fprintf(f, ",reason=\"%s\"} %llu\n", dd_reason2str((dd_reason_t)i),
                    (unsigned long long)s->route[r].dead_letters[i]);
        }
    }
}

/* The schema registry's failed fetches: a series per fault. */
static void dd_metrics_registry(FILE *f, const dd_stats_t *s)
{
    dd_metrics_head(f, DD_METRIC_REGISTRY_FAULTS);
    for (int i = 0; i < DD_REGISTRY_FAULT_CNT; i++)
        fprintf(f, "%s{fault=\"%s\"} %llu\n", DD_METRICS_NAME(REGISTRY_FAULTS),
                dd_registry_fault_name(i), (unsigned long long)s->registry_faults[i]);
}

static void dd_metrics_external(FILE *f, const dd_stats_t *s, const char *const *routes,
                                int route_cnt)
{
    static const char *const answers[3] = {"done", "not_done", "unknown"};

    dd_metrics_route_counter(f, DD_METRIC_EXTERNAL_WAITS, s, routes, route_cnt,
                             DD_METRICS_RS(ext_waits));
    dd_metrics_route_counter(f, DD_METRIC_EXTERNAL_TAKEOVERS, s, routes, route_cnt,
                             DD_METRICS_RS(ext_takeovers));
    dd_metrics_head(f, DD_METRIC_EXTERNAL_RECONCILE);
    for (int r = 0; r < route_cnt; r++) {
        for (int i = 0; i < 3; i++) {
            fprintf(f, "%s{route=", DD_METRICS_NAME(EXTERNAL_RECONCILE));
            dd_metrics_label(f, routes[r]);
            fprintf(f, ",answer=\"%s\"} %llu\n", answers[i],
                    (unsigned long long)s->route[r].ext_reconciled[i]);
        }
    }
    dd_metrics_route_counter(f, DD_METRIC_EXTERNAL_LOST_CLAIMS, s, routes, route_cnt,
                             DD_METRICS_RS(ext_stale));
}

/* A series per database shard of metric m, its value the uint64_t at
 * field of the shard's counters (or its shard_up when field is -1). */
static void dd_metrics_shard_series(FILE *f, const dd_stats_t *s, dd_metric_t m, long field)
{
    dd_metrics_head(f, m);
    for (int i = 0; i < s->shard_cnt && i < DD_STATS_SHARD_MAX; i++) {
        unsigned long long v = field < 0 ? (unsigned long long)s->shard_up[i]
                                         : *(const uint64_t *)((const char *)&s->shard[i] + field);

        fprintf(f, "%s{shard=\"%d\"} %llu\n", dd_metric_defs[m].name, i, v);
    }
}

static void dd_metrics_db_errors(FILE *f, const dd_stats_t *s)
{
    const char *name = DD_METRICS_NAME(DB_ERRORS);

    dd_metrics_head(f, DD_METRIC_DB_ERRORS);
    if (s->shard_cnt <= 1) {
        fprintf(f, "%s{class=\"retriable\"} %llu\n", name,
                (unsigned long long)s->db_errors_retriable);
        fprintf(f, "%s{class=\"fatal\"} %llu\n", name, (unsigned long long)s->db_errors_fatal);
        return;
    }
    for (int i = 0; i < s->shard_cnt && i < DD_STATS_SHARD_MAX; i++)
        fprintf(f,
                "%s{class=\"retriable\",shard=\"%d\"} %llu\n"
                "%s{class=\"fatal\",shard=\"%d\"} %llu\n",
                name, i, (unsigned long long)s->shard[i].db_errors_retriable, name, i,
                (unsigned long long)s->shard[i].db_errors_fatal);
    dd_metrics_shard_series(f, s, DD_METRIC_SHARD_UP, -1);
    dd_metrics_shard_series(f, s, DD_METRIC_SHARD_APPLIED,
                            (long)offsetof(dd_shard_stats_t, applied));
    dd_metrics_shard_series(f, s, DD_METRIC_SHARD_CHECK_SKIPPED,
                            (long)offsetof(dd_shard_stats_t, check_skipped));
}

static void dd_metrics_counters(FILE *f, const dd_stats_t *s, const char *const *routes,
                                int route_cnt)
{
    dd_metrics_route_counter(f, DD_METRIC_MESSAGES, s, routes, route_cnt, DD_METRICS_RS(messages));
    dd_metrics_route_counter(f, DD_METRIC_APPLIED, s, routes, route_cnt, DD_METRICS_RS(applied));
    dd_metrics_route_counter(f, DD_METRIC_DUPLICATES, s, routes, route_cnt,
                             DD_METRICS_RS(duplicates));
    dd_metrics_route_counter(f, DD_METRIC_CONFLICTS, s, routes, route_cnt,
                             DD_METRICS_RS(conflicts));
    dd_metrics_route_counter(f, DD_METRIC_RETRIES, s, routes, route_cnt, DD_METRICS_RS(retries));
    dd_metrics_counter(f, DD_METRIC_BATCHES, s->batches);
    dd_metrics_route_counter(f, DD_METRIC_BATCHED, s, routes, route_cnt, DD_METRICS_RS(batched));
    dd_metrics_route_counter(f, DD_METRIC_BATCH_DECLINED, s, routes, route_cnt,
                             DD_METRICS_RS(batch_declined));
    dd_metrics_counter(f, DD_METRIC_CLAIM_RACES, s->claim_races);
    dd_metrics_counter(f, DD_METRIC_POSITION_REWINDS, s->position_rewinds);
    dd_metrics_counter(f, DD_METRIC_POSITION_GAPS, s->position_gaps);
    dd_metrics_counter(f, DD_METRIC_POSITION_GAP_OFFSETS, s->position_gap_messages);
    dd_metrics_counter(f, DD_METRIC_POSITION_MISMATCHES, s->position_mismatches);
    dd_metrics_counter(f, DD_METRIC_POSITION_ERRORS, s->position_errors);
    dd_metrics_seconds(f, DD_METRIC_FETCH_WAIT, 3, (double)s->fetch_wait_us / 1e6);
    dd_metrics_dead_letters(f, s, routes, route_cnt);
    dd_metrics_route_counter(f, DD_METRIC_TOMBSTONES_SKIPPED, s, routes, route_cnt,
                             DD_METRICS_RS(tombstones_skipped));
    dd_metrics_registry(f, s);
    dd_metrics_external(f, s, routes, route_cnt);
    dd_metrics_db_errors(f, s);
}

static void dd_metrics_histogram(FILE *f, const dd_stats_t *s)
{
    const char *name = DD_METRICS_NAME(BATCH_SECONDS);
    uint64_t cum = 0;

    dd_metrics_head(f, DD_METRIC_BATCH_SECONDS);
    for (int i = 0; i < DD_BATCH_BUCKETS - 1; i++) {
        cum += s->batch_buckets[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, dd_stats_batch_bounds[i],
                (unsigned long long)cum);
    }
    cum += s->batch_buckets[DD_BATCH_BUCKETS - 1];
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    fprintf(f, "%s_sum %.6f\n", name, s->batch_seconds_sum);
    fprintf(f, "%s_count %llu\n", name, (unsigned long long)cum);
}

/* A histogram per route: the dd_msg_hist_t at field of each route's
 * counters, its buckets summed into Prometheus' cumulative ones. */
static void dd_metrics_route_histogram(FILE *f, dd_metric_t m, const dd_stats_t *s,
                                       const char *const *routes, int route_cnt, size_t field)
{
    const char *name = dd_metric_defs[m].name;

    dd_metrics_head(f, m);
    for (int r = 0; r < route_cnt; r++) {
        const dd_msg_hist_t *h =
            (const dd_msg_hist_t *)(const void *)((const char *)&s->route[r] + field);
        uint64_t cum = 0;

        for (int i = 0; i < DD_MSG_BUCKETS; i++) {
            cum += h->bucket[i];
            fprintf(f, "%s_bucket{route=", name);
            dd_metrics_label(f, routes[r]);
            if (i < DD_MSG_BUCKETS - 1)
                fprintf(f, ",le=\"%g\"} %llu\n", dd_stats_msg_bounds[i], (unsigned long long)cum);
            else
                fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
        }
        fprintf(f, "%s_sum{route=", name);
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %.6f\n%s_count{route=", h->sum_s, name);
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %llu\n", (unsigned long long)cum);
    }
}

/* The compensation scan's gauges, one series per route it scans (a
 * route in external mode, once a scan counted); none at all before. */
static void dd_metrics_processing(FILE *f, const dd_stats_t *s, const char *const *routes,
                                  int route_cnt)
{
    int any = 0;

    for (int r = 0; r < route_cnt; r++)
        any |= s->processing_stuck[r] >= 0;
    if (!any) return;
    dd_metrics_head(f, DD_METRIC_PROCESSING_STUCK);
    for (int r = 0; r < route_cnt; r++) {
        if (s->processing_stuck[r] < 0) continue;
        fprintf(f, "%s{route=", DD_METRICS_NAME(PROCESSING_STUCK));
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %lld\n", (long long)s->processing_stuck[r]);
    }
    dd_metrics_head(f, DD_METRIC_PROCESSING_OLDEST);
    for (int r = 0; r < route_cnt; r++) {
        if (s->processing_stuck[r] < 0) continue;
        fprintf(f, "%s{route=", DD_METRICS_NAME(PROCESSING_OLDEST));
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %.3f\n", s->processing_oldest_s[r]);
    }
}

/* The outbox relay's figures, when it runs in this process. */
static void dd_metrics_outbox(FILE *f, const dd_outbox_stats_t *o)
{
    if (!o->on) return;
    if (o->backlog >= 0) dd_metrics_gauge(f, DD_METRIC_OUTBOX_BACKLOG, (long long)o->backlog);
    dd_metrics_seconds(f, DD_METRIC_OUTBOX_OLDEST, 3, o->oldest_s);
    dd_metrics_gauge(f, DD_METRIC_OUTBOX_PARKED, (long long)o->parked);
    dd_metrics_gauge(f, DD_METRIC_OUTBOX_LEADING, o->leading);
    dd_metrics_counter(f, DD_METRIC_OUTBOX_SENT, o->sent);
    dd_metrics_counter(f, DD_METRIC_OUTBOX_PARKED_TOTAL, o->refused);
    dd_metrics_counter(f, DD_METRIC_OUTBOX_FAILURES, o->failed);
}

static void dd_metrics_gauges(FILE *f, const dd_stats_t *s, const char *const *routes,
                              int route_cnt, const dd_lag_t *lags, size_t lag_cnt)
{
    dd_metrics_gauge(f, DD_METRIC_INFLIGHT, (long long)s->inflight);
    dd_metrics_gauge(f, DD_METRIC_ASSIGNED, s->assigned);
    dd_metrics_gauge(f, DD_METRIC_DLQ_SKIPPED, s->dlq_skipped);
    dd_metrics_gauge(f, DD_METRIC_RUNNING, s->running);
    dd_metrics_processing(f, s, routes, route_cnt);
    dd_metrics_outbox(f, &s->outbox);

    dd_metrics_head(f, DD_METRIC_CONSUMER_LAG);
    for (size_t i = 0; i < lag_cnt; i++) {
        if (lags[i].lag < 0) continue;
        fprintf(f, "%s{", DD_METRICS_NAME(CONSUMER_LAG));
        if (lags[i].group) {
            fputs("group=", f);
            dd_metrics_label(f, lags[i].group);
            fputc(',', f);
        }
        fputs("topic=", f);
        dd_metrics_label(f, lags[i].topic);
        fprintf(f, ",partition=\"%d\"} %lld\n", (int)lags[i].partition, (long long)lags[i].lag);
    }
}

/* Unix time the process started: its start in clock ticks after boot
 * (field 22 of /proc/self/stat; fields are counted from the last ")", since
 * the command name before it may hold spaces and parentheses) plus the boot
 * time in /proc/stat. */
static double dd_metrics_start_time(void)
{
    char buf[1024], *p, *end;
    unsigned long long start_ticks;
    long long btime = -1;
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

    if (f) fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* ends field 2; field k starts after the (k-2)th space */
    for (int i = 0; i < 20 && p; i++)
        p = strchr(p + 1, ' ');
    if (!p || hz <= 0) return -1;
    start_ticks = strtoull(p + 1, &end, 10);
    if (end == p + 1) return -1;
    if (!(f = fopen("/proc/stat", "r"))) return -1;
    while (fgets(buf, sizeof(buf), f))
        if (sscanf(buf, "btime %lld", &btime) == 1) break;
    fclose(f);
    return btime < 0 ? -1 : (double)btime + (double)start_ticks / (double)hz;
}

/* Open descriptors: the entries of /proc/self/fd, less the one reading it. */
static long long dd_metrics_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long long n = 0;

    if (!d) return -1;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;
}

void dd_metrics_proc_read(dd_proc_t *proc)
{
    struct rusage ru;
    struct rlimit rl;
    long long pages_virt, pages_res;
    long page = sysconf(_SC_PAGESIZE);
    FILE *f;

    proc->cpu_seconds = -1;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        proc->cpu_seconds = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                            (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    proc->resident_bytes = proc->virtual_bytes = -1;
    if ((f = fopen("/proc/self/statm", "r"))) {
        if (fscanf(f, "%lld %lld", &pages_virt, &pages_res) == 2 && page > 0) {
            proc->virtual_bytes = pages_virt * page;
            proc->resident_bytes = pages_res * page;
        }
        fclose(f);
    }
    proc->open_fds = dd_metrics_open_fds();
    proc->max_fds = -1;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        proc->max_fds = (long long)rl.rlim_cur;
    proc->start_time_seconds = dd_metrics_start_time();
}

static void dd_metrics_process(FILE *f, const dd_proc_t *p)
{
    if (p->cpu_seconds >= 0) dd_metrics_seconds(f, DD_METRIC_PROCESS_CPU, 3, p->cpu_seconds);
    if (p->start_time_seconds >= 0)
        dd_metrics_seconds(f, DD_METRIC_PROCESS_START, 2, p->start_time_seconds);
    if (p->resident_bytes >= 0) dd_metrics_gauge(f, DD_METRIC_PROCESS_RESIDENT, p->resident_bytes);
    if (p->virtual_bytes >= 0) dd_metrics_gauge(f, DD_METRIC_PROCESS_VIRTUAL, p->virtual_bytes);
    if (p->open_fds >= 0) dd_metrics_gauge(f, DD_METRIC_PROCESS_OPEN_FDS, p->open_fds);
    if (p->max_fds >= 0) dd_metrics_gauge(f, DD_METRIC_PROCESS_MAX_FDS, p->max_fds);
}

/* Which dedupd and libraries this is, as Prometheus' *_build_info
 * convention has it: a gauge of 1 whose labels are the versions. */
static void dd_metrics_build_info(FILE *f)
{
    dd_metrics_head(f, DD_METRIC_BUILD_INFO);
    fprintf(f, "%s{version=", DD_METRICS_NAME(BUILD_INFO));
    dd_metrics_label(f, DEDUPD_VERSION);
    fputs(",librdkafka=", f);
    dd_metrics_label(f, rd_kafka_version_str());
    fputs(",mysql_client=", f);
    dd_metrics_label(f, mysql_get_client_info());
    fputs("} 1\n", f);
}

int dd_metrics_render(const dd_stats_t *s, const char *const *routes, int route_cnt,
                      const dd_lag_t *lags, size_t lag_cnt, const dd_proc_t *proc, char **outp,
                      size_t *lenp)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    *outp = NULL;
    *lenp = 0;
    f = open_memstream(&buf, &len);
    if (!f) return DD_ERR_NOMEM;
    dd_metrics_build_info(f);
    dd_metrics_counters(f, s, routes, route_cnt);
    dd_metrics_histogram(f, s);
    dd_metrics_route_histogram(f, DD_METRIC_END_TO_END, s, routes, route_cnt,
                               DD_METRICS_RS(end_to_end));
    dd_metrics_route_histogram(f, DD_METRIC_POLL_TO_COMMIT, s, routes, route_cnt,
                               DD_METRICS_RS(poll_to_commit));
    dd_metrics_gauges(f, s, routes, route_cnt, lags, lag_cnt);
    if (proc) dd_metrics_process(f, proc);
    if (ferror(f)) {
        fclose(f);
        free(buf);
        return DD_ERR_NOMEM;
    }
    fclose(f);
    *outp = buf;
    *lenp = len;
    return DD_OK;
}
