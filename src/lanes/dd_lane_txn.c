/*
 * One batch, one transaction (see dd_lanes.h): claim every key, run the
 * handler for the keys the batch owns, record the outcomes, COMMIT. The
 * cheapest way that gives the right result is tried first (dd_lane_txn_modes
 * below); every outcome other than a commit rolls everything back, business
 * writes included, and says how the lane goes on: a dd_err_t class, or one
 * of the transaction outcomes DD_TXN_RACED, _RETRY, _REDO, _DECLINED and
 * _FAULT (a test fault).
 *
 * The messages of a batch may belong to several routes: each key is claimed
 * in its route's dedup table (table by table, in the routes' order, keys in
 * order within each: one lock order for every lane) and each message runs
 * through its route's handler, one transaction for all.
 */
#include "dd_lane_txn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "dd_common.h"
#include "dd_db_txn.h"
#include "dd_log.h"
#include "dd_utf8.h"

/* How a transaction calls the handler (see dd_lane_txn_modes). */
typedef enum {
    DD_LANE_BATCHED,    /* handle_batch() once for every key the batch owns */
    DD_LANE_OPTIMISTIC, /* handle() per message, no savepoints */
    DD_LANE_SAVEPOINTS, /* handle() per message, each in a savepoint */
} dd_lane_mode_t;

/* One of dedupd's statements in the transaction (dd_db_txn_check). */
static int dd_lane_sql(dd_lane_txn_t *txn, const char *sql, char *errstr, size_t errstr_size)
{
    int rc = dd_db_exec(txn->conn->db, sql, strlen(sql), errstr, errstr_size);

    return rc ? rc : dd_db_txn_check(txn->conn->db, sql, errstr, errstr_size);
}

static const dd_route_t *dd_lane_route(const dd_lane_txn_t *txn, const dd_item_t *item)
{
    return &txn->conn->env->routes->route[item->route];
}

/* claims[a..) sorted by group (table): the end of the group starting at a. */
static size_t dd_lane_group_end(dd_claim_t *const *claims, size_t a, size_t u)
{
    size_t b = a + 1;

    while (b < u && claims[b]->group == claims[a]->group)
        b++;
    return b;
}

/* Groups the batch's items by key: one claim per distinct key (the first
 * copy in offset order), claims sorted by key for the lock order. */
static size_t dd_lane_build_claims(dd_lane_txn_t *txn, dd_item_t **items, size_t n)
{
    size_t u = 0;

    for (size_t i = 0; i < n; i++) {
        dd_claim_t *c = &txn->claims[i];
        memset(c, 0, sizeof(*c));
        c->group = items[i]->route;
        c->key = items[i]->key;
        c->key_len = items[i]->key_len;
        c->hash = items[i]->hash;
        c->topic = rd_kafka_topic_name(items[i]->rkm->rkt);
        c->partition = items[i]->rkm->partition;
        c->offset = items[i]->rkm->offset;
        c->result_status = -1;
        txn->claimv[i] = c;
    }
    /* claims[i] belongs to items[i]; the sort is stable on the index so the
     * first copy of a key leads its group. */
    dd_claim_sort(txn->claimv, n);
    for (size_t i = 0; i < n; i++) {
        dd_claim_t *c = txn->claimv[i];
        if (u > 0 && dd_claim_cmp(txn->claimv[u - 1], c) == 0) {
            items[c - txn->claims]->claim = txn->claimv[u - 1];
            continue;
        }
        txn->claimv[u++] = c;
        items[c - txn->claims]->claim = c;
    }
    return u;
}

