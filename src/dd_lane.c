/*
 * One lane of the group (see dd_lanes.h): its queue, its thread, and a
 * batch run to completion, replayed after a retriable database error and
 * committed up to a message whose handler asked to retry, which is retried
 * with backoff. The transaction itself is dd_lane_txn.c.
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
    const dd_conf_t *conf = lane->group->conf;
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
        if (n >= max || atomic_load(&lane->group->stop_hard)) break;
        if (n > 0 &&
            (waited || conf->batch.max_wait_ms == 0 || atomic_load(&lane->group->stop_soft)))
            break;
        if (n == 0 && dd_lane_ext_due(lane)) break; /* a waiting message's turn */
        if (n == 0 && atomic_load(&lane->group->stop_soft) && !lane->parked) break;
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

void dd_lane_set_state(dd_lane_t *lane, dd_lane_state_t state)
{
    if (atomic_load_explicit(&lane->state, memory_order_relaxed) == (int)state) return;
    atomic_store(&lane->state_since_ms, dd_now_ms());
    atomic_store(&lane->state, (int)state);
}

/* ---- the connection ---- */

/* Before the connection goes away: each handler frees its state for it,
 * in the reverse order of their conn_init. */
static void dd_lane_conn_close(dd_lane_t *lane)
{
    const dd_routes_t *routes = lane->group->routes;

    for (int r = routes->cnt; r-- > 0;) {
        if (!lane->hconn_open[r]) continue;
        dd_handler_conn_fini(routes->route[r].h, dd_db_mysql(lane->db), lane->hconn[r]);
        lane->hconn[r] = NULL;
        lane->hconn_open[r] = 0;
    }
    lane->conn_ready = 0;
}

/* Every route's handler's state for the lane's current connection
 * (conn_init, in the routes' order). When one fails, those made are
 * given back. */
static int dd_lane_conn_open(dd_lane_t *lane, char *errstr, size_t errstr_size)
{
    const dd_routes_t *routes = lane->group->routes;
    int rc = DD_OK;

    for (int r = 0; !rc && r < routes->cnt; r++) {
        rc = dd_handler_conn_init(routes->route[r].h, dd_db_mysql(lane->db), &lane->hconn[r],
                                  errstr, errstr_size);
        lane->hconn_open[r] = rc == DD_OK;
    }
    if (rc) dd_lane_conn_close(lane);
    lane->conn_ready = rc == DD_OK;
    return rc;
}

/* ---- retries ---- */

int64_t dd_lane_backoff_ms(dd_lane_t *lane, int attempt)
{
    const dd_conf_t *conf = lane->group->conf;
    int64_t ms = conf->retry.backoff_initial_ms;

    for (int i = 1; i < attempt && ms < conf->retry.backoff_max_ms; i++)
        ms *= 2;
    if (ms > conf->retry.backoff_max_ms) ms = conf->retry.backoff_max_ms;
    /* +-20% jitter so lanes and workers do not retry in lock step */
    return ms * (80 + rand_r(&lane->seed) % 41) / 100;
}

/* The handlers' state for the connection follows it: conn_fini before
 * the old one closes, conn_init on the new one (a lost connection there is
 * one more retriable error). Both executors of the lane (the batch
 * transaction and external mode's steps) reconnect through here, as the
 * connection and every route's state on it are shared. */
int dd_lane_reconnect(dd_lane_t *lane, char *errstr, size_t errstr_size)
{
    int rc;

    if (lane->conn_ready && dd_db_mysql(lane->db) && mysql_ping(dd_db_mysql(lane->db)) == 0)
        return DD_OK;
    atomic_store(&lane->down, 1);
    dd_lane_conn_close(lane);
    rc = dd_db_reconnect(lane->db, errstr, errstr_size);
    if (!rc) rc = dd_lane_conn_open(lane, errstr, errstr_size);
    if (!rc) {
        atomic_store(&lane->down, 0);
        dd_log(DD_LOG_INFO, "Lane %d: reconnected to the database.", lane->idx);
    }
    return rc;
}

/* ---- what a handler sees of a message ---- */

