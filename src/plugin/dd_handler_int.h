/*
 * Private to the handler module: the call context of host->emit, shared by
 * dd_handler.c (which opens and closes it around handle() and
 * handle_batch()) and dd_handler_emit.c (the host calls); a handler's
 * metrics, which dd_handler.c makes before init_host and frees after fini,
 * and dd_handler_metrics.c keeps (the host calls, /metrics); the host's
 * payload reads of dd_handler_field.c.
 */
#ifndef DD_HANDLER_INT_H
#define DD_HANDLER_INT_H

#include <stddef.h>
#include <stdio.h>

#include "dd_buf.h"
#include "dd_handler.h"
#include "dedupd/handler.h"

/* One handle() or handle_batch() call under way on a thread. The events it
 * emits are collected into one multi-row INSERT, sent when the buffer is
 * large and when the call returns OK: a round trip per call, not per
 * event. */
typedef struct {
    const dedupd_host *host; /* the handler's: emit from another is refused */
    const char *scope;       /* the dedup table; NULL: the outbox is off */
    const char *ns;          /* the shard's event namespace */
    size_t max;              /* the largest event */
    MYSQL *db;
    const dedupd_msg *const *msgs;
    size_t n;
    unsigned *emitted; /* n counters: events emitted for each message */
    unsigned one;      /* the counter of a handle() call */
    dd_buf_t stmt;     /* the INSERT being built */
    size_t rows;       /* its rows */
} dd_handler_call_t;

/* Opens the call context on this thread (scope or ns NULL: emit fails,
 * saying the outbox is off). 0, or -1 out of memory. */
int dd_handler_emit_begin(dd_handler_call_t *call, const dedupd_host *host, const char *scope,
                          const char *ns, size_t max, MYSQL *db, const dedupd_msg *const *msgs,
                          size_t n);
/* Closes it: with keep, sends the events still collected (in the open
 * transaction on db). 0, or -1 with errstr (the server's error on db). */
int dd_handler_emit_end(dd_handler_call_t *call, int keep, char *errstr, size_t errstr_size);

/* host->emit and host->event_id. */
int dd_handler_host_emit(const dedupd_host *host, MYSQL *db, const dedupd_msg *msg,
                         const char *topic, const void *key, size_t key_len, const void *value,
                         size_t value_len, const dedupd_header *headers, size_t header_cnt,
                         char *errstr, size_t errstr_size);
int dd_handler_host_event_id(const dedupd_host *host, const dedupd_msg *msg, char *out,
                             size_t out_size);

/* ---- a handler's metrics (dd_handler_metrics.c) ---- */

typedef struct dd_handler_metrics_s dd_handler_metrics_t;

/* The metrics of an instance of the handler named handler (its
 * descriptor's name), open to declarations until closed. NULL: out of
 * memory. */
dd_handler_metrics_t *dd_handler_metrics_new(const char *handler);
/* init_host returned: metric_new fails from now on. */
void dd_handler_metrics_close(dd_handler_metrics_t *set);
void dd_handler_metrics_destroy(dd_handler_metrics_t *set);
/* host->metric_new on set (see include/dedupd/handler.h). */
dedupd_metric *dd_handler_metrics_declare(dd_handler_metrics_t *set, dedupd_metric_type type,
                                          const char *name, const char *help,
                                          const char *const *labels, size_t label_cnt,
                                          const double *bounds, size_t bound_cnt, char *errstr,
                                          size_t errstr_size);
/* host->metric_add (type counter) or metric_observe (histogram) of m,
 * which must be set's and of that type. 0, or -1: nothing counted. */
int dd_handler_metrics_record(const dd_handler_metrics_t *set, dedupd_metric *m,
                              dedupd_metric_type type, const char *const *values, double v);
/* dd_handler_metrics_render and _check (dd_handler.h) over the metrics of
 * each route (sets[i] NULL: none). */
void dd_handler_metrics_print_sets(FILE *f, dd_handler_metrics_t *const *sets,
                                   const char *const *routes, int n);
int dd_handler_metrics_check_sets(dd_handler_metrics_t *const *sets, const char *const *routes,
                                  int n, char *errstr, size_t errstr_size);

/* The metrics of a handler, and of the handler whose host this is (both
 * dd_handler.c). */
dd_handler_metrics_t *dd_handler_metrics_of(const dd_handler_t *h);
dd_handler_metrics_t *dd_handler_host_metrics(const dedupd_host *host);

/* host->metric_new, metric_add and metric_observe. */
dedupd_metric *dd_handler_host_metric_new(const dedupd_host *host, dedupd_metric_type type,
                                          const char *name, const char *help,
                                          const char *const *labels, size_t label_cnt,
                                          const double *bounds, size_t bound_cnt, char *errstr,
                                          size_t errstr_size);
int dd_handler_host_metric_add(const dedupd_host *host, dedupd_metric *metric,
                               const char *const *values, double v);
int dd_handler_host_metric_observe(const dedupd_host *host, dedupd_metric *metric,
                                   const char *const *values, double v);

/* host->path_new, path_free and path_value (dd_handler_field.c). */
dedupd_path *dd_handler_host_path_new(const dedupd_host *host, const char *text, size_t len,
                                      char *errstr, size_t errstr_size);
void dd_handler_host_path_free(const dedupd_host *host, dedupd_path *path);
int dd_handler_host_path_value(const dedupd_host *host, const dedupd_msg *msg,
                               const dedupd_path *path, dedupd_value *out, char *errstr,
                               size_t errstr_size);

#endif /* DD_HANDLER_INT_H */