/* A copy of a key that this batch does not run the handler for. */
static int dd_lane_judge_copy(dd_lane_txn_t *txn, dd_item_t *item, int first, dd_stats_t *d)
{
    dd_claim_t *c = item->claim;

    dd_route_stats_t *rs = &d->route[item->route];

    if (!first && c->mine) {
        /* A repeat of a key this batch owns: compare with its first copy. */
        if (memcmp(item->hash, c->hash, DD_HASH_LEN) != 0) {
            d->conflicts++;
            rs->conflicts++;
            dd_lane_conn_dlq(item, DD_REASON_CONFLICT, "%s",
                             "same business key as an earlier message, other content");
            item->conflict_with = DD_CONFLICT_COPY;
            memcpy(item->conflict_hash, c->hash, DD_HASH_LEN);
            snprintf(item->conflict_first, sizeof(item->conflict_first), "%s [%d] @%lld", c->topic,
                     (int)c->partition, (long long)c->offset);
        } else if (c->result_status == DD_ROW_FAILED) {
            dd_lane_conn_dlq(item, DD_REASON_REJECTED, "copy of a rejected message: %.200s",
                             c->error ? c->error : "");
        } else {
            item->outcome = DD_OUT_DUPLICATE;
            d->duplicates++;
            rs->duplicates++;
        }
        return DD_OK;
    }
    /* Otherwise the stored row decides: the hash is checked on every path. */
    if (memcmp(item->hash, c->row_hash, DD_HASH_LEN) != 0) {
        d->conflicts++;
        rs->conflicts++;
        dd_lane_conn_dlq(item, DD_REASON_CONFLICT, "%s",
                         "business key already recorded with other content");
        item->conflict_with = DD_CONFLICT_ROW;
        memcpy(item->conflict_hash, c->row_hash, DD_HASH_LEN);
        c->want_times = 1; /* read after judging: dd_lane_conflict_times */
    } else if (c->row_status == DD_ROW_APPLIED) {
        item->outcome = DD_OUT_DUPLICATE;
        d->duplicates++;
        rs->duplicates++;
    } else if (c->row_status == DD_ROW_FAILED) {
        /* retry_failed is off: this copy is not retried, but never dropped. */
        dd_lane_conn_dlq(item, DD_REASON_REJECTED, "previously rejected: %.200s", c->row_error);
    } else {
        /* Processing under someone's unexpired lease: try the batch later. */
        return DD_ERR_RETRIABLE;
    }
    return DD_OK;
}

/* The handler applied item: keep its response (taken over) for the outcome
 * row. A response that is not UTF-8 cannot go into a utf8mb4 column. */
static void dd_lane_applied(dd_item_t *item, char *response, dd_stats_t *d)
{
    dd_claim_t *c = item->claim;

    if (response && !dd_utf8_valid(response, strlen(response))) {
        dd_log_msg(DD_LOG_WARN, c->topic, item->rkm->partition, item->rkm->offset, item->key,
                   "Handler response is not valid UTF-8; not stored.");
        free(response);
        response = NULL;
    }
    item->response = response;
    c->response = response;
    c->result_status = DD_ROW_APPLIED;
    item->outcome = DD_OUT_APPLIED;
    d->applied++;
    d->route[item->route].applied++;
    d->shard[item->shard].applied++;
}

/* DD_ERR_RETRIABLE (with errstr) when the handler's last statement failed
 * with a retriable error: deadlock, lock wait timeout or lost connection. A
 * deadlock already rolled back the whole transaction (savepoints too), so
 * the caller replays the batch rather than the message. Else 0. */
static int dd_lane_handler_db_error(dd_lane_txn_t *txn, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(txn->conn->db);
    unsigned int err = mysql_errno(mysql);

    if (!err || dd_db_classify(err) != DD_ERR_RETRIABLE) return 0;
    dd_errstr_set(errstr, errstr_size, "%u: %s (inside the handler)", err, mysql_error(mysql));
    return DD_ERR_RETRIABLE;
}

/* A handler call left the connection outside the transaction: a deadlock
 * rolled it back (retriable), or the handler ended it (a bug: fatal). */
static int dd_lane_broken(dd_lane_txn_t *txn, const dd_item_t *item, char *errstr,
                          size_t errstr_size)
{
    const dd_handler_t *h = dd_lane_route(txn, item)->h;

    if (dd_lane_handler_db_error(txn, errstr, errstr_size)) return DD_ERR_RETRIABLE;
    dd_errstr_set(errstr, errstr_size,
                  "handler %s (%s) ended the transaction (COMMIT, ROLLBACK or autocommit) "
                  "at %s [%d] @%lld: this is a handler bug",
                  dd_handler_name(h), dd_handler_path(h), item->claim->topic,
                  (int)item->rkm->partition, (long long)item->rkm->offset);
    return dd_db_txn_handler_or_cluster(txn->conn->db, DD_ERR_FATAL, errstr, errstr_size);
}

