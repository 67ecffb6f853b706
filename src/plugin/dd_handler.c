/*
 * Handler plugins: dlopen, ABI check, and the calls into the plugin.
 *
 * Business logic lives in shared objects so that users can write it without
 * touching dedupd. A plugin is untrusted in one specific sense: it was built
 * separately, maybe against another version of include/dedupd/handler.h, and
 * it may break the rules of the ABI (commit the claim transaction, return a
 * status that does not exist, leave res->error unterminated). This module is
 * the one place that checks all of that, so the pipeline can rely on what it
 * gets back: a valid status, a terminated error string, and a flag saying
 * whether the claim transaction is still open.
 *
 * It is also dedupd's side of the ABI: the host API handed to init_host()
 * (dedupd_host), whose log() attaches the fields of the message the calling
 * thread is handling, known from a thread-local set around each handle(),
 * whose emit() (dd_handler_emit.c) writes into the call's transaction, and
 * whose metric_*() (dd_handler_metrics.c) count the handler's own metrics,
 * and whose path_value() (dd_handler_field.c) reads the payload's values.
 *
 * After load the object is read-only, so dd_handler_handle() may be called
 * from several worker threads at once.
 */
#include "dd_handler.h"
#include "dd_handler_int.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_db_txn.h"
#include "dd_log.h"

#define DD_HANDLER_SYMBOL "dedupd_handler_v1"

_Static_assert((int)DEDUPD_LOG_ERROR == (int)DD_LOG_ERROR &&
                   (int)DEDUPD_LOG_DEBUG == (int)DD_LOG_DEBUG,
               "the handler ABI's log levels are dedupd's");
_Static_assert(DEDUPD_ERROR_SIZE == sizeof(((dedupd_result *)0)->error),
               "DEDUPD_ERROR_SIZE is the size of dedupd_result.error");

typedef dedupd_status (*dd_handler_batch_fn)(void *, MYSQL *, const dedupd_msg *const *, size_t,
                                             dedupd_result *);

struct dd_handler_s {
    dedupd_host host;           /* first: host->log finds the handler from it */
    char instance[128];         /* host.instance */
    void *dl;                   /* dlopen handle */
    char *path;                 /* for messages */
    const dedupd_handler *desc; /* static descriptor inside the plugin */
    void *state;                /* from init(), passed back to every call */
    int initialized;            /* init() succeeded: fini() is owed */
    size_t max_response;        /* longest response accepted; 0: any */
    /* The descriptor's fields of ABI >= 2 and >= 3, NULL when it has none:
     * read once, after the version check. */
    dd_handler_batch_fn handle_batch;
    int (*init_host)(void **, const dedupd_host *, char *, size_t);
    int (*conn_init)(void *, MYSQL *, void **, char *, size_t);
    void (*conn_fini)(void *, MYSQL *, void *);
    dedupd_status (*handle_conn)(void *, void *, MYSQL *, const dedupd_msg *, dedupd_result *);
    dedupd_status (*handle_batch_conn)(void *, void *, MYSQL *, const dedupd_msg *const *, size_t,
                                       dedupd_result *);
    /* external mode, from descriptors of ABI >= 4 (else local, all NULL) */
    int mode;
    dedupd_status (*act)(void *, const dedupd_msg *, dedupd_result *);
    dedupd_status (*finish)(void *, MYSQL *, const dedupd_msg *, dedupd_result *);
    dedupd_outcome (*reconcile)(void *, const char *, int64_t, dedupd_result *);
    int (*check)(void *, char *, size_t); /* ABI >= 7, else NULL */
    /* host->emit: on when outbox_scope is set (dd_handler_set_outbox) */
    char *outbox_scope; /* the route's dedup table, part of every event id */
    char **outbox_ns;   /* each shard's event namespace, part of it too */
    int outbox_ns_cnt;
    size_t outbox_max;             /* the relay's message.max.bytes */
    dd_handler_metrics_t *metrics; /* its own (host->metric_*) */
};

