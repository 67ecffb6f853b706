/*
 * The sidecar's HTTP endpoint (libmicrohttpd) on http.listen:
 *   /healthz  200 while the loop makes progress, 503 when it is stuck
 *   /readyz   200 when partitions are assigned and the database answers
 *   /metrics  Prometheus text format (dedupd's metrics, then the handlers')
 * It runs on its own thread and only reads the pipeline's snapshot
 * functions (dd_pipeline_stats, dd_pipeline_lag), so it can never stall the
 * consumer loop.
 */
#ifndef DD_HTTP_H
#define DD_HTTP_H

#include <stddef.h>

#include "dd_conf.h"
#include "dd_handler.h"
#include "dd_pipeline.h"

typedef struct dd_http_s dd_http_t;

/* The endpoint for conf->http.listen; conf, pl and hs (each route's
 * handler, whose own metrics /metrics serves too; NULL: none) must
 * outlive it. */
int dd_http_new(dd_http_t **httpp, const dd_conf_t *conf, dd_pipeline_t *pl,
                dd_handler_t *const *hs, char *errstr, size_t errstr_size);
/* Binds the address and starts serving (libmicrohttpd's thread) and
 * probing the database (the prober thread). Returns 0, DD_ERR_IO (the
 * address cannot be bound) or DD_ERR_FATAL. */
int dd_http_start(dd_http_t *http, char *errstr, size_t errstr_size);
/* Stops serving and joins both threads. */
void dd_http_stop(dd_http_t *http);
/* Stops it if needed and frees it; NULL is fine. */
void dd_http_destroy(dd_http_t *http);

#endif /* DD_HTTP_H */