/* The handler ended dedupd's transaction and began another while handling
 * item: the savepoint of the message is gone (see dd_handler.h). */
static int dd_lane_lost(dd_lane_txn_t *txn, const dd_item_t *item, char *errstr, size_t errstr_size)
{
    char where[300];

    snprintf(where, sizeof(where), "at %s [%d] @%lld", item->claim->topic,
             (int)item->rkm->partition, (long long)item->rkm->offset);
    return dd_db_txn_handler_or_cluster(
        txn->conn->db,
        dd_handler_txn_lost_error(dd_lane_route(txn, item)->h, where, errstr, errstr_size), errstr,
        errstr_size);
}

/* Ends the transaction over items[0..n): COMMIT or ROLLBACK, after checking
 * that the transaction is still the one dedupd began (dd_handler_txn_end).
 * When the batch ran the handlers of several routes, the message names
 * the routes, not one handler. */
static int dd_lane_end(dd_lane_txn_t *txn, dd_item_t *const *items, size_t n, int commit,
                       char *errstr, size_t errstr_size)
{
    const rd_kafka_message_t *rkm = items[0]->rkm;
    const dd_routes_t *routes = txn->conn->env->routes;
    char where[600], names[300] = "";
    int seen[DD_CONF_ROUTE_MAX] = {0}, kinds = 0;
    size_t pos = 0;

    for (size_t i = 0; i < n; i++) {
        int r = items[i]->route;
        if (seen[r]) continue;
        seen[r] = 1;
        kinds++;
        if (pos < sizeof(names))
            pos += (size_t)snprintf(names + pos, sizeof(names) - pos, "%s%s (%s)",
                                    kinds > 1 ? ", " : "", routes->route[r].conf->name,
                                    dd_handler_name(routes->route[r].h));
    }
    snprintf(where, sizeof(where), "in a batch of %zu message(s) starting at %s [%d] @%lld%s%s", n,
             rd_kafka_topic_name(rkm->rkt), (int)rkm->partition, (long long)rkm->offset,
             kinds > 1 ? ", with the handlers of the routes " : "", kinds > 1 ? names : "");
    return dd_db_txn_handler_or_cluster(
        txn->conn->db,
        dd_handler_txn_end(kinds > 1 ? NULL : dd_lane_route(txn, items[0])->h,
                           dd_db_mysql(txn->conn->db), commit, where, errstr, errstr_size),
        errstr, errstr_size);
}

/* safe: take a savepoint first, so REJECT can roll back just this message.
 * Without one, a REJECT (or RETRY out of attempts) returns DD_TXN_REDO with the
 * decision recorded in txn->decided. */
