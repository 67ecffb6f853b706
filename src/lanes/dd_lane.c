/*
 * One lane of the group (see dd_lanes.h): its queue, its thread, and a
 * batch run to completion, replayed after a retriable database error and
 * committed up to a message whose handler asked to retry, which is retried
 * with backoff. The lane hands each batch to its executors, which never
 * call back: the wrong-shard check (dd_lane_shard.c), the transaction
 * itself (dd_lane_txn.c) and external mode (dd_lane_ext.c); what they do
 * not finish comes back to the lane's queue here.
 */
#include "dd_lanes_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dd_common.h"
#include "dd_log.h"

/* ---- the queue ---- */

/* The lane is woken only when it waits for the first item of a batch, or
 * when the queue holds what fills the batch it is collecting: while it
 * fills a batch it waits for its deadline anyway, and a wake-up per message
 * costs the consumer's thread a system call and the lane a context switch each. */
void dd_lane_push(dd_lane_t *lane, dd_item_t *item)
{
    item->next = NULL;
    pthread_mutex_lock(&lane->mu);
    if (lane->tail)
        lane->tail->next = item;
    else
        lane->head = item;
    lane->tail = item;
    if ((++lane->queued == 1 && lane->idle) || lane->queued >= lane->need)
        pthread_cond_signal(&lane->cv);
    pthread_mutex_unlock(&lane->mu);
}

/* Takes up to max_messages items, waiting up to max_wait_ms after the first
 * one for the batch to fill. Returns 0 when the lane should exit, or when
 * none came and a waiting message's time came (external mode). */
static size_t dd_lane_collect(dd_lane_t *lane)
{
    const dd_conf_t *conf = lane->env->conf;
    size_t n = 0, max = (size_t)conf->batch.max_messages;
    struct timespec ts;
    int filling = 0, waited = 0;

    pthread_mutex_lock(&lane->mu);
    for (;;) {
        while (lane->head && n < max) {
            dd_item_t *item = lane->head;
            lane->head = item->next;
            if (!lane->head) lane->tail = NULL;
            lane->queued--;
            item->next = NULL;
            lane->batch[n++] = item;
        }
        if (n >= max || atomic_load(&lane->env->stop_hard)) break;
        if (n > 0 && (waited || conf->batch.max_wait_ms == 0 || atomic_load(&lane->env->stop_soft)))
            break;
        if (n == 0 && dd_lane_ext_due(&lane->ext)) break; /* a waiting message's turn */
        if (n == 0 && atomic_load(&lane->env->stop_soft) && !dd_lane_ext_parked(&lane->ext)) break;
        /* The fill deadline is set once, at the first item: every push
         * signals the lane, and ending the wait at the next push would cut
         * batches down to the arrival rate of single messages. */
        if (!filling && n > 0) {
            dd_cond_deadline(&ts, conf->batch.max_wait_ms);
            filling = 1;
        } else if (!filling) {
            dd_cond_deadline(&ts, 100);
        }
        lane->idle = n == 0;
        lane->need = max - n;
        if (pthread_cond_timedwait(&lane->cv, &lane->mu, &ts) == ETIMEDOUT && n > 0) waited = 1;
    }
    lane->idle = 0;
    lane->need = max;
    pthread_mutex_unlock(&lane->mu);
    return n;
}

/* Puts a list of unfinished items back at the head of the queue, in
 * order (external mode's parked messages when the lane ends). */
static void dd_lane_requeue_list(dd_lane_t *lane, dd_item_t *list)
{
    dd_item_t *tail = list;
    size_t n = 1;

    if (!list) return;
    for (; tail->next; tail = tail->next)
        n++;
    pthread_mutex_lock(&lane->mu);
    tail->next = lane->head;
    lane->head = list;
    if (!lane->tail) lane->tail = tail;
    lane->queued += n;
    pthread_mutex_unlock(&lane->mu);
}

/* Retriable database error: roll back (done), reconnect when the
 * connection is gone, back off. Returns 0 to replay, or a fatal class. */
static int dd_lane_recover(dd_lane_t *lane, int attempt, const char *why)
{
    char err[512];
    int rc;

    dd_log(DD_LOG_WARN, "Lane %d: batch rolled back, will replay it (attempt %d): %s",
           lane->conn.idx, attempt, why);
    dd_lane_conn_set_state(&lane->conn, DD_LANE_DB_BACKOFF);
    for (;;) {
        if (dd_sleep_ms(dd_lane_conn_backoff_ms(&lane->conn, attempt), &lane->env->stop_hard))
            return DD_OK;
        if (!(rc = dd_lane_conn_reconnect(&lane->conn, err, sizeof(err)))) return DD_OK;
        if (rc != DD_ERR_RETRIABLE) {
            dd_log(DD_LOG_ERROR, "Lane %d: %s", lane->conn.idx, err);
            return rc;
        }
        dd_log(DD_LOG_WARN, "Lane %d: %s", lane->conn.idx, err);
        attempt++;
    }
}