/* The message the calling thread's handle() is applying, for host->log. */
static _Thread_local const dedupd_msg *dd_handler_msg_cur;
/* host->retry_after: 1 while act() or reconcile() runs on this thread, and
 * the wait it asked for (-1: none). */
static _Thread_local int dd_handler_in_external;
static _Thread_local int64_t dd_handler_retry_ms = -1;

typedef const dedupd_handler *(*dd_handler_entry_fn)(void);

/* dlerror() text, or a fallback when the loader gave none. */
static const char *dd_handler_dlerror(void)
{
    const char *e = dlerror();

    return e ? e : "unknown dynamic loader error";
}

/* The fields of ABI version 4: the mode, and what each mode needs (local:
 * handle; external: act). */
static int dd_handler_check_v4(dd_handler_t *h, char *errstr, size_t errstr_size)
{
    const dedupd_handler *d = h->desc;

    if (d->mode != DEDUPD_MODE_LOCAL && d->mode != DEDUPD_MODE_EXTERNAL) {
        dd_errstr_set(errstr, errstr_size,
                      "handler %s: descriptor has mode %d, this dedupd knows %d (local) and "
                      "%d (external)",
                      h->path, d->mode, DEDUPD_MODE_LOCAL, DEDUPD_MODE_EXTERNAL);
        return DD_ERR_FATAL;
    }
    h->mode = d->mode;
    h->act = d->act;
    h->finish = d->finish;
    h->reconcile = d->reconcile;
    if (!d->name || (h->mode == DEDUPD_MODE_LOCAL && !d->handle && !h->handle_conn) ||
        (h->mode == DEDUPD_MODE_EXTERNAL && !d->act)) {
        dd_errstr_set(errstr, errstr_size, "handler %s: descriptor has no %s", h->path,
                      !d->name                          ? "name"
                      : h->mode == DEDUPD_MODE_EXTERNAL ? "act function (external mode)"
                                                        : "handle function");
        return DD_ERR_FATAL;
    }
    return 0;
}

/* Looks up the entry point and checks the descriptor it returns. */
static int dd_handler_check(dd_handler_t *h, char *errstr, size_t errstr_size)
{
    dd_handler_entry_fn entry;
    void *sym;

    dlerror(); /* clear a stale error so a NULL symbol value is not mistaken */
    sym = dlsym(h->dl, DD_HANDLER_SYMBOL);
    if (!sym) {
        dd_errstr_set(errstr, errstr_size, "handler %s does not export %s(): %s", h->path,
                      DD_HANDLER_SYMBOL, dd_handler_dlerror());
        return DD_ERR_FATAL;
    }
    /* POSIX guarantees object and function pointers convert; memcpy keeps
     * ISO C compilers quiet about it. */
    memcpy(&entry, &sym, sizeof(entry));
    h->desc = entry();
    if (!h->desc) {
        dd_errstr_set(errstr, errstr_size, "handler %s: %s() returned NULL", h->path,
                      DD_HANDLER_SYMBOL);
        return DD_ERR_FATAL;
    }
    /* abi_version is the first field in every ABI version, so reading it is
     * safe before we know the rest of the layout matches. Later versions
     * only append fields, so older descriptors load and their missing
     * fields are never read. */
    if (h->desc->abi_version < DEDUPD_HANDLER_ABI_MIN ||
        h->desc->abi_version > DEDUPD_HANDLER_ABI_VERSION) {
        dd_errstr_set(errstr, errstr_size,
                      "handler %s was built for ABI version %d, this dedupd supports versions "
                      "%d to %d",
                      h->path, h->desc->abi_version, DEDUPD_HANDLER_ABI_MIN,
                      DEDUPD_HANDLER_ABI_VERSION);
        return DD_ERR_FATAL;
    }
    if (h->desc->abi_version >= 2) h->handle_batch = h->desc->handle_batch;
    if (h->desc->abi_version >= 3) {
        h->init_host = h->desc->init_host;
        h->conn_init = h->desc->conn_init;
        h->conn_fini = h->desc->conn_fini;
        h->handle_conn = h->desc->handle_conn;
        h->handle_batch_conn = h->desc->handle_batch_conn;
    }
    if (h->desc->abi_version >= 7) h->check = h->desc->check;
    if (h->desc->abi_version >= 4) return dd_handler_check_v4(h, errstr, errstr_size);
    if (!h->desc->name || (!h->desc->handle && !h->handle_conn)) {
        dd_errstr_set(errstr, errstr_size, "handler %s: descriptor has no %s", h->path,
                      !h->desc->name ? "name" : "handle function (handle or handle_conn)");
        return DD_ERR_FATAL;
    }
    return 0;
}