static int dd_lane_run_handler(dd_lane_txn_t *txn, dd_item_t *item, int safe, dd_stats_t *d,
                               char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = txn->conn->env->conf;
    MYSQL *mysql = dd_db_mysql(txn->conn->db);
    rd_kafka_message_t *rkm = item->rkm;
    dd_claim_t *c = item->claim;
    const dd_route_t *rt = dd_lane_route(txn, item);
    dedupd_result res;
    dedupd_msg msg;
    int broken = 0, rc;
    size_t at = 0;
    dedupd_status st;
    unsigned int herr;

    rc = dd_lane_conn_headers_reserve(txn->conn, dd_lane_conn_header_cnt(rkm), errstr, errstr_size);
    if (!rc && safe) rc = dd_lane_sql(txn, "SAVEPOINT dd_msg", errstr, errstr_size);
    if (rc) return rc;
    dd_lane_conn_msg_fill(txn->conn, item, &at, &msg);
    dd_lane_conn_set_state(txn->conn, DD_LANE_IN_HANDLER);
    st = dd_handler_handle(rt->h, mysql, txn->conn->hconn[rt->idx].state, &msg, &res, &broken);
    herr = st == DEDUPD_OK ? 0 : mysql_errno(mysql); /* before the rollback clears it */
    dd_lane_conn_set_state(txn->conn, DD_LANE_IN_DB);
    if (broken) {
        free(res.response);
        return dd_lane_broken(txn, item, errstr, errstr_size);
    }
    if (st == DEDUPD_OK && txn->fault.rollback && !item->faulted) {
        /* Test fault: what a lost COMMIT, a deadlock or a crash does to a
         * handler, on purpose; the replay calls it again. */
        item->faulted = 1;
        free(res.response);
        return DD_TXN_FAULT;
    }
    if (st == DEDUPD_OK) {
        dd_lane_applied(item, res.response, d);
        return DD_OK;
    }
    free(res.response);
    if (dd_lane_handler_db_error(txn, errstr, errstr_size)) return DD_ERR_RETRIABLE;
    rc = safe ? dd_lane_sql(txn, "ROLLBACK TO SAVEPOINT dd_msg", errstr, errstr_size) : DD_OK;
    if (rc && dd_handler_txn_lost(mysql)) return dd_lane_lost(txn, item, errstr, errstr_size);
    if (rc) return rc;
    if (st == DEDUPD_RETRY) {
        item->attempts++;
        d->retries++;
        d->route[rt->idx].retries++;
        dd_lane_conn_log_retry(txn->conn, item, herr, res.error);
        if (conf->retry.max_attempts == 0 || item->attempts < conf->retry.max_attempts)
            return DD_TXN_RETRY;
        dd_lane_conn_dlq(item, DD_REASON_RETRIES_EXHAUSTED, "gave up after retries: %.200s",
                         res.error);
    } else {
        dd_lane_conn_dlq(item, DD_REASON_REJECTED, "%s", res.error);
    }
    /* The dead letter is logged by whoever sends it (or, in replay,
     * reports it): this decision may still be rolled back and redone. */
    if (!safe) {
        txn->decided = item; /* not called again: the redo only records it */
        return DD_TXN_REDO;
    }
    c->result_status = DD_ROW_FAILED;
    c->error = item->error;
    return DD_OK;
}

/* The redo of a batch reached the message whose failure was decided
 * without a savepoint: record it, without calling the handler again. */
static void dd_lane_record_decided(dd_item_t *item)
{
    item->outcome = DD_OUT_DLQ; /* reason and error kept from the decision */
    item->claim->result_status = DD_ROW_FAILED;
    item->claim->error = item->error;
}

static void dd_lane_free_responses(dd_item_t **items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(items[i]->response);
        items[i]->response = NULL;
    }
}

/* items[i] is the first copy of a key this transaction claimed. */
static int dd_lane_owns(const dd_lane_txn_t *txn, dd_item_t *const *items, size_t i)
{
    return items[i]->claim == &txn->claims[i] && items[i]->claim->mine;
}

/* DD_LANE_BATCHED, for route r: one handle_batch() call for the first copy
 * of every key of the route this transaction owns. Returns DD_TXN_DECLINED
 * when the handler declined (the caller rolls back and goes message by
 * message). */
static int dd_lane_run_batch_route(dd_lane_txn_t *txn, int r, dd_item_t **items, size_t n,
                                   dd_stats_t *d, char *errstr, size_t errstr_size)
{
    const dd_route_t *rt = &txn->conn->env->routes->route[r];
    MYSQL *mysql = dd_db_mysql(txn->conn->db);
    size_t m = 0, k = 0, nhdr = 0, at = 0;
    int broken = 0, rc, faulted = 0;
    dedupd_status st;

    for (size_t i = 0; i < n; i++)
        if (items[i]->route == r && dd_lane_owns(txn, items, i))
            nhdr += dd_lane_conn_header_cnt(items[i]->rkm);
    if ((rc = dd_lane_conn_headers_reserve(txn->conn, nhdr, errstr, errstr_size))) return rc;
    for (size_t i = 0; i < n; i++) {
        if (items[i]->route != r || !dd_lane_owns(txn, items, i)) continue;
        dd_lane_conn_msg_fill(txn->conn, items[i], &at, &txn->msgs[m]);
        txn->msgv[m] = &txn->msgs[m];
        m++;
    }
    if (m == 0) return DD_OK;
    dd_lane_conn_set_state(txn->conn, DD_LANE_IN_HANDLER);
    st = dd_handler_handle_batch(rt->h, mysql, txn->conn->hconn[r].state, txn->msgv, m,
                                 txn->results, &broken);
    dd_lane_conn_set_state(txn->conn, DD_LANE_IN_DB);
    if (broken) {
        for (size_t j = 0; j < m; j++)
            free(txn->results[j].response);
        for (size_t i = 0; i < n; i++)
            if (items[i]->route == r) return dd_lane_broken(txn, items[i], errstr, errstr_size);
    }
    if (st != DEDUPD_OK) {
        if (dd_lane_handler_db_error(txn, errstr, errstr_size))
            return DD_ERR_RETRIABLE; /* replay the batch, as one batch again */
        dd_log(DD_LOG_DEBUG,
               "Lane %d: handler %s declined a batch of %zu, going message by "
               "message: %s",
               txn->conn->idx, dd_handler_name(rt->h), m,
               txn->results[0].error[0] ? txn->results[0].error : "no reason given");
        txn->declined_route = r;
        return DD_TXN_DECLINED;
    }
    for (size_t i = 0; txn->fault.rollback && i < n; i++) {
        if (items[i]->route != r || !dd_lane_owns(txn, items, i) || items[i]->faulted) continue;
        items[i]->faulted = faulted = 1; /* test fault, as in dd_lane_run_handler */
    }
    if (faulted) {
        for (size_t j = 0; j < m; j++)
            free(txn->results[j].response);
        return DD_TXN_FAULT;
    }
    for (size_t i = 0; i < n; i++)
        if (items[i]->route == r && dd_lane_owns(txn, items, i))
            dd_lane_applied(items[i], txn->results[k++].response, d);
    d->batched += m;
    d->route[r].batched += m;
    return DD_OK;
}

