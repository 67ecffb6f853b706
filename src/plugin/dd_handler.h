/*
 * Handler plugins: dlopen, ABI check, and the calls into the plugin.
 *
 * A handler that was built for another ABI version, or that lacks the
 * dedupd_handler_v1 symbol or a handle function, is refused at load with a
 * message naming the file and the versions, before anything else happens.
 * The host API a handler of ABI 3 gets (dedupd_host) is implemented here.
 */
#ifndef DD_HANDLER_H
#define DD_HANDLER_H

#include <stddef.h>
#include <stdio.h>

#include "dedupd/handler.h"

typedef struct dd_handler_s dd_handler_t;

/* Loads path, checks the ABI and calls init_host (ABI >= 3, with the host
 * API: dedupd's logger, conf, the instance's name, whether the outbox is
 * on: outbox.enabled) or init(conf). conf may be NULL. */
int dd_handler_load(dd_handler_t **hp, const char *path, const config_setting_t *conf, int outbox,
                    char *errstr, size_t errstr_size);
const char *dd_handler_name(const dd_handler_t *h);
/* The file it was loaded from, as configured (resolved). */
const char *dd_handler_path(const dd_handler_t *h);

/* Bounds the responses: from now on a response longer than max bytes
 * turns the handler's OK into DEDUPD_REJECT with an error saying both
 * sizes (handle), or declines the batch (handle_batch). 0: unbounded.
 * Call before the first handle. */
void dd_handler_set_max_response(dd_handler_t *h, size_t max);
/* Turns host->emit on (scope: the route's dedup table; ns[s]: the event
 * namespace of shard s, of ns_cnt; both part of every event id; max_bytes:
 * the largest event, the relay's message.max.bytes) or off (scope NULL).
 * Copies them. Call before the first handle. 0, or DD_ERR_NOMEM. */
int dd_handler_set_outbox(dd_handler_t *h, const char *scope, const char *const *ns, int ns_cnt,
                          size_t max_bytes);
/* Calls the optional migrate. Returns 0 or DD_ERR_FATAL with errstr. */
int dd_handler_migrate(dd_handler_t *h, MYSQL *db, char *errstr, size_t errstr_size);

/* Calls the optional conn_init (ABI >= 3) for a connection dedupd opened
 * for handler work: after every connect and reconnect, before the first
 * handle on it. *conn_state gets the handler's state for the connection
 * (NULL without conn_init), to pass to every call on it and to
 * dd_handler_conn_fini(). Returns 0; DD_ERR_RETRIABLE when it failed with
 * a retriable server error on db (a lost connection: reconnect and call
 * it again); else DD_ERR_FATAL, also when it left a transaction open or
 * autocommit off. errstr names the handler. */
int dd_handler_conn_init(dd_handler_t *h, MYSQL *db, void **conn_state, char *errstr,
                         size_t errstr_size);
/* 1 when the handler has conn_init (ABI >= 3). */
int dd_handler_has_conn_init(const dd_handler_t *h);
/* Calls the optional conn_fini (ABI >= 3) before db is closed, for a
 * connection whose dd_handler_conn_init() succeeded. */
void dd_handler_conn_fini(dd_handler_t *h, MYSQL *db, void *conn_state);

/* Calls handle_conn() or handle() with res zeroed first, msg being the
 * calling thread's current message for the host's log meanwhile.
 * conn_state: from dd_handler_conn_init() for db. Sets *broken_txn when
 * the connection is no longer inside a transaction afterwards (the
 * handler committed, rolled back or changed autocommit: a handler bug).
 * An out-of-range status, or a response over the bound, is turned into
 * DEDUPD_REJECT with an error. */
dedupd_status dd_handler_handle(dd_handler_t *h, MYSQL *db, void *conn_state, const dedupd_msg *msg,
                                dedupd_result *res, int *broken_txn);
/* 1 when the handler has handle_batch or handle_batch_conn. */
int dd_handler_has_batch(const dd_handler_t *h);
/* Calls handle_batch_conn() or handle_batch() with res[0..n) zeroed
 * first (conn_state as for dd_handler_handle). Any status but
 * DEDUPD_OK means the batch was declined: the responses are freed and the
 * caller rolls back and goes message by message; res[0].error says why.
 * A response over the bound declines the batch (handle() then rejects
 * that message alone).
 * *broken_txn as for dd_handler_handle(). */
dedupd_status dd_handler_handle_batch(dd_handler_t *h, MYSQL *db, void *conn_state,
                                      const dedupd_msg *const *msgs, size_t n, dedupd_result *res,
                                      int *broken_txn);
/* External mode (ABI version >= 4; include/dedupd/handler.h). */
/* DEDUPD_MODE_LOCAL or DEDUPD_MODE_EXTERNAL (descriptors before ABI 4 are
 * local). */