/* host->log: a line through dedupd's logger, with the fields of the
 * message the calling thread is handling, if any. */
DEDUPD_PRINTF(3, 4)
static void dd_handler_host_log(const dedupd_host *host, dedupd_log_level level, const char *fmt,
                                ...)
{
    const dd_handler_t *h = (const dd_handler_t *)(const void *)host;
    const dedupd_msg *msg = dd_handler_msg_cur;
    int lvl = (int)level < DD_LOG_ERROR   ? DD_LOG_ERROR
              : (int)level > DD_LOG_DEBUG ? DD_LOG_DEBUG
                                          : (int)level;
    char text[2048];
    va_list ap;

    if (lvl > atomic_load_explicit(&dd_log_level_cur, memory_order_relaxed)) return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt ? fmt : "", ap);
    va_end(ap);
    if (msg)
        dd_log_msg_write((dd_log_level_t)lvl, msg->topic, msg->partition, msg->offset, msg->biz_key,
                         "handler %s: %s", h->desc->name, text);
    else
        dd_log_write((dd_log_level_t)lvl, "handler %s: %s", h->desc->name, text);
}

/* host->retry_after: from act() or reconcile() only. */
static int dd_handler_host_retry_after(const dedupd_host *host, int64_t ms)
{
    (void)host;
    if (!dd_handler_in_external || ms < 0) return -1;
    dd_handler_retry_ms = ms;
    return 0;
}

/* Frees the outbox's settings: emit is off. */
static void dd_handler_outbox_free(dd_handler_t *h)
{
    for (int s = 0; s < h->outbox_ns_cnt; s++)
        free(h->outbox_ns[s]);
    free(h->outbox_ns);
    free(h->outbox_scope);
    h->outbox_ns = NULL;
    h->outbox_scope = NULL;
    h->outbox_ns_cnt = 0;
}

int dd_handler_set_outbox(dd_handler_t *h, const char *scope, const char *const *ns, int ns_cnt,
                          size_t max_bytes)
{
    dd_handler_outbox_free(h);
    h->outbox_max = max_bytes;
    if (!scope) return DD_OK;
    if (!(h->outbox_ns = calloc((size_t)ns_cnt, sizeof(*h->outbox_ns)))) return DD_ERR_NOMEM;
    h->outbox_ns_cnt = ns_cnt;
    for (int s = 0; s < ns_cnt; s++)
        if (!(h->outbox_ns[s] = strdup(ns[s]))) break;
    for (int s = 0; s < ns_cnt; s++)
        if (!h->outbox_ns[s]) {
            dd_handler_outbox_free(h);
            return DD_ERR_NOMEM;
        }
    if (!(h->outbox_scope = strdup(scope))) {
        dd_handler_outbox_free(h);
        return DD_ERR_NOMEM;
    }
    return DD_OK;
}

