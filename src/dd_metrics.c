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
 * here, because Prometheus buckets are cumulative ("le" = less or equal).
 */
#include "dd_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "dd_common.h"

#ifndef DEDUPD_VERSION
#define DEDUPD_VERSION "0.1.0"
#endif

static void dd_metrics_head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void dd_metrics_counter(FILE *f, const char *name, const char *help, uint64_t v)
{
    dd_metrics_head(f, name, "counter", help);
    fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

static void dd_metrics_gauge(FILE *f, const char *name, const char *help, long long v)
{
    dd_metrics_head(f, name, "gauge", help);
    fprintf(f, "%s %lld\n", name, v);
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
static void dd_metrics_seconds(FILE *f, const char *name, const char *type, const char *help,
                               int prec, double v)
{
    dd_metrics_head(f, name, type, help);
    fprintf(f, "%s %.*f\n", name, prec, v);
}

/* A counter per route: name{route="..."} v, one series per route. */
static void dd_metrics_route_counter(FILE *f, const char *name, const char *help,
                                     const dd_stats_t *s, const char *const *routes, int route_cnt,
                                     size_t field)
{
    dd_metrics_head(f, name, "counter", help);
    for (int r = 0; r < route_cnt; r++) {
        fprintf(f, "%s{route=", name);
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %llu\n",
                (unsigned long long)*(const uint64_t *)((const char *)&s->route[r] + field));
    }
}

#define DD_METRICS_RS(field) offsetof(dd_route_stats_t, field)

static void dd_metrics_counters(FILE *f, const dd_stats_t *s, const char *const *routes,
                                int route_cnt)
{
    dd_metrics_route_counter(f, "dedupd_messages_total", "Messages consumed, each counted once.", s,
                             routes, route_cnt, DD_METRICS_RS(messages));
    dd_metrics_route_counter(f, "dedupd_applied_total",
                             "Messages applied by the handler and committed.", s, routes, route_cnt,
                             DD_METRICS_RS(applied));
    dd_metrics_route_counter(f, "dedupd_duplicates_total",
                             "Messages skipped because the same key and request hash were "
                             "applied.",
                             s, routes, route_cnt, DD_METRICS_RS(duplicates));
    dd_metrics_route_counter(f, "dedupd_conflicts_total",
                             "Messages whose key was applied with a different request hash.", s,
                             routes, route_cnt, DD_METRICS_RS(conflicts));
    dd_metrics_route_counter(f, "dedupd_retries_total", "Handler RETRY results.", s, routes,
                             route_cnt, DD_METRICS_RS(retries));
    dd_metrics_counter(f, "dedupd_batches_total", "Claim transactions committed.", s->batches);
    dd_metrics_route_counter(f, "dedupd_batched_total",
                             "Messages applied through the handler's handle_batch().", s, routes,
                             route_cnt, DD_METRICS_RS(batched));
    dd_metrics_route_counter(f, "dedupd_batch_declined_total",
                             "handle_batch() calls the handler declined; those transactions went "
                             "message by message.",
                             s, routes, route_cnt, DD_METRICS_RS(batch_declined));
    dd_metrics_counter(f, "dedupd_claim_races_total",
                       "Transactions rolled back and replayed with the locking claim because "
                       "another consumer inserted a deferred key first.",
                       s->claim_races);
    dd_metrics_seconds(f, "dedupd_fetch_wait_seconds_total", "counter",
                       "Time the consumer waited for librdkafka to deliver messages that the "
                       "broker already had (a prefetch queue too small, or a slow broker).",
                       3, (double)s->fetch_wait_us / 1e6);

    dd_metrics_head(f, "dedupd_dead_letters_total", "counter",
                    "Dead letters acknowledged by the dead-letter topic, by route and reason.");
    for (int r = 0; r < route_cnt; r++) {
        for (int i = 0; i < dd_stats_reason_cnt(s->shard_cnt); i++) {
            fputs("dedupd_dead_letters_total{route=", f);
            dd_metrics_label(f, routes[r]);
            fprintf(f, ",reason=\"%s\"} %llu\n", dd_reason2str((dd_reason_t)i),
                    (unsigned long long)s->route[r].dead_letters[i]);
        }
    }

    dd_metrics_route_counter(f, "dedupd_external_waits_total",
                             "External mode: times a message found its key in progress under "
                             "another claim and waited.",
                             s, routes, route_cnt, DD_METRICS_RS(ext_waits));
    dd_metrics_route_counter(f, "dedupd_external_takeovers_total",
                             "External mode: claims taken over after their lease ran out (or "
                             "failed keys claimed again).",
                             s, routes, route_cnt, DD_METRICS_RS(ext_takeovers));
    dd_metrics_head(f, "dedupd_external_reconcile_total", "counter",
                    "External mode: reconcile() answers after takeovers, by route and answer.");
    for (int r = 0; r < route_cnt; r++) {
        for (int i = 0; i < 3; i++) {
            fputs("dedupd_external_reconcile_total{route=", f);
            dd_metrics_label(f, routes[r]);
            fprintf(f, ",answer=\"%s\"} %llu\n",
                    i == 0   ? "done"
                    : i == 1 ? "not_done"
                             : "unknown",
                    (unsigned long long)s->route[r].ext_reconciled[i]);
        }
    }
    dd_metrics_route_counter(f, "dedupd_external_lost_claims_total",
                             "External mode: claims lost (taken over, or not renewed in time) "
                             "before their finish; the worker finished nothing.",
                             s, routes, route_cnt, DD_METRICS_RS(ext_stale));

    dd_metrics_head(f, "dedupd_db_errors_total", "counter",
                    "Database errors by class: retriable (batch replayed) or fatal (shutdown); "
                    "with several database shards, by shard too.");
    if (s->shard_cnt <= 1) {
        fprintf(f, "dedupd_db_errors_total{class=\"retriable\"} %llu\n",
                (unsigned long long)s->db_errors_retriable);
        fprintf(f, "dedupd_db_errors_total{class=\"fatal\"} %llu\n",
                (unsigned long long)s->db_errors_fatal);
        return;
    }
    for (int i = 0; i < s->shard_cnt && i < DD_STATS_SHARD_MAX; i++)
        fprintf(f,
                "dedupd_db_errors_total{class=\"retriable\",shard=\"%d\"} %llu\n"
                "dedupd_db_errors_total{class=\"fatal\",shard=\"%d\"} %llu\n",
                i, (unsigned long long)s->shard[i].db_errors_retriable, i,
                (unsigned long long)s->shard[i].db_errors_fatal);
    dd_metrics_head(f, "dedupd_shard_up", "gauge",
                    "1 when the lanes of the database shard reach it, 0 while they reconnect "
                    "after losing their connection.");
    for (int i = 0; i < s->shard_cnt && i < DD_STATS_SHARD_MAX; i++)
        fprintf(f, "dedupd_shard_up{shard=\"%d\"} %d\n", i, s->shard_up[i]);
    dd_metrics_head(f, "dedupd_shard_applied_total", "counter",
                    "Messages applied and committed, by database shard.");
    for (int i = 0; i < s->shard_cnt && i < DD_STATS_SHARD_MAX; i++)
        fprintf(f, "dedupd_shard_applied_total{shard=\"%d\"} %llu\n", i,
                (unsigned long long)s->shard[i].applied);
    dd_metrics_head(f, "dedupd_shard_check_skipped_total", "counter",
                    "Batches whose wrong-shard check went on without asking the database shard, "
                    "which did not answer (mysql.shard_check = skip, or auto while it checks).");
    for (int i = 0; i < s->shard_cnt && i < DD_STATS_SHARD_MAX; i++)
        fprintf(f, "dedupd_shard_check_skipped_total{shard=\"%d\"} %llu\n", i,
                (unsigned long long)s->shard[i].check_skipped);
}

static void dd_metrics_histogram(FILE *f, const dd_stats_t *s)
{
    uint64_t cum = 0;

    dd_metrics_head(f, "dedupd_batch_seconds", "histogram",
                    "Duration of committed claim transactions, handler included.");
    for (int i = 0; i < DD_BATCH_BUCKETS - 1; i++) {
        cum += s->batch_buckets[i];
        fprintf(f, "dedupd_batch_seconds_bucket{le=\"%g\"} %llu\n", dd_stats_batch_bounds[i],
                (unsigned long long)cum);
    }
    cum += s->batch_buckets[DD_BATCH_BUCKETS - 1];
    fprintf(f, "dedupd_batch_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    fprintf(f, "dedupd_batch_seconds_sum %.6f\n", s->batch_seconds_sum);
    fprintf(f, "dedupd_batch_seconds_count %llu\n", (unsigned long long)cum);
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
    dd_metrics_head(f, "dedupd_processing_stuck", "gauge",
                    "External mode: rows of the route's dedup table in processing past their "
                    "lease, as the last compensation scan counted them (summed over the "
                    "database shards).");
    for (int r = 0; r < route_cnt; r++) {
        if (s->processing_stuck[r] < 0) continue;
        fputs("dedupd_processing_stuck{route=", f);
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %lld\n", (long long)s->processing_stuck[r]);
    }
    dd_metrics_head(f, "dedupd_processing_oldest_seconds", "gauge",
                    "External mode: how long ago the lease of the oldest stuck row of the "
                    "route's dedup table ran out (0: none), as the last compensation scan "
                    "found it (the oldest over the database shards).");
    for (int r = 0; r < route_cnt; r++) {
        if (s->processing_stuck[r] < 0) continue;
        fputs("dedupd_processing_oldest_seconds{route=", f);
        dd_metrics_label(f, routes[r]);
        fprintf(f, "} %.3f\n", s->processing_oldest_s[r]);
    }
}

static void dd_metrics_gauges(FILE *f, const dd_stats_t *s, const char *const *routes,
                              int route_cnt, const dd_lag_t *lags, size_t lag_cnt)
{
    dd_metrics_gauge(f, "dedupd_inflight_messages", "Messages polled and not yet finished.",
                     (long long)s->inflight);
    dd_metrics_gauge(f, "dedupd_assigned_partitions", "Partitions assigned to this consumer.",
                     s->assigned);
    dd_metrics_gauge(f, "dedupd_running", "1 while the consumer loop runs.", s->running);
    dd_metrics_processing(f, s, routes, route_cnt);

    dd_metrics_head(f, "dedupd_consumer_lag", "gauge",
                    "High watermark minus the next offset to finish, per assigned partition "
                    "(refreshed every few seconds; absent while unknown).");
    for (size_t i = 0; i < lag_cnt; i++) {
        if (lags[i].lag < 0) continue;
        fputs("dedupd_consumer_lag{topic=", f);
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
    if (p->cpu_seconds >= 0)
        dd_metrics_seconds(f, "process_cpu_seconds_total", "counter",
                           "Total user and system CPU time spent in seconds.", 3, p->cpu_seconds);
    if (p->start_time_seconds >= 0)
        dd_metrics_seconds(f, "process_start_time_seconds", "gauge",
                           "Start time of the process since unix epoch in seconds.", 2,
                           p->start_time_seconds);
    if (p->resident_bytes >= 0)
        dd_metrics_gauge(f, "process_resident_memory_bytes", "Resident memory size in bytes.",
                         p->resident_bytes);
    if (p->virtual_bytes >= 0)
        dd_metrics_gauge(f, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                         p->virtual_bytes);
    if (p->open_fds >= 0)
        dd_metrics_gauge(f, "process_open_fds", "Number of open file descriptors.", p->open_fds);
    if (p->max_fds >= 0)
        dd_metrics_gauge(f, "process_max_fds", "Maximum number of open file descriptors.",
                         p->max_fds);
}

/* Which dedupd and libraries this is, as Prometheus' *_build_info
 * convention has it: a gauge of 1 whose labels are the versions. */
static void dd_metrics_build_info(FILE *f)
{
    dd_metrics_head(f, "dedupd_build_info", "gauge",
                    "Always 1; the labels are the versions of dedupd, librdkafka and the MySQL "
                    "client library.");
    fputs("dedupd_build_info{version=", f);
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