int dd_handler_mode(const dd_handler_t *h);
int dd_handler_has_finish(const dd_handler_t *h);
int dd_handler_has_reconcile(const dd_handler_t *h);
/* Calls act() with res zeroed first. An out-of-range status is turned into
 * DEDUPD_REJECT with an error; only an OK keeps res->response. The effect
 * of an OK cannot be undone, so a response over the bound is dropped
 * (NULL), with res->error saying so for the caller's log. */
dedupd_status dd_handler_act(dd_handler_t *h, const dedupd_msg *msg, dedupd_result *res);
/* Calls the optional finish() inside the open transaction on db, with res
 * holding act()'s result (its error is cleared first); without finish()
 * this is DEDUPD_OK. Statuses and responses as dd_handler_act();
 * *broken_txn as for dd_handler_handle(). */
dedupd_status dd_handler_finish(dd_handler_t *h, MYSQL *db, const dedupd_msg *msg,
                                dedupd_result *res, int *broken_txn);
/* Calls reconcile() (the caller checked dd_handler_has_reconcile) with res
 * zeroed first. res->response is kept only with DEDUPD_DONE (dropped when
 * over the bound); an outcome out of range is DEDUPD_UNKNOWN with an
 * error. */
dedupd_outcome dd_handler_reconcile(dd_handler_t *h, const char *biz_key, int64_t fence,
                                    dedupd_result *res);
/* The wait the last dd_handler_act() or dd_handler_reconcile() on the
 * calling thread asked for before its next attempt (host->retry_after,
 * ABI 7), in milliseconds; -1 when it asked for none. */
int64_t dd_handler_retry_after_ms(void);

/* Calls the optional check() (ABI version >= 7) for `dedupd check`: what the
 * handler reaches outside the database, in one line into report. Returns
 * its dedupd_check_level (an invalid one is DEDUPD_CHECK_FAIL, saying so),
 * or -1 when the handler has no check(). */
int dd_handler_probe(dd_handler_t *h, char *report, size_t report_size);

/* The transaction guard. A handler that ends the transaction and opens a
 * new one (COMMIT; BEGIN, or a statement that commits implicitly) leaves
 * the in-transaction flag set, so dd_handler_handle() cannot see it. So
 * every transaction that calls a handler opens with dedupd's own savepoint,
 * DD_HANDLER_TXN_SAVEPOINT, and releases it as it ends: ending the
 * transaction drops every savepoint, and the release then fails with
 * ER_SP_DOES_NOT_EXIST. Both ride in the round trip of START TRANSACTION
 * and of COMMIT or ROLLBACK (one multi-statement query each). */
#define DD_HANDLER_TXN_SAVEPOINT "dedupd_txn"

/* START TRANSACTION and the guard. Returns 0 or the dd_err_t class of the
 * database error (written to errstr). */
int dd_handler_txn_begin(MYSQL *db, char *errstr, size_t errstr_size);
/* Releases the guard, then COMMITs (commit = 1) or ROLLs BACK. When the
 * guard is gone, the transaction is rolled back and the result is
 * DD_ERR_FATAL with a message naming the handler (h; NULL when several ran:
 * where names them) and saying what it did; where says which messages were
 * in the transaction. Else 0 or the class of
 * the database error (a failed release means nothing was committed). */
int dd_handler_txn_end(const dd_handler_t *h, MYSQL *db, int commit, const char *where,
                       char *errstr, size_t errstr_size);
/* 1 when db's last error says that a savepoint dedupd set is gone: the
 * handler ended the transaction. */
int dd_handler_txn_lost(MYSQL *db);
/* Writes the handler-bug message for a transaction the handler ended and
 * returns DD_ERR_FATAL. h NULL: the transaction ran several handlers, and
 * where names them. */
int dd_handler_txn_lost_error(const dd_handler_t *h, const char *where, char *errstr,
                              size_t errstr_size);

/* The handlers' own metrics (include/dedupd/handler.h, "Metrics"):
 * hs[0..n) the routes' handlers (NULL: none loaded), routes[0..n) the
 * routes' names, the label route of their series. */
/* Writes their Prometheus text to f, each name's HELP and TYPE once with
 * the series of every route (any thread: each metric's series are read
 * under its lock). */
void dd_handler_metrics_render(FILE *f, dd_handler_t *const *hs, const char *const *routes, int n);
/* DD_ERR_CONFIG, errstr naming both routes, when two routes' handlers
 * declare metrics /metrics cannot print together (one name with other
 * types, labels or buckets, or samples of one name); else 0. */
int dd_handler_metrics_check(dd_handler_t *const *hs, const char *const *routes, int n,
                             char *errstr, size_t errstr_size);

/* Calls fini and dlclose. Safe with NULL. */
void dd_handler_destroy(dd_handler_t *h);

#endif /* DD_HANDLER_H */