/* The event namespace of msg's shard; NULL when the outbox is off. */
static const char *dd_handler_outbox_ns(const dd_handler_t *h, const dedupd_msg *msg)
{
    if (!h->outbox_scope || msg->shard < 0 || msg->shard >= h->outbox_ns_cnt) return NULL;
    return h->outbox_ns[msg->shard];
}

/* Calls the optional init_host(host) or, without it, init(conf). */
static int dd_handler_init(dd_handler_t *h, const config_setting_t *conf, int outbox, char *errstr,
                           size_t errstr_size)
{
    char err[DEDUPD_ERROR_SIZE] = "";
    int rc = 0;

    dd_instance_name(h->instance, sizeof(h->instance));
    h->host = (dedupd_host){
        .version = DEDUPD_HOST_VERSION,
        .instance = h->instance,
        .config = conf,
        .log = dd_handler_host_log,
        .emit = dd_handler_host_emit,
        .event_id = dd_handler_host_event_id,
        .outbox = outbox,
        .metric_new = dd_handler_host_metric_new,
        .metric_add = dd_handler_host_metric_add,
        .metric_observe = dd_handler_host_metric_observe,
        .path_new = dd_handler_host_path_new,
        .path_free = dd_handler_host_path_free,
        .path_value = dd_handler_host_path_value,
        .retry_after = dd_handler_host_retry_after,
    };
    if (!(h->metrics = dd_handler_metrics_new(h->desc->name))) {
        dd_errstr_set(errstr, errstr_size, "handler %s: out of memory", h->path);
        return DD_ERR_NOMEM;
    }
    if (h->init_host)
        rc = h->init_host(&h->state, &h->host, err, sizeof(err));
    else if (h->desc->init)
        rc = h->desc->init(&h->state, conf, err, sizeof(err));
    dd_handler_metrics_close(h->metrics);
    if (rc != 0) {
        err[sizeof(err) - 1] = '\0';
        dd_errstr_set(errstr, errstr_size, "handler %s (%s): init failed: %s", h->path,
                      h->desc->name, err[0] ? err : "no reason given");
        return DD_ERR_FATAL;
    }
    h->initialized = 1;
    return 0;
}

int dd_handler_load(dd_handler_t **hp, const char *path, const config_setting_t *conf, int outbox,
                    char *errstr, size_t errstr_size)
{
    dd_handler_t *h = NULL;
    int rc = DD_ERR_ARG;

    if (!hp || !path) {
        dd_errstr_set(errstr, errstr_size, "dd_handler_load: no handler path given");
        goto out;
    }
    *hp = NULL;
    rc = DD_ERR_NOMEM;
    h = calloc(1, sizeof(*h));
    if (!h || !(h->path = strdup(path))) {
        dd_errstr_set(errstr, errstr_size, "handler %s: out of memory", path);
        goto out;
    }
    rc = DD_ERR_FATAL;
    /* RTLD_NOW: an unresolved symbol fails here, not mid-transaction.
     * RTLD_LOCAL: two handlers' symbols cannot interpose on each other. */
    h->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h->dl) {
        dd_errstr_set(errstr, errstr_size, "cannot load handler %s: %s", path,
                      dd_handler_dlerror());
        goto out;
    }
    if ((rc = dd_handler_check(h, errstr, errstr_size)) != 0) goto out;
    if ((rc = dd_handler_init(h, conf, outbox, errstr, errstr_size)) != 0) goto out;
    *hp = h;
    h = NULL;
out:
    dd_handler_destroy(h);
    return rc;
}

const char *dd_handler_name(const dd_handler_t *h)
{
    return h && h->desc ? h->desc->name : "(none)";
}

dd_handler_metrics_t *dd_handler_metrics_of(const dd_handler_t *h)
{
    return h->metrics;
}

dd_handler_metrics_t *dd_handler_host_metrics(const dedupd_host *host)
{
    return ((const dd_handler_t *)(const void *)host)->metrics;
}

const char *dd_handler_path(const dd_handler_t *h)
{
    return h && h->path ? h->path : "(none)";
}

