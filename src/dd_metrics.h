/*
 * Prometheus text exposition (format 0.0.4) of the pipeline's counters and
 * gauges. Kept apart from the HTTP server so the rendering can be unit
 * tested without a socket, a pipeline or a database: it is a pure function of
 * a dd_stats_t snapshot and a lag snapshot.
 */
#ifndef DD_METRICS_H
#define DD_METRICS_H

#include <stddef.h>

#include "dd_pipeline.h"

/* Renders every metric into a malloc'd, NUL-terminated text; the caller
 * frees *outp. lags may be NULL when lag_cnt is 0; partitions whose lag is
 * unknown (-1) are left out rather than reported as a number. Returns 0 or
 * DD_ERR_NOMEM. */
int dd_metrics_render(const dd_stats_t *s, const dd_lag_t *lags, size_t lag_cnt, char **outp,
                      size_t *lenp);

#endif /* DD_METRICS_H */
