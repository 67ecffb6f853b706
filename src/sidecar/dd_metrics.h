/*
 * Prometheus text exposition (format 0.0.4) of the pipeline's counters and
 * gauges. Kept apart from the HTTP server so the rendering can be unit
 * tested without a socket, a pipeline or a database: it is a pure function of
 * a dd_stats_t snapshot, a lag snapshot and the process's figures, which
 * dd_metrics_proc_read() takes from the system beforehand.
 */
#ifndef DD_METRICS_H
#define DD_METRICS_H

#include <stddef.h>

#include "dd_stats.h"

/* The process's own figures, under the names Prometheus client libraries
 * give them (process_*), so the usual dashboards and alerts work unchanged.
 * A figure that could not be read is negative and is left out. */
typedef struct dd_proc_s {
    double cpu_seconds;        /* user + system, all threads */
    double start_time_seconds; /* Unix time the process started */
    long long resident_bytes;
    long long virtual_bytes;
    long long open_fds;
    long long max_fds; /* the soft RLIMIT_NOFILE */
} dd_proc_t;

/* Reads this process's figures from getrusage(), getrlimit() and /proc. */
void dd_metrics_proc_read(dd_proc_t *proc);

/* Renders every metric into a malloc'd, NUL-terminated text; the caller
 * frees *outp. routes[0..route_cnt) name the routes (the route label of
 * the counters each message counts in: s->route[i] is routes[i]'s). lags
 * may be NULL when lag_cnt is 0; partitions whose lag is unknown (-1) are
 * left out rather than reported as a number. proc may be NULL (no
 * process_* metrics). Returns 0 or DD_ERR_NOMEM. */
int dd_metrics_render(const dd_stats_t *s, const char *const *routes, int route_cnt,
                      const dd_lag_t *lags, size_t lag_cnt, const dd_proc_t *proc, char **outp,
                      size_t *lenp);

#endif /* DD_METRICS_H */