/* How many Kafka headers rkm has (librdkafka parses them on first use). */
size_t dd_lane_header_cnt(rd_kafka_message_t *rkm)
{
    rd_kafka_headers_t *hdrs;

    if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
    return rd_kafka_header_cnt(hdrs);
}

/* Room for n headers in lane->hdrs. */
int dd_lane_headers_reserve(dd_lane_t *lane, size_t n, char *errstr, size_t errstr_size)
{
    dedupd_header *p;

    if (n <= lane->hdr_cap) return DD_OK;
    if (!(p = realloc(lane->hdrs, n * sizeof(*p)))) {
        dd_errstr_set(errstr, errstr_size, "out of memory for %zu message headers", n);
        return DD_ERR_NOMEM;
    }
    lane->hdrs = p;
    lane->hdr_cap = n;
    return DD_OK;
}

/* What the handler sees of an item. Its headers go to lane->hdrs[*at..],
 * reserved by the caller, pointing into librdkafka's copy (no bytes are
 * copied); *at moves past them. */
void dd_lane_msg_fill(dd_lane_t *lane, const dd_item_t *item, size_t *at, dedupd_msg *msg)
{
    rd_kafka_message_t *rkm = item->rkm;
    rd_kafka_headers_t *hdrs;
    size_t n = 0;

    *msg = (dedupd_msg){
        .topic = rd_kafka_topic_name(rkm->rkt),
        .partition = rkm->partition,
        .offset = rkm->offset,
        .timestamp_ms = rd_kafka_message_timestamp(rkm, NULL),
        .key = rkm->key,
        .key_len = rkm->key_len,
        .payload = rkm->payload,
        .payload_len = rkm->len,
        .json = item->json,
        .biz_key = item->key,
        .fence = item->fence,
        .shard = item->shard,
    };
    if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    for (size_t i = 0; *at + n < lane->hdr_cap; i++) {
        dedupd_header *hd = &lane->hdrs[*at + n];
        const void *value;
        if (rd_kafka_header_get_all(hdrs, i, &hd->name, &value, &hd->value_len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        hd->value = value;
        n++;
    }
    msg->headers = n ? &lane->hdrs[*at] : NULL;
    msg->header_cnt = n;
    *at += n;
}

/* Retriable database error: roll back (done), reconnect when the
 * connection is gone, back off. Returns 0 to replay, or a fatal class. */
static int dd_lane_recover(dd_lane_t *lane, int attempt, const char *why)
{
    char err[512];
    int rc;

    dd_log(DD_LOG_WARN, "Lane %d: batch rolled back, will replay it (attempt %d): %s", lane->idx,
           attempt, why);
    dd_lane_set_state(lane, DD_LANE_DB_BACKOFF);
    for (;;) {
        if (dd_sleep_ms(dd_lane_backoff_ms(lane, attempt), &lane->group->stop_hard)) return DD_OK;
        if (!(rc = dd_lane_reconnect(lane, err, sizeof(err)))) return DD_OK;
        if (rc != DD_ERR_RETRIABLE) {
            dd_log(DD_LOG_ERROR, "Lane %d: %s", lane->idx, err);
            return rc;
        }
        dd_log(DD_LOG_WARN, "Lane %d: %s", lane->idx, err);
        attempt++;
    }
}

/* Puts unfinished items back at the head of the queue (shutdown timeout or
 * fatal error), so dd_lanes_stop() hands them to the consumer's thread. */
void dd_lane_requeue(dd_lane_t *lane, dd_item_t **items, size_t n)
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
    dd_lanes_t *group = lane->group;
    dd_item_t *backoff_item = NULL;
    size_t start = 0;
    int db_attempt = 0;
    char err[1024];
    dd_stats_t d;

    /* The consumer hashes as it parses; what it could not hash is tried
     * again here, from the payload (the consumer's document is gone). A
     * request hash fails only for want of memory or on a libcrypto error,
     * never for the input, which parsed already: stop rather than compare a
     * hash that was not computed. */
    for (size_t i = 0; i < n; i++) {
        if (items[i]->hashed) continue;
        if (dd_hash_payload(group->routes->route[items[i]->route].hspec, items[i]->rkm->payload,
                            items[i]->rkm->len, items[i]->hash) != DD_OK) {
            dd_lanes_set_fatal(lane->group, lane->idx,
                               "cannot compute a request hash (out of memory or a "
                               "libcrypto error)");
            dd_lane_requeue(lane, items, n);
            return;
        }
        items[i]->hashed = 1;
    }
    while (start < n && !atomic_load(&group->stop_hard) && !atomic_load(&group->fatal)) {
        size_t limit = n - start;
        long retry_at = -1;
        dd_stats_t carried = {0}; /* events of attempts rolled back for a prefix commit */
        int64_t t0;
        int rc;

        if (items[start] == backoff_item) {
            dd_lane_set_state(lane, DD_LANE_RETRY_BACKOFF);
            if (dd_sleep_ms(dd_lane_backoff_ms(lane, items[start]->attempts), &group->stop_hard))
                break;
        }
        dd_lane_set_state(lane, DD_LANE_IN_DB);
        t0 = dd_now_us();
        for (;;) {
            rc = dd_lane_txn(lane, items + start, limit, &retry_at, &d, err, sizeof(err));
            if (rc || retry_at <= 0) break;
            dd_lane_carry(&carried, &d);
            backoff_item = items[start + (size_t)retry_at];
            limit = (size_t)retry_at; /* commit what came before it */
        }
        dd_lane_carry(&d, &carried);
        if (rc == DD_ERR_RETRIABLE) {
            dd_stats_t e = {.db_errors_retriable = 1};
            e.shard[lane->shard].db_errors_retriable = 1;
            dd_lane_carry(&e, &d); /* what the failed attempt saw still happened */
            dd_lanes_post(lane->group, NULL, 0, &e);
            rc = dd_lane_recover(lane, ++db_attempt, err);
            if (!rc) continue;
        }
        if (rc) {
            dd_lanes_set_fatal(lane->group, lane->idx, err);
            break;
        }
        db_attempt = 0;
        if (retry_at == 0) {
            backoff_item = items[start];
            dd_lanes_post(lane->group, NULL, 0, &d);
            continue;
        }
        dd_stats_observe_batch(&d, (double)(dd_now_us() - t0) / 1e6);
        dd_lanes_post(lane->group, items + start, limit, &d);
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
        if (lane->group->external[items[i]->route])
            lane->xbatch[x++] = items[i];
        else
            items[local++] = items[i];
    }
    return x;
}

static void *dd_lane_main(void *arg)
{
    dd_lane_t *lane = arg;
    size_t n, x;

    while (!atomic_load(&lane->group->fatal) && !atomic_load(&lane->group->stop_hard)) {
        n = dd_lane_collect(lane);
        if (n == 0 && !lane->parked) break;
        /* Before any claim, in local or external mode: a key with a row in
         * another shard is dead-lettered here (it fails only on a stop). */
        if (dd_lane_shard_check(lane, lane->batch, &n) != DD_OK) {
            dd_lane_requeue(lane, lane->batch, n);
            continue;
        }
        x = lane->group->lease ? dd_lane_split(lane, lane->batch, n) : 0;
        if (n > x) dd_lane_process(lane, lane->batch, n - x);
        if (lane->group->lease) dd_lane_ext_process(lane, lane->xbatch, x);
        dd_lane_set_state(lane, DD_LANE_IDLE);
    }
    dd_lane_ext_unpark(lane);
    return NULL;
}

/* Fault injection for the tests: DEDUPD_TEST_FAULTS="commit_lost=N" makes
 * every Nth COMMIT of each lane report a lost connection after it succeeded,
 * so the outcome-unknown path (replay, resolved by the claim) is exercised
 * deterministically. Unset in production; logged loudly when set. */
static unsigned long dd_lane_fault_setting(const char *name)
{
    unsigned long n = dd_test_fault(name);

    if (n)
        dd_log(DD_LOG_WARN,
               "DEDUPD_TEST_FAULTS: every %lu. COMMIT will report a lost "
               "connection after succeeding (test fault injection).",
               n);
    return n;
}

/* ---- life cycle ---- */

int dd_lane_new(dd_lane_t **lanep, dd_lanes_t *group, int idx, char *errstr, size_t errstr_size)
{
    size_t cap = (size_t)group->conf->batch.max_messages;
    dd_lane_t *lane = calloc(1, sizeof(*lane));

    *lanep = NULL;
    if (!lane) goto nomem;
    lane->group = group;
    lane->idx = idx;
    lane->shard = idx / group->workers;
    lane->seed = (unsigned int)(time(NULL) ^ (idx * 7919));
    lane->need = cap;
    lane->cap = cap;
    lane->fault_commit_lost = dd_lane_fault_setting("commit_lost");
    lane->fault_blind = dd_test_fault("precheck_blind") != 0;
    lane->fault_rollback = dd_test_fault("rollback_after_handler") != 0;
    if (lane->fault_rollback && idx == 0) /* on purpose: dedupd handler-test's pass 2 */
        dd_log(DD_LOG_INFO, "Test fault rollback_after_handler: each message's transaction is "
                            "rolled back and run again once after its handler succeeded.");
    if (lane->fault_blind && idx == 0)
        dd_log(DD_LOG_WARN, "DEDUPD_TEST_FAULTS: the claim pre-check finds no keys, so every "
                            "known key races (test fault injection).");
    pthread_mutex_init(&lane->mu, NULL);
    dd_cond_init(&lane->cv);
    lane->batch = calloc(cap, sizeof(*lane->batch));
    lane->xbatch = calloc(cap, sizeof(*lane->xbatch));
    lane->claims = calloc(cap, sizeof(*lane->claims));
    lane->claimv = calloc(cap, sizeof(*lane->claimv));
    lane->claimw = calloc(cap, sizeof(*lane->claimw));
    lane->rows = dd_claim_rows_new();
    lane->found = calloc(cap, sizeof(*lane->found));
    lane->misplaced = calloc(cap, sizeof(*lane->misplaced));
    lane->msgs = calloc(cap, sizeof(*lane->msgs));
    lane->msgv = calloc(cap, sizeof(*lane->msgv));
    lane->results = calloc(cap, sizeof(*lane->results));
    if (!lane->batch || !lane->xbatch || !lane->claims || !lane->claimv || !lane->claimw ||
        !lane->rows || !lane->found || !lane->misplaced || !lane->msgs || !lane->msgv ||
        !lane->results)
        goto nomem;
    *lanep = lane;
    return DD_OK;
nomem:
    dd_lane_destroy(lane);
    dd_errstr_set(errstr, errstr_size, "out of memory");
    return DD_ERR_NOMEM;
}

int dd_lane_start(dd_lane_t *lane, char *errstr, size_t errstr_size)
{
    int rc = dd_db_new_shard(&lane->db, lane->group->conf, lane->shard, errstr, errstr_size);

    if (!rc)
        rc = dd_claim_require(lane->db, &lane->group->copts[lane->group->need_route], errstr,
                              errstr_size);
    if (!rc) rc = dd_lane_conn_open(lane, errstr, errstr_size);
    if (rc) return rc;
    if (pthread_create(&lane->thr, NULL, dd_lane_main, lane) != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot start lane thread");
        return DD_ERR_FATAL;
    }
    lane->started = 1;
    return DD_OK;
}

void dd_lane_stop(dd_lane_t *lane)
{
    if (!lane || !lane->started) return;
    pthread_mutex_lock(&lane->mu);
    pthread_cond_broadcast(&lane->cv);
    pthread_mutex_unlock(&lane->mu);
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
    dd_lane_conn_close(lane); /* after the thread ended, before its connection */
    dd_db_destroy(lane->db);
    dd_lane_shard_close(lane);
    dd_buf_release(&lane->sql);
    free(lane->batch);
    free(lane->xbatch);
    free(lane->claims);
    free(lane->claimv);
    free(lane->claimw);
    dd_claim_rows_destroy(lane->rows);
    free(lane->found);
    free(lane->misplaced);
    free(lane->msgs);
    free(lane->msgv);
    free(lane->results);
    free(lane->hdrs);
    pthread_mutex_destroy(&lane->mu);
    pthread_cond_destroy(&lane->cv);
    free(lane);
}