/* DD_LANE_BATCHED: handle_batch() of every route of the batch whose handler
 * takes it; the others' messages go through handle() in the same pass. */
static int dd_lane_run_batch(dd_lane_txn_t *txn, dd_item_t **items, size_t n, dd_stats_t *d,
                             char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (int r = 0; !rc && r < txn->conn->env->routes->cnt; r++)
        if (txn->conn->env->route[r].batch)
            rc = dd_lane_run_batch_route(txn, r, items, n, d, errstr, errstr_size);
    return rc;
}

/* Pre-check the next batch when at least 1 in 8 keys of this one were
 * already applied: a replay or a stream with many redeliveries. */
static void dd_lane_tune_precheck(dd_lane_txn_t *txn, size_t u)
{
    size_t applied = 0;

    for (size_t i = 0; i < u; i++)
        applied += !txn->claimv[i]->mine && txn->claimv[i]->row_status == DD_ROW_APPLIED;
    txn->precheck = applied * 8 >= u && applied > 0;
}

/* Rolls back the transaction over items[0..n) that ended with rc. When
 * dedupd rolls back on purpose after the handler ran (a RETRY, a REJECT
 * without a savepoint, a declined batch, a claim race, a test fault), the handler may
 * still have committed part of it on its own, so the guard is checked as
 * on COMMIT. After an error (a deadlock drops the savepoint, a lost
 * connection everything) it is not. Returns rc, or DD_ERR_FATAL. */
static int dd_lane_rollback(dd_lane_txn_t *txn, dd_item_t *const *items, size_t n, int rc,
                            char *errstr, size_t errstr_size)
{
    char err[1024];
    int erc;

    if (rc != DD_OK && rc != DD_TXN_REDO && rc != DD_TXN_DECLINED && rc != DD_TXN_RACED &&
        rc != DD_TXN_FAULT) {
        dd_db_txn_rollback_quiet(txn->conn->db);
        return rc;
    }
    erc = dd_lane_end(txn, items, n, 0, err, sizeof(err));
    if (erc == DD_OK) return rc;
    dd_db_txn_rollback_quiet(txn->conn->db); /* the release failed: nothing ran after it */
    if (erc != DD_ERR_FATAL) return rc;      /* a lost connection: the next attempt meets it */
    dd_errstr_set(errstr, errstr_size, "%s", err);
    return DD_ERR_FATAL;
}

/* The times of the rows this batch's messages conflicted with, for their
 * log lines (claims[0..u) sorted, as built). */
