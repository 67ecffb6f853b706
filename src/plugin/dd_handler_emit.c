/*
 * host->emit and host->event_id (see include/dedupd/handler.h, "Events
 * out"): the handler's side of the outbox. An event is checked when it is
 * emitted (where, the connection, the topic, the size) and gets its id
 * then; its row goes into the INSERT the call collects, which is sent in
 * the handler's transaction when it grows large and when the call returns
 * OK. A call that does not return OK sends nothing: its events would be
 * rolled back with it anyway.
 */
#include "dd_handler_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"
#include "dd_outbox.h"

/* A statement this long is sent at once (the server's max_allowed_packet
 * is 16 MB by default; an event is at most message.max.bytes). */
#define DD_HANDLER_EMIT_FLUSH (1024 * 1024)

static _Thread_local dd_handler_call_t *dd_handler_call_cur;
static atomic_int dd_handler_event_id_said; /* a failed event_id() was logged */

int dd_handler_emit_begin(dd_handler_call_t *call, const dedupd_host *host, const char *scope,
                          const char *ns, size_t max, MYSQL *db, const dedupd_msg *const *msgs,
                          size_t n)
{
    memset(call, 0, sizeof(*call));
    call->host = host;
    call->scope = ns ? scope : NULL;
    call->ns = ns;
    call->max = max;
    call->db = db;
    call->msgs = msgs;
    call->n = n;
    if (n <= 1)
        call->emitted = &call->one;
    else if (scope && !(call->emitted = calloc(n, sizeof(*call->emitted))))
        return -1;
    dd_handler_call_cur = call;
    return 0;
}

/* Sends the collected rows. */
static int dd_handler_emit_flush(dd_handler_call_t *call, char *errstr, size_t errstr_size)
{
    int rc = 0;

    if (call->rows) rc = dd_outbox_insert(call->db, &call->stmt, errstr, errstr_size);
    call->rows = 0;
    dd_buf_reset(&call->stmt);
    return rc;
}

int dd_handler_emit_end(dd_handler_call_t *call, int keep, char *errstr, size_t errstr_size)
{
    int rc = keep ? dd_handler_emit_flush(call, errstr, errstr_size) : 0;

    dd_handler_call_cur = NULL;
    dd_buf_release(&call->stmt);
    if (call->emitted != &call->one) free(call->emitted);
    call->emitted = NULL;
    return rc;
}

/* The index of msg in the call under way on this thread, or -1 (with
 * errstr) when emit cannot be called here. */
static long dd_handler_emit_where(const dedupd_host *host, const dedupd_msg *msg, char *errstr,
                                  size_t errstr_size)
{
    const dd_handler_call_t *call = dd_handler_call_cur;

    if (!call || call->host != host) {
        dd_errstr_set(errstr, errstr_size,
                      "emit: called outside handle() and handle_batch() (external mode, "
                      "init, conn_init or another thread): events can only be emitted inside "
                      "the transaction of a handler in local mode");
        return -1;
    }
    if (!call->scope) {
        dd_errstr_set(errstr, errstr_size,
                      "emit: the outbox is off (outbox.enabled = false in dedupd's "
                      "configuration)");
        return -1;
    }
    for (size_t i = 0; i < call->n; i++)
        if (call->msgs[i] == msg) return (long)i;
    dd_errstr_set(errstr, errstr_size, "emit: msg is not a message of this call");
    return -1;
}

int dd_handler_host_event_id(const dedupd_host *host, const dedupd_msg *msg, char *out,
                             size_t out_size)
{
    char err[DEDUPD_ERROR_SIZE], id[DD_OUTBOX_ID_LEN + 1];
    long i = dd_handler_emit_where(host, msg, err, sizeof(err));

    if (i >= 0 && (!out || out_size < sizeof(id)))
        dd_errstr_set(err, sizeof(err), "event_id: out needs DEDUPD_EVENT_ID_SIZE bytes");
    if (i < 0 || !out || out_size < sizeof(id)) {
        /* the call has no errstr: the reason goes to the log, once */
        if (!atomic_exchange(&dd_handler_event_id_said, 1))
            dd_log(DD_LOG_WARN, "A handler's host->event_id() failed: %s (said once).", err);
        return -1;
    }
    dd_outbox_event_id(dd_handler_call_cur->ns, dd_handler_call_cur->scope, msg->biz_key,
                       dd_handler_call_cur->emitted[i], id);
    memcpy(out, id, sizeof(id));
    return 0;
}

/* The checks of an event: where, the connection, the topic, the headers'
 * names and the size. The index of its message, or -1 with errstr. */
static long dd_handler_emit_check(const dedupd_host *host, MYSQL *db, const dedupd_msg *msg,
                                  const dd_outbox_event_t *ev, char *errstr, size_t errstr_size)
{
    long i = dd_handler_emit_where(host, msg, errstr, errstr_size);
    const dd_handler_call_t *call = dd_handler_call_cur;
    size_t size;

    if (i < 0) return -1;
    if (db != call->db) {
        dd_errstr_set(errstr, errstr_size,
                      "emit: db is not the connection dedupd passed to this call");
        return -1;
    }
    if (!dd_outbox_topic_valid(ev->topic)) {
        dd_errstr_set(errstr, errstr_size,
                      "emit: \"%.250s\" is not a Kafka topic name (1 to 249 of A-Z a-z 0-9 . _ -)",
                      ev->topic ? ev->topic : "(null)");
        return -1;
    }
    for (size_t k = 0; k < ev->header_cnt; k++)
        if (!ev->headers[k].name || strcmp(ev->headers[k].name, DD_OUTBOX_ID_HEADER) == 0) {
            dd_errstr_set(errstr, errstr_size, "emit: header %zu has %s", k,
                          ev->headers[k].name ? "the name dedupd gives its id" : "no name");
            return -1;
        }
    size = dd_outbox_event_size(ev);
    if (call->max && size > call->max) {
        dd_errstr_set(errstr, errstr_size,
                      "emit: an event of %zu bytes (key, value, headers and %d for the record) "
                      "is more than the relay's producer sends (message.max.bytes %zu)",
                      size, DD_OUTBOX_RESERVE, call->max);
        return -1;
    }
    return i;
}

int dd_handler_host_emit(const dedupd_host *host, MYSQL *db, const dedupd_msg *msg,
                         const char *topic, const void *key, size_t key_len, const void *value,
                         size_t value_len, const dedupd_header *headers, size_t header_cnt,
                         char *errstr, size_t errstr_size)
{
    dd_outbox_event_t ev = {.topic = topic,
                            .key = key,
                            .key_len = key ? key_len : 0,
                            .value = value,
                            .value_len = value ? value_len : 0,
                            .headers = headers,
                            .header_cnt = headers ? header_cnt : 0};
    char err[DEDUPD_ERROR_SIZE];
    long i = dd_handler_emit_check(host, db, msg, &ev, err, sizeof(err));
    dd_handler_call_t *call = dd_handler_call_cur;
    int rc = -1;

    if (i >= 0) {
        dd_outbox_event_id(call->ns, call->scope, msg->biz_key, call->emitted[i], ev.event_id);
        rc = dd_outbox_append(&call->stmt, call->rows++, &ev, err, sizeof(err));
        if (!rc && call->stmt.len > DD_HANDLER_EMIT_FLUSH)
            rc = dd_handler_emit_flush(call, err, sizeof(err));
    }
    if (rc == 0)
        call->emitted[i]++;
    else if (errstr && errstr_size)
        snprintf(errstr, errstr_size, "%s", err);
    return rc;
}