int dd_handler_migrate(dd_handler_t *h, MYSQL *db, char *errstr, size_t errstr_size)
{
    char err[DEDUPD_ERROR_SIZE] = "";

    if (!h->desc->migrate) return 0;
    if (h->desc->migrate(h->state, db, err, sizeof(err)) != 0) {
        err[sizeof(err) - 1] = '\0';
        dd_errstr_set(errstr, errstr_size, "handler %s (%s): migrate failed: %s", h->path,
                      h->desc->name, err[0] ? err : "no reason given");
        return DD_ERR_FATAL;
    }
    return 0;
}

/* The server status flags of db's last reply (0 when unknown). */
static unsigned int dd_handler_server_status(MYSQL *db)
{
    unsigned int st = 0;

    if (mariadb_get_infov(db, MARIADB_CONNECTION_SERVER_STATUS, &st) != 0) return 0;
    return st;
}

/* The server reports its transaction state in every OK/EOF reply; the client
 * library keeps the last one. If the handler sent COMMIT, ROLLBACK or
 * SET autocommit=1, that reply no longer carries IN_TRANS. An ERR reply
 * carries no status, so after a failed statement this is the state before it. */
static int dd_handler_txn_open(MYSQL *db)
{
    /* 0 when it cannot tell: assume the worst */
    return (dd_handler_server_status(db) & SERVER_STATUS_IN_TRANS) != 0;
}

void dd_handler_set_max_response(dd_handler_t *h, size_t max)
{
    h->max_response = max;
}

/* 1 (with the error in res->error) when res->response is longer than the
 * bound: a finished row must fit in one statement, and a response this
 * size is a handler bug rather than a snapshot. */
static int dd_handler_response_too_long(const dd_handler_t *h, dedupd_result *res)
{
    size_t len;

    if (!h->max_response || !res->response ||
        strnlen(res->response, h->max_response + 1) <= h->max_response)
        return 0;
    len = strlen(res->response);
    snprintf(res->error, sizeof(res->error),
             "handler %s returned a response of %zu bytes, more than "
             "handler.max_response_bytes (%zu)",
             h->desc->name, len, h->max_response);
    return 1;
}

int dd_handler_conn_init(dd_handler_t *h, MYSQL *db, void **conn_state, char *errstr,
                         size_t errstr_size)
{
    char err[DEDUPD_ERROR_SIZE] = "";
    unsigned int st;

    *conn_state = NULL;
    if (!h->conn_init) return DD_OK;
    if (h->conn_init(h->state, db, conn_state, err, sizeof(err)) != 0) {
        unsigned int dberr = mysql_errno(db);

        err[sizeof(err) - 1] = '\0';
        *conn_state = NULL;
        dd_errstr_set(errstr, errstr_size, "handler %s (%s): conn_init failed: %s", h->path,
                      h->desc->name, err[0] ? err : "no reason given");
        return dberr && dd_db_classify(dberr) == DD_ERR_RETRIABLE ? DD_ERR_RETRIABLE : DD_ERR_FATAL;
    }
    /* dedupd opens every transaction itself, on a connection in autocommit
     * mode: conn_init must leave it so (a handler bug otherwise). */
    st = dd_handler_server_status(db);
    if ((st & SERVER_STATUS_IN_TRANS) || !(st & SERVER_STATUS_AUTOCOMMIT)) {
        dd_errstr_set(errstr, errstr_size,
                      "handler %s (%s): conn_init left %s: this is a handler bug", h->path,
                      h->desc->name,
                      (st & SERVER_STATUS_IN_TRANS) ? "a transaction open" : "autocommit off");
        dd_handler_conn_fini(h, db, *conn_state);
        *conn_state = NULL;
        return DD_ERR_FATAL;
    }
    return DD_OK;
}

int dd_handler_has_conn_init(const dd_handler_t *h)
{
    return h->conn_init != NULL;
}

