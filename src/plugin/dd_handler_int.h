/*
 * Private to the handler module: the call context of host->emit, shared by
 * dd_handler.c (which opens and closes it around handle() and
 * handle_batch()) and dd_handler_emit.c (the host calls); the host's
 * payload reads of dd_handler_field.c.
 */
#ifndef DD_HANDLER_INT_H
#define DD_HANDLER_INT_H

#include <stddef.h>

#include "dd_buf.h"
#include "dedupd/handler.h"

/* One handle() or handle_batch() call under way on a thread. The events it
 * emits are collected into one multi-row INSERT, sent when the buffer is
 * large and when the call returns OK: a round trip per call, not per
 * event. */
typedef struct {
    const dedupd_host *host; /* the handler's: emit from another is refused */
    const char *scope;       /* NULL: the outbox is off */
    size_t max;              /* the largest event */
    MYSQL *db;
    const dedupd_msg *const *msgs;
    size_t n;
    unsigned *emitted; /* n counters: events emitted for each message */
    unsigned one;      /* the counter of a handle() call */
    dd_buf_t stmt;     /* the INSERT being built */
    size_t rows;       /* its rows */
} dd_handler_call_t;

/* Opens the call context on this thread (scope NULL: emit fails, saying
 * the outbox is off). 0, or -1 out of memory. */
int dd_handler_emit_begin(dd_handler_call_t *call, const dedupd_host *host, const char *scope,
                          size_t max, MYSQL *db, const dedupd_msg *const *msgs, size_t n);
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

/* host->path_new, path_free and path_value (dd_handler_field.c). */
dedupd_path *dd_handler_host_path_new(const dedupd_host *host, const char *text, size_t len,
                                      char *errstr, size_t errstr_size);
void dd_handler_host_path_free(const dedupd_host *host, dedupd_path *path);
int dd_handler_host_path_value(const dedupd_host *host, const dedupd_msg *msg,
                               const dedupd_path *path, dedupd_value *out, char *errstr,
                               size_t errstr_size);

#endif /* DD_HANDLER_INT_H */