/* Puts unfinished items back at the head of the queue (shutdown timeout or
 * fatal error), so dd_lanes_stop() hands them to the consumer's thread. */
static void dd_lane_requeue(dd_lane_t *lane, dd_item_t **items, size_t n)
{
    if (n == 0) return;
    pthread_mutex_lock(&lane->mu);
    for (size_t i = n; i-- > 0;) {
        items[i]->next = lane->head;
        lane->head = items[i];
        if (!lane->tail) lane->tail = items[i];
    }
    lane->queued += n;
    pthread_mutex_unlock(&lane->mu);
}

/* Adds the counts of events in from (a handler's RETRY, a claim race, a
 * declined batch) to to: they happened, and were logged, even when the
 * attempt that saw them was rolled back and runs again. */
static void dd_lane_carry(dd_stats_t *to, const dd_stats_t *from)
{
    to->retries += from->retries;
    to->claim_races += from->claim_races;
    to->batch_declined += from->batch_declined;
    for (int r = 0; r < DD_STATS_ROUTE_MAX; r++) {
        to->route[r].retries += from->route[r].retries;
        to->route[r].batch_declined += from->route[r].batch_declined;
    }
}

/* Runs a whole batch to completion: replays on database errors, commits
 * the part before a RETRY message and retries from it with backoff. */
static void dd_lane_process(dd_lane_t *lane, dd_item_t **items, size_t n)
{
    dd_lane_env_t *env = lane->env;
    dd_item_t *backoff_item = NULL;
    size_t start = 0;
    int db_attempt = 0;
    char err[1024];
    dd_stats_t d;

    for (size_t i = 0; i < n; i++) {
        if (dd_lane_conn_hash(&lane->conn, items[i]) == 0) continue;
        dd_lane_requeue(lane, items, n);
        return;
    }
    while (start < n && !atomic_load(&env->stop_hard) && !atomic_load(&env->report.fatal)) {
        size_t limit = n - start;
        long retry_at = -1;
        dd_stats_t carried = {0}; /* events of attempts rolled back for a prefix commit */
        int64_t t0;
        int rc;

        if (items[start] == backoff_item) {
            dd_lane_conn_set_state(&lane->conn, DD_LANE_RETRY_BACKOFF);
            if (dd_sleep_ms(dd_lane_conn_backoff_ms(&lane->conn, items[start]->attempts),
                            &env->stop_hard))
                break;
        }
        dd_lane_conn_set_state(&lane->conn, DD_LANE_IN_DB);
        t0 = dd_now_us();
        for (;;) {
            rc = dd_lane_txn_run(&lane->txn, items + start, limit, &retry_at, &d, err, sizeof(err));
            if (rc || retry_at <= 0) break;
            dd_lane_carry(&carried, &d);
            backoff_item = items[start + (size_t)retry_at];
            limit = (size_t)retry_at; /* commit what came before it */
        }
        dd_lane_carry(&d, &carried);
        if (rc == DD_ERR_RETRIABLE) {
            dd_stats_t e = {.db_errors_retriable = 1};
            e.shard[lane->conn.shard].db_errors_retriable = 1;
            dd_lane_carry(&e, &d); /* what the failed attempt saw still happened */
            dd_lane_conn_post(&lane->conn, NULL, 0, &e);
            rc = dd_lane_recover(lane, ++db_attempt, err);
            if (!rc) continue;
        }
        if (rc) {
            dd_lane_conn_fatal(&lane->conn, err);
            break;
        }
        db_attempt = 0;
        if (retry_at == 0) {
            backoff_item = items[start];
            dd_lane_conn_post(&lane->conn, NULL, 0, &d);
            continue;
        }
        dd_stats_observe_batch(&d, (double)(dd_now_us() - t0) / 1e6);
        dd_lane_conn_post(&lane->conn, items + start, limit, &d);
        start += limit;
    }
    dd_lane_requeue(lane, items + start, n - start);
}

/* Moves the items of items[0..n) whose route is in external mode to
 * lane->xbatch, in order, and closes the gap: the local ones stay at the
 * head of items, in order. Returns how many moved. */
static size_t dd_lane_split(dd_lane_t *lane, dd_item_t **items, size_t n)
{
    size_t local = 0, x = 0;

    for (size_t i = 0; i < n; i++) {
        if (lane->env->route[items[i]->route].external)
            lane->xbatch[x++] = items[i];
        else
            items[local++] = items[i];
    }
    return x;
}

/* External mode's part of a batch: what it does not take is the lane's
 * again. */
static void dd_lane_process_ext(dd_lane_t *lane, dd_item_t **items, size_t n)
{
    size_t took = dd_lane_ext_process(&lane->ext, items, n);

    dd_lane_requeue(lane, items + took, n - took);
}