void dd_handler_conn_fini(dd_handler_t *h, MYSQL *db, void *conn_state)
{
    if (h && h->conn_fini) h->conn_fini(h->state, db, conn_state);
}

dedupd_status dd_handler_handle(dd_handler_t *h, MYSQL *db, void *conn_state, const dedupd_msg *msg,
                                dedupd_result *res, int *broken_txn)
{
    dedupd_status st;
    int raw;

    dd_handler_call_t call;

    memset(res, 0, sizeof(*res));
    dd_handler_msg_cur = msg;
    dd_handler_emit_begin(&call, &h->host, h->outbox_scope, dd_handler_outbox_ns(h, msg),
                          h->outbox_max, db, &msg, 1);
    if (h->handle_conn)
        raw = (int)h->handle_conn(h->state, conn_state, db, msg, res);
    else
        raw = (int)h->desc->handle(h->state, db, msg, res);
    dd_handler_msg_cur = NULL;
    /* The plugin may have filled all 256 bytes with strncpy. */
    res->error[sizeof(res->error) - 1] = '\0';
    if (dd_handler_emit_end(&call, raw == DEDUPD_OK && dd_handler_txn_open(db), res->error,
                            sizeof(res->error)) != 0)
        raw = DEDUPD_RETRY; /* its events not written: the server's error is on db */
    st = (dedupd_status)raw;
    if (raw != DEDUPD_OK && raw != DEDUPD_RETRY && raw != DEDUPD_REJECT) {
        free(res->response);
        res->response = NULL;
        snprintf(res->error, sizeof(res->error), "handler %s returned invalid status %d",
                 h->desc->name, raw);
        st = DEDUPD_REJECT;
    } else if (st == DEDUPD_OK && dd_handler_response_too_long(h, res)) {
        free(res->response);
        res->response = NULL;
        st = DEDUPD_REJECT;
    }
    if (broken_txn) *broken_txn = !dd_handler_txn_open(db);
    return st;
}

int dd_handler_has_batch(const dd_handler_t *h)
{
    return h->handle_batch != NULL || h->handle_batch_conn != NULL;
}

dedupd_status dd_handler_handle_batch(dd_handler_t *h, MYSQL *db, void *conn_state,
                                      const dedupd_msg *const *msgs, size_t n, dedupd_result *res,
                                      int *broken_txn)
{
    dedupd_status st = DEDUPD_OK;
    int raw;

    dd_handler_call_t call;

    memset(res, 0, n * sizeof(*res));
    /* a batch is one shard's, on that shard's connection */
    if (dd_handler_emit_begin(&call, &h->host, h->outbox_scope,
                              n ? dd_handler_outbox_ns(h, msgs[0]) : NULL, h->outbox_max, db, msgs,
                              n)) {
        dd_handler_emit_end(&call, 0, NULL, 0);
        snprintf(res[0].error, sizeof(res[0].error), "out of memory");
        if (broken_txn) *broken_txn = 0;
        return DEDUPD_REJECT; /* declined: handle() goes message by message */
    }
    if (h->handle_batch_conn)
        raw = (int)h->handle_batch_conn(h->state, conn_state, db, msgs, n, res);
    else
        raw = (int)h->handle_batch(h->state, db, msgs, n, res);
    res[0].error[sizeof(res[0].error) - 1] = '\0';
    if (dd_handler_emit_end(&call, raw == DEDUPD_OK && dd_handler_txn_open(db), res[0].error,
                            sizeof(res[0].error)) != 0)
        raw = DEDUPD_RETRY; /* declined; a deadlock's error is on db, and replays */
    for (size_t i = 0; raw == DEDUPD_OK && i < n; i++) {
        dedupd_result too_long = {.response = res[i].response};
        if (dd_handler_response_too_long(h, &too_long)) {
            snprintf(res[0].error, sizeof(res[0].error), "%s", too_long.error);
            raw = DEDUPD_REJECT; /* declined: handle() rejects that message */
        }
    }
    if (raw != DEDUPD_OK) {
        /* Declined or failed as a batch: nothing of it will be kept. */
        for (size_t i = 0; i < n; i++) {
            free(res[i].response);
            res[i].response = NULL;
        }
        st = raw == DEDUPD_RETRY ? DEDUPD_RETRY : DEDUPD_REJECT;
        if (raw != DEDUPD_RETRY && raw != DEDUPD_REJECT)
            snprintf(res[0].error, sizeof(res[0].error),
                     "handler %s returned invalid status %d from handle_batch", h->desc->name, raw);
    }
    if (broken_txn) *broken_txn = !dd_handler_txn_open(db);
    return st;
}