static int dd_lane_conflict_times(dd_lane_txn_t *txn, dd_item_t **items, size_t n, size_t u,
                                  char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (size_t a = 0, b; !rc && a < u; a = b) {
        b = dd_lane_group_end(txn->claimv, a, u);
        rc = dd_claim_row_times(txn->conn->db, &txn->conn->env->route[txn->claimv[a]->group].copts,
                                txn->claimv + a, b - a, &txn->conn->sql, errstr, errstr_size);
    }

    for (size_t i = 0; !rc && i < n; i++) {
        if (items[i]->conflict_with != DD_CONFLICT_ROW) continue;
        snprintf(items[i]->conflict_created, sizeof(items[i]->conflict_created), "%s",
                 items[i]->claim->row_created);
        snprintf(items[i]->conflict_updated, sizeof(items[i]->conflict_updated), "%s",
                 items[i]->claim->row_updated);
    }
    return rc;
}

/* At debug level, one line per committed transaction. */
static void dd_lane_log_batch(const dd_lane_txn_t *txn, dd_item_t *const *items, size_t n, size_t u,
                              size_t claimed, const dd_stats_t *d, int64_t t0_us)
{
    size_t dead = 0;

    if (!dd_log_enabled(DD_LOG_DEBUG)) return;
    for (size_t i = 0; i < n; i++)
        dead += items[i]->outcome == DD_OUT_DLQ;
    dd_log(DD_LOG_DEBUG,
           "Lane %d: committed a batch of %zu message(s), %zu key(s): %zu claimed, %llu applied, "
           "%llu duplicate(s), %llu conflict(s), %zu dead letter(s), in %.1f ms.",
           txn->conn->idx, n, u, claimed, (unsigned long long)d->applied,
           (unsigned long long)d->duplicates, (unsigned long long)d->conflicts, dead,
           (double)(dd_now_us() - t0_us) / 1000.0);
}

/* One attempt at one transaction over items[0..n) (see dd_lane_txn_modes).
 * locking: claim every key first, deferring none (replaying a race). */
static int dd_lane_txn_once(dd_lane_txn_t *txn, dd_item_t **items, size_t n, dd_lane_mode_t mode,
                            int locking, long *retry_at, dd_stats_t *d, char *errstr,
                            size_t errstr_size)
{
    unsigned char token[DD_CLAIM_TOKEN_LEN];
    size_t u, mine = 0;
    int flags = txn->precheck ? DD_CLAIM_PRECHECK : 0, deferred = 0;
    int64_t t0_us = dd_now_us();
    int rc;

    *retry_at = -1;
    memset(d, 0, sizeof(*d));
    for (size_t i = 0; i < n; i++) {
        items[i]->outcome = DD_OUT_NONE;
        items[i]->response = NULL;
        items[i]->conflict_with = DD_CONFLICT_NONE;
    }
    u = dd_lane_build_claims(txn, items, n);
    if (RAND_bytes(token, sizeof(token)) != 1) {
        dd_errstr_set(errstr, errstr_size, "no random bytes for the claim token");
        return DD_ERR_FATAL;
    }
    if (txn->fault.blind) flags |= DD_CLAIM_BLIND;
    rc = dd_handler_txn_begin(dd_db_mysql(txn->conn->db), errstr, errstr_size);
    /* Table by table, in the routes' order (the claims are sorted so). */
    for (size_t a = 0, b; !rc && a < u; a = b) {
        const dd_claim_opts_t *copts = &txn->conn->env->route[txn->claimv[a]->group].copts;
        int gflags = flags | (copts->defer && !locking ? DD_CLAIM_DEFER : 0);
        b = dd_lane_group_end(txn->claimv, a, u);
        deferred |= (gflags & DD_CLAIM_DEFER) != 0;
        rc = dd_claim_acquire(txn->conn->db, copts, txn->claimv + a, b - a, token, gflags,
                              txn->claimw + a, &txn->conn->sql, errstr, errstr_size);
    }
    if (!rc && !deferred) /* deferring pre-checks every batch */
        dd_lane_tune_precheck(txn, u);
    if (!rc && mode == DD_LANE_BATCHED)
        rc = dd_lane_run_batch(txn, items, n, d, errstr, errstr_size);
    for (size_t i = 0; !rc && i < n; i++) {
        dd_item_t *item = items[i];
        int first = item->claim == &txn->claims[i];
        if (first && item->claim->mine && mode == DD_LANE_BATCHED &&
            txn->conn->env->route[item->route].batch)
            continue; /* applied by dd_lane_run_batch */
        if (first && item->claim->mine && item == txn->decided)
            dd_lane_record_decided(item);
        else if (first && item->claim->mine)
            rc = dd_lane_run_handler(txn, item, mode == DD_LANE_SAVEPOINTS, d, errstr, errstr_size);
        else
            rc = dd_lane_judge_copy(txn, item, first, d);
        if (rc == DD_TXN_RETRY) {
            *retry_at = (long)i;
            rc = DD_OK;
            goto rollback;
        }
    }
    if (!rc && d->conflicts) rc = dd_lane_conflict_times(txn, items, n, u, errstr, errstr_size);
    /* Outcomes of the keys this batch owns, in key order, one statement. */
    for (size_t i = 0; !rc && i < u; i++)
        if (txn->claimv[i]->mine && txn->claimv[i]->result_status >= 0)
            txn->claimv[mine++] = txn->claimv[i];
    for (size_t a = 0, b; !rc && a < mine; a = b) {
        b = dd_lane_group_end(txn->claimv, a, mine);
        rc = dd_claim_finish(txn->conn->db, &txn->conn->env->route[txn->claimv[a]->group].copts,
                             txn->claimv + a, b - a, &txn->conn->sql, txn->rows, errstr,
                             errstr_size);
    }
    if (!rc) rc = dd_lane_end(txn, items, n, 1, errstr, errstr_size);
    if (!rc && txn->fault.commit_lost && ++txn->fault.commits % txn->fault.commit_lost == 0) {
        /* Test-only fault: the COMMIT went through but its reply is "lost",
         * exactly what a dropped connection during COMMIT looks like. */
        dd_errstr_set(errstr, errstr_size,
                      "2013: Lost connection to server during COMMIT "
                      "(injected by DEDUPD_TEST_FAULTS)");
        rc = DD_ERR_RETRIABLE;
    }
    if (!rc) {
        dd_lane_free_responses(items, n);
        d->batches = 1;
        dd_lane_log_batch(txn, items, n, u, mine, d, t0_us);
        return DD_OK;
    }
rollback:
    rc = dd_lane_rollback(txn, items, n, rc, errstr, errstr_size);
    dd_lane_free_responses(items, n);
    return rc;
}