static void *dd_lane_main(void *arg)
{
    dd_lane_t *lane = arg;
    dd_lane_env_t *env = lane->env;
    size_t n, x;

    while (!atomic_load(&env->report.fatal) && !atomic_load(&env->stop_hard)) {
        n = dd_lane_collect(lane);
        if (n == 0 && !dd_lane_ext_parked(&lane->ext)) break;
        /* Before any claim, in local or external mode: a key with a row in
         * another shard is dead-lettered here (it fails only on a stop). */
        if (dd_lane_peers_check(&lane->peers, lane->batch, &n) != DD_OK) {
            dd_lane_requeue(lane, lane->batch, n);
            continue;
        }
        x = env->lease ? dd_lane_split(lane, lane->batch, n) : 0;
        if (n > x) dd_lane_process(lane, lane->batch, n - x);
        if (env->lease) dd_lane_process_ext(lane, lane->xbatch, x);
        dd_lane_conn_set_state(&lane->conn, DD_LANE_IDLE);
    }
    dd_lane_requeue_list(lane, dd_lane_ext_unpark(&lane->ext));
    atomic_store(&lane->exited, 1);
    return NULL;
}

/* ---- life cycle ---- */

/* external.in_flight: a call ended on another thread. */
static void dd_lane_wake_cb(void *arg)
{
    dd_lane_t *lane = arg;

    pthread_mutex_lock(&lane->mu);
    pthread_cond_broadcast(&lane->cv);
    pthread_mutex_unlock(&lane->mu);
}

int dd_lane_new(dd_lane_t **lanep, dd_lane_env_t *env, int idx, int shard, char *errstr,
                size_t errstr_size)
{
    size_t cap = (size_t)env->conf->batch.max_messages;
    dd_lane_t *lane = calloc(1, sizeof(*lane));
    int rc;

    *lanep = NULL;
    if (!lane) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    lane->env = env;
    lane->need = cap;
    pthread_mutex_init(&lane->mu, NULL);
    dd_cond_init(&lane->cv);
    dd_lane_conn_init(&lane->conn, env, idx, shard);
    dd_lane_ext_init(&lane->ext, &lane->conn);
    rc = dd_lane_txn_init(&lane->txn, &lane->conn, cap, errstr, errstr_size);
    if (!rc && env->lease && env->conf->external.in_flight > 1)
        rc = dd_lane_ext_open_acts(&lane->ext, env->conf->external.in_flight, dd_lane_wake_cb, lane,
                                   errstr, errstr_size);
    if (!rc) rc = dd_lane_peers_init(&lane->peers, &lane->conn, cap, errstr, errstr_size);
    lane->batch = calloc(cap, sizeof(*lane->batch));
    lane->xbatch = calloc(cap, sizeof(*lane->xbatch));
    if (!rc && (!lane->batch || !lane->xbatch)) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
    }
    if (rc) {
        dd_lane_destroy(lane);
        return rc;
    }
    *lanep = lane;
    return DD_OK;
}

int dd_lane_start(dd_lane_t *lane, char *errstr, size_t errstr_size)
{
    int rc = dd_lane_conn_open(&lane->conn, errstr, errstr_size);

    if (rc) return rc;
    if (pthread_create(&lane->thr, NULL, dd_lane_main, lane) != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot start lane thread");
        return DD_ERR_FATAL;
    }
    lane->started = 1;
    return DD_OK;
}

void dd_lane_wake(dd_lane_t *lane)
{
    if (!lane || !lane->started) return;
    pthread_mutex_lock(&lane->mu);
    pthread_cond_broadcast(&lane->cv);
    pthread_mutex_unlock(&lane->mu);
}

int dd_lane_exited(dd_lane_t *lane)
{
    return !lane || !lane->started || atomic_load(&lane->exited);
}

void dd_lane_stop(dd_lane_t *lane)
{
    if (!lane || !lane->started) return;
    dd_lane_wake(lane);
    pthread_join(lane->thr, NULL);
    lane->started = 0;
}

dd_item_t *dd_lane_unqueue(dd_lane_t *lane)
{
    dd_item_t *list = lane->head;

    lane->head = lane->tail = NULL;
    lane->queued = 0;
    return list;
}

void dd_lane_destroy(dd_lane_t *lane)
{
    if (!lane) return;
    dd_lane_stop(lane);
    dd_item_list_destroy(dd_lane_unqueue(lane), NULL);
    dd_lane_ext_release(&lane->ext);
    dd_lane_conn_release(&lane->conn); /* after the thread ended */
    dd_lane_peers_release(&lane->peers);
    dd_lane_txn_release(&lane->txn);
    free(lane->batch);
    free(lane->xbatch);
    pthread_mutex_destroy(&lane->mu);
    pthread_cond_destroy(&lane->cv);
    free(lane);
}