/* ---- external mode (see dd_handler.h) ---- */

int dd_handler_mode(const dd_handler_t *h)
{
    return h->mode;
}

int dd_handler_has_finish(const dd_handler_t *h)
{
    return h->finish != NULL;
}

int dd_handler_has_reconcile(const dd_handler_t *h)
{
    return h->reconcile != NULL;
}

/* An effect that happened cannot be rejected for its snapshot: a response
 * over the bound is dropped, and res->error says so for the log. */
static void dd_handler_drop_long(const dd_handler_t *h, dedupd_result *res)
{
    if (!dd_handler_response_too_long(h, res)) return;
    free(res->response);
    res->response = NULL;
}

/* A status out of range is the handler's bug: REJECT with an error. */
static dedupd_status dd_handler_status(const dd_handler_t *h, const char *fn, int raw,
                                       dedupd_result *res)
{
    res->error[sizeof(res->error) - 1] = '\0';
    if (raw == DEDUPD_OK || raw == DEDUPD_RETRY || raw == DEDUPD_REJECT) return (dedupd_status)raw;
    free(res->response);
    res->response = NULL;
    snprintf(res->error, sizeof(res->error), "handler %s returned invalid status %d from %s",
             h->desc->name, raw, fn);
    return DEDUPD_REJECT;
}

int64_t dd_handler_retry_after_ms(void)
{
    return dd_handler_retry_ms;
}

dedupd_status dd_handler_act(dd_handler_t *h, const dedupd_msg *msg, dedupd_result *res)
{
    dedupd_status st;
    int raw;

    memset(res, 0, sizeof(*res));
    dd_handler_retry_ms = -1;
    dd_handler_in_external = 1;
    raw = (int)h->act(h->state, msg, res);
    dd_handler_in_external = 0;
    st = dd_handler_status(h, "act", raw, res);
    if (st == DEDUPD_OK) {
        dd_handler_drop_long(h, res);
    } else {
        free(res->response); /* only an OK has a snapshot */
        res->response = NULL;
    }
    return st;
}

dedupd_status dd_handler_finish(dd_handler_t *h, MYSQL *db, const dedupd_msg *msg,
                                dedupd_result *res, int *broken_txn)
{
    dedupd_status st = DEDUPD_OK;

    res->error[0] = '\0';
    if (h->finish) {
        st = dd_handler_status(h, "finish", (int)h->finish(h->state, db, msg, res), res);
        if (st == DEDUPD_OK) dd_handler_drop_long(h, res);
    }
    if (broken_txn) *broken_txn = h->finish && !dd_handler_txn_open(db);
    return st;
}