/* One transaction over items[0..n). Sets *retry_at to the index of a message
 * whose handler asked for RETRY (everything rolled back) or -1. Returns 0 or
 * a dd_err_t class.
 *
 * The cheapest way that gives the right result is tried first:
 *  1. a handler with handle_batch() gets every owned message of its route
 *     in one call (the other routes' go through handle() meanwhile); if
 *     one declines, all is rolled back and it goes on with 2;
 *  2. handle() per message without savepoints (they cost a round trip per
 *     message and are only needed when a message fails);
 *  3. when a handler REJECTs (or runs out of RETRY attempts) in 2, the
 *     whole transaction is rolled back and run again with a savepoint per
 *     message, that message's failure recorded without calling its handler
 *     again.
 * The committed result is what 3 alone gives; handlers are called again only
 * for messages whose effects were rolled back, as on a deadlock replay. */
static int dd_lane_txn_modes(dd_lane_txn_t *txn, dd_item_t **items, size_t n, int locking,
                             long *retry_at, dd_stats_t *d, char *errstr, size_t errstr_size)
{
    int rc = DD_TXN_DECLINED, declined = 0, batched = 0;
    uint64_t retries;

    for (size_t i = 0; !batched && i < n; i++)
        batched = txn->conn->env->route[items[i]->route].batch;
    txn->decided = NULL;
    if (batched)
        rc = dd_lane_txn_once(txn, items, n, DD_LANE_BATCHED, locking, retry_at, d, errstr,
                              errstr_size);
    if (rc == DD_TXN_DECLINED) {
        declined = batched;
        rc = dd_lane_txn_once(txn, items, n, DD_LANE_OPTIMISTIC, locking, retry_at, d, errstr,
                              errstr_size);
    }
    if (rc == DD_TXN_REDO) {
        dd_stats_t before = *d; /* its retries were counted for the decided message */
        rc = dd_lane_txn_once(txn, items, n, DD_LANE_SAVEPOINTS, locking, retry_at, d, errstr,
                              errstr_size);
        retries = before.retries;
        d->retries += retries;
        for (int r = 0; r < txn->conn->env->routes->cnt; r++)
            d->route[r].retries += before.route[r].retries;
        txn->decided = NULL;
    }
    d->batch_declined += (uint64_t)declined;
    if (declined) d->route[txn->declined_route].batch_declined++;
    return rc;
}

