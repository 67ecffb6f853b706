/*
 * What the HTTP handler counts: each request's duration by the class of
 * its answer's status, and each call's outcome. Where dedupd takes a
 * handler's metrics (the host's metric_new, metric_add and
 * metric_observe, host version 3: DEDUPD_METRICS_MAX in the header), they
 * are on /metrics with dedupd's, each series labelled with its route:
 *   dedupd_handler_http_calls_total{route,outcome}
 *   dedupd_handler_http_request_seconds{route,kind,class}   (a histogram)
 * They are also kept here and summed up in one log line when the handler
 * stops, so a run says how its calls went without a scrape.
 */
#include "http.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static const char *const http_outcomes[] = {"done",
                                            "rejected",
                                            "retry",
                                            "error",
                                            "reconcile_done",
                                            "reconcile_not_done",
                                            "reconcile_unknown"};
#define HTTP_OUTCOMES (sizeof(http_outcomes) / sizeof(http_outcomes[0]))

/* "none" (no answer), 1xx .. 5xx */
#define HTTP_CLASSES 6
static const char *const http_classes[HTTP_CLASSES] = {"none", "1xx", "2xx", "3xx", "4xx", "5xx"};

struct http_metrics {
    const dedupd_host *host;
#ifdef DEDUPD_METRICS_MAX
    dedupd_metric *calls_metric; /* NULL: the host takes no metrics */
    dedupd_metric *seconds_metric;
#endif
    atomic_llong outcome[HTTP_OUTCOMES];
    atomic_llong requests[HTTP_CLASSES];
    atomic_llong micros[HTTP_CLASSES];
};

#ifdef DEDUPD_METRICS_MAX
/* Declares the metrics on /metrics, when the host has them. */
static void http_metrics_declare(http_metrics *m)
{
    static const char *const outcome[] = {"outcome"};
    static const char *const request[] = {"kind", "class"};
    const dedupd_host *h = m->host;
    char err[DEDUPD_ERROR_SIZE];

    if (!h || h->version < 3 || !h->metric_new) return;
    m->calls_metric =
        h->metric_new(h, DEDUPD_METRIC_COUNTER, "calls",
                      "Calls of the HTTP handler by outcome: done, rejected, retry, error "
                      "(no answer), reconcile_done, reconcile_not_done, reconcile_unknown.",
                      outcome, 1, NULL, 0, err, sizeof(err));
    if (!m->calls_metric) h->log(h, DEDUPD_LOG_WARN, "no metric of calls: %s", err);
    m->seconds_metric =
        h->metric_new(h, DEDUPD_METRIC_HISTOGRAM, "request_seconds",
                      "Duration of the HTTP handler's requests, by kind (act, "
                      "reconcile) and class of the answer's status (none: no answer).",
                      request, 2, NULL, 0, err, sizeof(err));
    if (!m->seconds_metric) h->log(h, DEDUPD_LOG_WARN, "no metric of requests: %s", err);
}
#endif

http_metrics *http_metrics_new(const dedupd_host *host)
{
    http_metrics *m = calloc(1, sizeof(*m));

    if (!m) return NULL;
    m->host = host;
#ifdef DEDUPD_METRICS_MAX
    http_metrics_declare(m);
#endif
    return m;
}

void http_metrics_destroy(http_metrics *m)
{
    char line[512];
    size_t n = 0;

    if (!m) return;
    for (int c = 0; c < HTTP_CLASSES; c++)
        n += (size_t)atomic_load(&m->requests[c]);
    if (!n) { /* no calls (dedupd check, migrate): nothing to say */
        free(m);
        return;
    }
    n = 0;
    for (size_t i = 0; i < HTTP_OUTCOMES && n < sizeof(line); i++)
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s=%lld", i ? " " : "",
                              http_outcomes[i], (long long)atomic_load(&m->outcome[i]));
    for (int c = 0; c < HTTP_CLASSES && n < sizeof(line); c++) {
        long long k = atomic_load(&m->requests[c]);
        if (k)
            n += (size_t)snprintf(line + n, sizeof(line) - n, " requests_%s=%lld mean_ms_%s=%.1f",
                                  http_classes[c], k, http_classes[c],
                                  (double)atomic_load(&m->micros[c]) / 1000 / k);
    }
    if (m->host && m->host->log) m->host->log(m->host, DEDUPD_LOG_INFO, "calls: %s", line);
    free(m);
}

void http_metrics_request(http_metrics *m, const char *kind, long status, double seconds)
{
    int c = status >= 100 && status <= 599 ? (int)(status / 100) : 0;

    atomic_fetch_add(&m->requests[c], 1);
    atomic_fetch_add(&m->micros[c], (long long)(seconds * 1e6));
#ifdef DEDUPD_METRICS_MAX
    if (m->seconds_metric) {
        const char *values[] = {kind, http_classes[c]};
        m->host->metric_observe(m->host, m->seconds_metric, values, seconds);
    }
#else
    (void)kind;
#endif
}

void http_metrics_outcome(http_metrics *m, const char *outcome)
{
    for (size_t i = 0; i < HTTP_OUTCOMES; i++)
        if (strcmp(http_outcomes[i], outcome) == 0) {
            atomic_fetch_add(&m->outcome[i], 1);
#ifdef DEDUPD_METRICS_MAX
            if (m->calls_metric)
                m->host->metric_add(m->host, m->calls_metric, &http_outcomes[i], 1);
#endif
            return;
        }
}