dedupd_outcome dd_handler_reconcile(dd_handler_t *h, const char *biz_key, int64_t fence,
                                    dedupd_result *res)
{
    int raw;

    memset(res, 0, sizeof(*res));
    dd_handler_retry_ms = -1;
    dd_handler_in_external = 1;
    raw = (int)h->reconcile(h->state, biz_key, fence, res);
    dd_handler_in_external = 0;
    res->error[sizeof(res->error) - 1] = '\0';
    if (raw == DEDUPD_DONE) {
        dd_handler_drop_long(h, res);
        return DEDUPD_DONE;
    }
    free(res->response);
    res->response = NULL;
    if (raw == DEDUPD_NOT_DONE || raw == DEDUPD_UNKNOWN) return (dedupd_outcome)raw;
    snprintf(res->error, sizeof(res->error),
             "handler %s returned invalid outcome %d from "
             "reconcile",
             h->desc->name, raw);
    return DEDUPD_UNKNOWN;
}

int dd_handler_probe(dd_handler_t *h, char *report, size_t report_size)
{
    int level;

    if (!h->check) return -1;
    report[0] = '\0';
    level = h->check(h->state, report, report_size);
    report[report_size - 1] = '\0';
    if (level == DEDUPD_CHECK_OK || level == DEDUPD_CHECK_WARN || level == DEDUPD_CHECK_FAIL)
        return level;
    snprintf(report, report_size, "handler %s returned invalid level %d from check", h->desc->name,
             level);
    return DEDUPD_CHECK_FAIL;
}

/* ---- the transaction guard (see dd_handler.h) ---- */

int dd_handler_txn_begin(MYSQL *db, char *errstr, size_t errstr_size)
{
    int rc = dd_db_exec_raw(db, DD_DB_TXN_BEGIN "; SAVEPOINT " DD_HANDLER_TXN_SAVEPOINT, errstr,
                            errstr_size);

    return rc ? rc : dd_db_txn_started_raw(db, errstr, errstr_size);
}

int dd_handler_txn_lost(MYSQL *db)
{
    return db && mysql_errno(db) == ER_SP_DOES_NOT_EXIST;
}

int dd_handler_txn_lost_error(const dd_handler_t *h, const char *where, char *errstr,
                              size_t errstr_size)
{
    if (!h) {
        dd_errstr_set(errstr, errstr_size,
                      "a handler ended the transaction dedupd opened for it (a COMMIT, "
                      "ROLLBACK or a statement that commits implicitly) and went on in another, "
                      "%s: this is a handler bug; the transaction was rolled back",
                      where);
        return DD_ERR_FATAL;
    }
    dd_errstr_set(errstr, errstr_size,
                  "handler %s (%s) ended the transaction dedupd opened for it (a COMMIT, "
                  "ROLLBACK or a statement that commits implicitly) and went on in another, "
                  "%s: this is a handler bug; the transaction was rolled back",
                  dd_handler_name(h), dd_handler_path(h), where);
    return DD_ERR_FATAL;
}

int dd_handler_txn_end(const dd_handler_t *h, MYSQL *db, int commit, const char *where,
                       char *errstr, size_t errstr_size)
{
    int rc;

    /* When the release fails, the server does not run the rest of the
     * query: nothing of what ran in the handler's transaction commits. */
    rc = dd_db_exec_raw(
        db,
        commit ? "RELEASE SAVEPOINT " DD_HANDLER_TXN_SAVEPOINT "; COMMIT; " DD_DB_TXN_AUTOCOMMIT
               : "RELEASE SAVEPOINT " DD_HANDLER_TXN_SAVEPOINT "; ROLLBACK; " DD_DB_TXN_AUTOCOMMIT,
        errstr, errstr_size);
    if (rc && dd_handler_txn_lost(db)) {
        dd_db_txn_rollback_raw(db); /* best effort: the connection may be gone */
        return dd_handler_txn_lost_error(h, where, errstr, errstr_size);
    }
    return rc;
}

void dd_handler_destroy(dd_handler_t *h)
{
    if (!h) return;
    if (h->initialized && h->desc && h->desc->fini) h->desc->fini(h->state);
    if (h->dl) dlclose(h->dl);
    dd_handler_outbox_free(h);
    dd_handler_metrics_destroy(h->metrics);
    free(h->path);
    free(h);
}