/* One transaction over items[0..n), as dd_lane_txn_modes. When a deferred
 * claim raced another consumer, everything was rolled back: the batch runs
 * again with every key claimed first, so it waits for that consumer's
 * commit and then finds its row. A test fault's rollback runs it again at
 * once, as it was. */
int dd_lane_txn_run(dd_lane_txn_t *txn, dd_item_t **items, size_t n, long *retry_at, dd_stats_t *d,
                    char *errstr, size_t errstr_size)
{
    uint64_t races = 0;
    int rc, locking = 0;

    for (;;) {
        rc = dd_lane_txn_modes(txn, items, n, locking, retry_at, d, errstr, errstr_size);
        if (rc == DD_TXN_FAULT) continue;
        if (rc != DD_TXN_RACED || locking) break;
        dd_log(DD_LOG_INFO,
               "Lane %d: another consumer claimed a key of this batch meanwhile; "
               "rolled back, running it again with the locking claim.",
               txn->conn->idx);
        locking = 1;
        races++;
    }
    d->claim_races += races;
    return rc;
}

/* Fault injection for the tests (DEDUPD_TEST_FAULTS), e.g. commit_lost=N:
 * every Nth COMMIT of each lane reports a lost connection after it
 * succeeded, so the outcome-unknown path (replay, resolved by the claim)
 * is exercised deterministically. Unset in production; logged when set. */
static void dd_lane_txn_faults(dd_lane_txn_t *txn, int idx)
{
    txn->fault.commit_lost = dd_test_fault("commit_lost");
    txn->fault.blind = dd_test_fault("precheck_blind") != 0;
    txn->fault.rollback = dd_test_fault("rollback_after_handler") != 0;
    if (txn->fault.commit_lost)
        dd_log(DD_LOG_WARN,
               "DEDUPD_TEST_FAULTS: every %lu. COMMIT will report a lost "
               "connection after succeeding (test fault injection).",
               txn->fault.commit_lost);
    if (txn->fault.rollback && idx == 0) /* on purpose: dedupd handler-test's pass 2 */
        dd_log(DD_LOG_INFO, "Test fault rollback_after_handler: each message's transaction is "
                            "rolled back and run again once after its handler succeeded.");
    if (txn->fault.blind && idx == 0)
        dd_log(DD_LOG_WARN, "DEDUPD_TEST_FAULTS: the claim pre-check finds no keys, so every "
                            "known key races (test fault injection).");
}

int dd_lane_txn_init(dd_lane_txn_t *txn, dd_lane_conn_t *conn, size_t cap, char *errstr,
                     size_t errstr_size)
{
    memset(txn, 0, sizeof(*txn));
    txn->conn = conn;
    dd_lane_txn_faults(txn, conn->idx);
    txn->claims = calloc(cap, sizeof(*txn->claims));
    txn->claimv = calloc(cap, sizeof(*txn->claimv));
    txn->claimw = calloc(cap, sizeof(*txn->claimw));
    txn->rows = dd_claim_rows_new();
    txn->msgs = calloc(cap, sizeof(*txn->msgs));
    txn->msgv = calloc(cap, sizeof(*txn->msgv));
    txn->results = calloc(cap, sizeof(*txn->results));
    if (txn->claims && txn->claimv && txn->claimw && txn->rows && txn->msgs && txn->msgv &&
        txn->results)
        return DD_OK;
    dd_lane_txn_release(txn);
    dd_errstr_set(errstr, errstr_size, "out of memory");
    return DD_ERR_NOMEM;
}

void dd_lane_txn_release(dd_lane_txn_t *txn)
{
    free(txn->claims);
    free(txn->claimv);
    free(txn->claimw);
    dd_claim_rows_destroy(txn->rows);
    free(txn->msgs);
    free(txn->msgv);
    free(txn->results);
    memset(txn, 0, sizeof(*txn));
}
