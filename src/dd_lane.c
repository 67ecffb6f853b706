/*
 * Lane thread: batches, the claim transaction, handler calls, retries (see
 * dd_lane.h). Everything that talks to the database on the hot path is here.
 */
#include "dd_lane.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_hash.h"
#include "dd_log.h"
#include "dd_utf8.h"

struct dd_lane_s {
    dd_lane_shared_t *sh;
    int idx;
    pthread_t thr;
    int started;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    dd_item_t *head, *tail;
    size_t queued; /* items between head and tail */
    int idle;      /* waiting for the first item of a batch */
    size_t need;   /* queued items that fill the batch being collected */

    dd_db_t *db;
    dd_buf_t sql;
    dd_item_t **batch;
    dd_claim_t *claims;
    dd_claim_t **claimv;
    dd_claim_t **claimw; /* the pre-check's scratch */
    dd_claim_rows_t *rows; /* the finish's scratch */
    int precheck;        /* the last batch found many keys applied: pre-check */
    int fault_blind;     /* DEDUPD_TEST_FAULTS=precheck_blind */
    size_t cap;
    unsigned int seed;
    unsigned long fault_commit_lost; /* DEDUPD_TEST_FAULTS=commit_lost=N: every Nth */
    unsigned long commits;
    dd_item_t *decided; /* REJECT seen without a savepoint (see dd_lane_txn) */
    /* handle_batch() arguments, batch.max_messages each */
    dedupd_msg *msgs;
    const dedupd_msg **msgv;
    dedupd_result *results;
};

#define DD_LANE_TXN_RETRY (-100)     /* internal: a handler asked for RETRY */
#define DD_LANE_TXN_REDO (-101)      /* internal: run again with savepoints */
#define DD_LANE_TXN_UNBATCHED (-102) /* internal: handle_batch declined */

/* How a transaction calls the handler (see dd_lane_txn). */
typedef enum {
    DD_LANE_BATCHED,    /* handle_batch() once for every key the batch owns */
    DD_LANE_OPTIMISTIC, /* handle() per message, no savepoints */
    DD_LANE_SAVEPOINTS, /* handle() per message, each in a savepoint */
} dd_lane_mode_t;

/* ---- batch collection ---- */

/* The lane is woken only when it waits for the first item of a batch, or
 * when the queue holds what fills the batch it is collecting: while it
 * fills a batch it waits for its deadline anyway, and a wake-up per message
 * costs the main thread a system call and the lane a context switch each. */
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

static void dd_lane_deadline(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Takes up to max_messages items, waiting up to max_wait_ms after the first
 * one for the batch to fill. Returns 0 when the lane should exit. */
static size_t dd_lane_collect(dd_lane_t *lane)
{
    const dd_conf_t *conf = lane->sh->conf;
    size_t n = 0, max = (size_t)conf->batch.max_messages;
    struct timespec ts;
    int filling = 0, waited = 0;

    pthread_mutex_lock(&lane->mu);
    for (;;) {
        while (lane->head && n < max) {
            dd_item_t *item = lane->head;
            lane->head = item->next;
            if (!lane->head)
                lane->tail = NULL;
            lane->queued--;
            item->next = NULL;
            lane->batch[n++] = item;
        }
        if (n >= max || lane->sh->stop_hard)
            break;
        if (n > 0 && (waited || conf->batch.max_wait_ms == 0 || lane->sh->stop_soft))
            break;
        if (n == 0 && lane->sh->stop_soft)
            break;
        /* The fill deadline is set once, at the first item: every push
         * signals the lane, and ending the wait at the next push would cut
         * batches down to the arrival rate of single messages. */
        if (!filling && n > 0) {
            dd_lane_deadline(&ts, conf->batch.max_wait_ms);
            filling = 1;
        } else if (!filling) {
            dd_lane_deadline(&ts, 100);
        }
        lane->idle = n == 0;
        lane->need = max - n;
        if (pthread_cond_timedwait(&lane->cv, &lane->mu, &ts) == ETIMEDOUT && n > 0)
            waited = 1;
    }
    lane->idle = 0;
    lane->need = max;
    pthread_mutex_unlock(&lane->mu);
    return n;
}

/* ---- results back to the main thread ---- */

dd_item_t *dd_lane_take_done(dd_lane_shared_t *sh, int wait_ms)
{
    dd_item_t *list;

    pthread_mutex_lock(&sh->mu);
    if (!sh->done_head && !sh->fatal && wait_ms > 0) {
        struct timespec ts;
        dd_lane_deadline(&ts, wait_ms);
        pthread_cond_timedwait(&sh->cv, &sh->mu, &ts);
    }
    list = sh->done_head;
    sh->done_head = sh->done_tail = NULL;
    pthread_mutex_unlock(&sh->mu);
    return list;
}

static void dd_lane_post(dd_lane_t *lane, dd_item_t **items, size_t n, const dd_stats_t *delta)
{
    dd_lane_shared_t *sh = lane->sh;

    pthread_mutex_lock(&sh->mu);
    for (size_t i = 0; i < n; i++) {
        items[i]->next = NULL;
        if (sh->done_tail)
            sh->done_tail->next = items[i];
        else
            sh->done_head = items[i];
        sh->done_tail = items[i];
    }
    sh->stats.applied += delta->applied;
    sh->stats.duplicates += delta->duplicates;
    sh->stats.conflicts += delta->conflicts;
    sh->stats.retries += delta->retries;
    sh->stats.db_errors_retriable += delta->db_errors_retriable;
    sh->stats.batches += delta->batches;
    sh->stats.batched += delta->batched;
    sh->stats.batch_declined += delta->batch_declined;
    sh->stats.claim_races += delta->claim_races;
    sh->stats.batch_seconds_sum += delta->batch_seconds_sum;
    for (int i = 0; i < DD_BATCH_BUCKETS; i++)
        sh->stats.batch_buckets[i] += delta->batch_buckets[i];
    pthread_cond_signal(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

static void dd_lane_set_fatal(dd_lane_t *lane, const char *err)
{
    dd_lane_shared_t *sh = lane->sh;

    pthread_mutex_lock(&sh->mu);
    if (!sh->fatal) {
        snprintf(sh->fatal_err, sizeof(sh->fatal_err), "lane %d: %.1000s", lane->idx, err);
        sh->fatal = 1;
        sh->stats.db_errors_fatal++;
    }
    pthread_cond_signal(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* ---- the transaction ---- */

static int dd_lane_sql(dd_lane_t *lane, const char *sql, char *errstr, size_t errstr_size)
{
    return dd_db_exec(lane->db, sql, strlen(sql), errstr, errstr_size);
}

/* Groups the batch's items by key: one claim per distinct key (the first
 * copy in offset order), claims sorted by key for the lock order. */
static size_t dd_lane_build_claims(dd_lane_t *lane, dd_item_t **items, size_t n)
{
    size_t u = 0;

    for (size_t i = 0; i < n; i++) {
        dd_claim_t *c = &lane->claims[i];
        memset(c, 0, sizeof(*c));
        c->key = items[i]->key;
        c->key_len = items[i]->key_len;
        c->hash = items[i]->hash;
        c->topic = rd_kafka_topic_name(items[i]->rkm->rkt);
        c->partition = items[i]->rkm->partition;
        c->offset = items[i]->rkm->offset;
        c->result_status = -1;
        lane->claimv[i] = c;
    }
    /* claims[i] belongs to items[i]; the sort is stable on the index so the
     * first copy of a key leads its group. */
    dd_claim_sort(lane->claimv, n);
    for (size_t i = 0; i < n; i++) {
        dd_claim_t *c = lane->claimv[i];
        if (u > 0 && dd_claim_cmp(lane->claimv[u - 1], c) == 0) {
            items[c - lane->claims]->claim = lane->claimv[u - 1];
            continue;
        }
        lane->claimv[u++] = c;
        items[c - lane->claims]->claim = c;
    }
    return u;
}

static void dd_lane_dlq(dd_item_t *item, dd_reason_t reason, const char *fmt, const char *arg)
{
    item->outcome = DD_OUT_DLQ;
    item->reason = reason;
    snprintf(item->error, sizeof(item->error), fmt, arg);
}

/* A copy of a key that this batch does not run the handler for. */
static int dd_lane_judge_copy(dd_lane_t *lane, dd_item_t *item, int first, dd_stats_t *d)
{
    dd_claim_t *c = item->claim;

    if (!first && c->mine) {
        /* A repeat of a key this batch owns: compare with its first copy. */
        if (memcmp(item->hash, c->hash, DD_HASH_LEN) != 0) {
            d->conflicts++;
            dd_lane_dlq(item, DD_REASON_CONFLICT, "%s",
                        "same business key as an earlier message, other content");
        } else if (c->result_status == DD_ROW_FAILED) {
            dd_lane_dlq(item, DD_REASON_REJECTED, "copy of a rejected message: %.200s",
                        c->error ? c->error : "");
        } else {
            item->outcome = DD_OUT_DUPLICATE;
            d->duplicates++;
        }
        return DD_OK;
    }
    /* Otherwise the stored row decides: the hash is checked on every path. */
    if (memcmp(item->hash, c->row_hash, DD_HASH_LEN) != 0) {
        d->conflicts++;
        dd_lane_dlq(item, DD_REASON_CONFLICT, "%s",
                    "business key already recorded with other content");
    } else if (c->row_status == DD_ROW_APPLIED) {
        item->outcome = DD_OUT_DUPLICATE;
        d->duplicates++;
    } else if (c->row_status == DD_ROW_FAILED) {
        /* retry_failed is off: this copy is not retried, but never dropped. */
        dd_lane_dlq(item, DD_REASON_REJECTED, "previously rejected: %.200s", c->row_error);
    } else {
        /* Processing under someone's unexpired lease: try the batch later. */
        return DD_ERR_RETRIABLE;
    }
    return DD_OK;
}

/* What the handler sees of an item. */
static void dd_lane_msg_fill(const dd_item_t *item, dedupd_msg *msg)
{
    const rd_kafka_message_t *rkm = item->rkm;

    *msg = (dedupd_msg){
        .topic = item->claim->topic,
        .partition = rkm->partition,
        .offset = rkm->offset,
        .timestamp_ms = rd_kafka_message_timestamp(rkm, NULL),
        .key = rkm->key,
        .key_len = rkm->key_len,
        .payload = rkm->payload,
        .payload_len = rkm->len,
        .json = item->json,
        .biz_key = item->key,
    };
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
}

/* DD_ERR_RETRIABLE (with errstr) when the handler's last statement failed
 * with a retriable error: deadlock, lock wait timeout or lost connection. A
 * deadlock already rolled back the whole transaction (savepoints too), so
 * the caller replays the batch rather than the message. Else 0. */
static int dd_lane_handler_db_error(dd_lane_t *lane, char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(lane->db);
    unsigned int err = mysql_errno(mysql);

    if (!err || dd_db_classify(err) != DD_ERR_RETRIABLE)
        return 0;
    dd_errstr_set(errstr, errstr_size, "%u: %s (inside the handler)", err, mysql_error(mysql));
    return DD_ERR_RETRIABLE;
}

/* A handler call left the connection outside the transaction: a deadlock
 * rolled it back (retriable), or the handler ended it (a bug: fatal). */
static int dd_lane_broken(dd_lane_t *lane, const dd_item_t *item, char *errstr,
                          size_t errstr_size)
{
    if (dd_lane_handler_db_error(lane, errstr, errstr_size))
        return DD_ERR_RETRIABLE;
    dd_errstr_set(errstr, errstr_size,
                  "handler %s (%s) ended the transaction (COMMIT, ROLLBACK or autocommit) "
                  "at %s [%d] @%lld: this is a handler bug",
                  dd_handler_name(lane->sh->h), dd_handler_path(lane->sh->h), item->claim->topic,
                  (int)item->rkm->partition, (long long)item->rkm->offset);
    return DD_ERR_FATAL;
}

/* The handler ended dedupd's transaction and began another while handling
 * item: the savepoint of the message is gone (see dd_handler.h). */
static int dd_lane_lost(dd_lane_t *lane, const dd_item_t *item, char *errstr, size_t errstr_size)
{
    char where[300];

    snprintf(where, sizeof(where), "at %s [%d] @%lld", item->claim->topic,
             (int)item->rkm->partition, (long long)item->rkm->offset);
    return dd_handler_txn_lost_error(lane->sh->h, where, errstr, errstr_size);
}

/* Ends the transaction over items[0..n): COMMIT or ROLLBACK, after checking
 * that the transaction is still the one dedupd began (dd_handler_txn_end). */
static int dd_lane_end(dd_lane_t *lane, dd_item_t *const *items, size_t n, int commit, char *errstr,
                       size_t errstr_size)
{
    const rd_kafka_message_t *rkm = items[0]->rkm;
    char where[300];

    snprintf(where, sizeof(where), "in a batch of %zu message(s) starting at %s [%d] @%lld", n,
             rd_kafka_topic_name(rkm->rkt), (int)rkm->partition, (long long)rkm->offset);
    return dd_handler_txn_end(lane->sh->h, dd_db_mysql(lane->db), commit, where, errstr,
                              errstr_size);
}

/* safe: take a savepoint first, so REJECT can roll back just this message.
 * Without one, a REJECT (or RETRY out of attempts) returns TXN_REDO with the
 * decision recorded in lane->decided. */
static int dd_lane_run_handler(dd_lane_t *lane, dd_item_t *item, int safe, dd_stats_t *d,
                               char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = lane->sh->conf;
    MYSQL *mysql = dd_db_mysql(lane->db);
    rd_kafka_message_t *rkm = item->rkm;
    dd_claim_t *c = item->claim;
    dedupd_result res;
    dedupd_msg msg;
    int broken = 0, rc;
    dedupd_status st;

    rc = safe ? dd_lane_sql(lane, "SAVEPOINT dd_msg", errstr, errstr_size) : DD_OK;
    if (rc)
        return rc;
    dd_lane_msg_fill(item, &msg);
    st = dd_handler_handle(lane->sh->h, mysql, &msg, &res, &broken);
    if (broken) {
        free(res.response);
        return dd_lane_broken(lane, item, errstr, errstr_size);
    }
    if (st == DEDUPD_OK) {
        dd_lane_applied(item, res.response, d);
        return DD_OK;
    }
    free(res.response);
    if (dd_lane_handler_db_error(lane, errstr, errstr_size))
        return DD_ERR_RETRIABLE;
    rc = safe ? dd_lane_sql(lane, "ROLLBACK TO SAVEPOINT dd_msg", errstr, errstr_size) : DD_OK;
    if (rc && dd_handler_txn_lost(mysql))
        return dd_lane_lost(lane, item, errstr, errstr_size);
    if (rc)
        return rc;
    if (st == DEDUPD_RETRY) {
        item->attempts++;
        d->retries++;
        dd_log_msg(DD_LOG_INFO, c->topic, rkm->partition, rkm->offset, item->key,
                   "Handler asked to retry (attempt %d): %s", item->attempts, res.error);
        if (conf->retry.max_attempts == 0 || item->attempts < conf->retry.max_attempts)
            return DD_LANE_TXN_RETRY;
        dd_lane_dlq(item, DD_REASON_RETRIES_EXHAUSTED, "gave up after retries: %.200s", res.error);
    } else {
        dd_lane_dlq(item, DD_REASON_REJECTED, "%s", res.error);
    }
    dd_log_msg(DD_LOG_INFO, c->topic, rkm->partition, rkm->offset, item->key,
               "Message %s: %s", dd_reason2str(item->reason), item->error);
    if (!safe) {
        lane->decided = item; /* not called again: the redo only records it */
        return DD_LANE_TXN_REDO;
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
static int dd_lane_owns(const dd_lane_t *lane, dd_item_t *const *items, size_t i)
{
    return items[i]->claim == &lane->claims[i] && items[i]->claim->mine;
}

/* DD_LANE_BATCHED: one handle_batch() call for the first copy of every key
 * this transaction owns. Returns DD_LANE_TXN_UNBATCHED when the handler
 * declined (the caller rolls back and goes message by message). */
static int dd_lane_run_batch(dd_lane_t *lane, dd_item_t **items, size_t n, dd_stats_t *d,
                             char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(lane->db);
    size_t m = 0, k = 0;
    int broken = 0;
    dedupd_status st;

    for (size_t i = 0; i < n; i++) {
        if (!dd_lane_owns(lane, items, i))
            continue;
        dd_lane_msg_fill(items[i], &lane->msgs[m]);
        lane->msgv[m] = &lane->msgs[m];
        m++;
    }
    if (m == 0)
        return DD_OK;
    st = dd_handler_handle_batch(lane->sh->h, mysql, lane->msgv, m, lane->results, &broken);
    if (broken) {
        for (size_t j = 0; j < m; j++)
            free(lane->results[j].response);
        return dd_lane_broken(lane, items[0], errstr, errstr_size);
    }
    if (st != DEDUPD_OK) {
        if (dd_lane_handler_db_error(lane, errstr, errstr_size))
            return DD_ERR_RETRIABLE; /* replay the batch, as one batch again */
        dd_log(DD_LOG_DEBUG, "Lane %d: handler %s declined a batch of %zu, going message by "
               "message: %s", lane->idx, dd_handler_name(lane->sh->h), m,
               lane->results[0].error[0] ? lane->results[0].error : "no reason given");
        return DD_LANE_TXN_UNBATCHED;
    }
    for (size_t i = 0; i < n; i++)
        if (dd_lane_owns(lane, items, i))
            dd_lane_applied(items[i], lane->results[k++].response, d);
    d->batched += m;
    return DD_OK;
}

/* Pre-check the next batch when at least 1 in 8 keys of this one were
 * already applied: a replay or a stream with many redeliveries. */
static void dd_lane_tune_precheck(dd_lane_t *lane, size_t u)
{
    size_t applied = 0;

    for (size_t i = 0; i < u; i++)
        applied += !lane->claimv[i]->mine && lane->claimv[i]->row_status == DD_ROW_APPLIED;
    lane->precheck = applied * 8 >= u && applied > 0;
}

/* Rolls back the transaction over items[0..n) that ended with rc. When
 * dedupd rolls back on purpose after the handler ran (a RETRY, a REJECT
 * without a savepoint, a declined batch, a claim race), the handler may
 * still have committed part of it on its own, so the guard is checked as
 * on COMMIT. After an error (a deadlock drops the savepoint, a lost
 * connection everything) it is not. Returns rc, or DD_ERR_FATAL. */
static int dd_lane_rollback(dd_lane_t *lane, dd_item_t *const *items, size_t n, int rc,
                            char *errstr, size_t errstr_size)
{
    char err[1024];
    int erc;

    if (rc != DD_OK && rc != DD_LANE_TXN_REDO && rc != DD_LANE_TXN_UNBATCHED &&
        rc != DD_CLAIM_RACED) {
        dd_db_rollback_quiet(lane->db);
        return rc;
    }
    erc = dd_lane_end(lane, items, n, 0, err, sizeof(err));
    if (erc == DD_OK)
        return rc;
    dd_db_rollback_quiet(lane->db); /* the release failed: nothing ran after it */
    if (erc != DD_ERR_FATAL)
        return rc; /* a lost connection: the next attempt meets it */
    dd_errstr_set(errstr, errstr_size, "%s", err);
    return DD_ERR_FATAL;
}

/* One attempt at one transaction over items[0..n) (see dd_lane_txn).
 * locking: claim every key first, deferring none (replaying a race). */
static int dd_lane_txn_once(dd_lane_t *lane, dd_item_t **items, size_t n, dd_lane_mode_t mode,
                            int locking, long *retry_at, dd_stats_t *d, char *errstr,
                            size_t errstr_size)
{
    unsigned char token[DD_CLAIM_TOKEN_LEN];
    size_t u, mine = 0;
    int flags = lane->precheck ? DD_CLAIM_PRECHECK : 0;
    int rc;

    *retry_at = -1;
    memset(d, 0, sizeof(*d));
    for (size_t i = 0; i < n; i++) {
        items[i]->outcome = DD_OUT_NONE;
        items[i]->response = NULL;
    }
    u = dd_lane_build_claims(lane, items, n);
    if (RAND_bytes(token, sizeof(token)) != 1) {
        dd_errstr_set(errstr, errstr_size, "no random bytes for the claim token");
        return DD_ERR_FATAL;
    }
    if (lane->sh->copts.defer && !locking)
        flags |= DD_CLAIM_DEFER;
    if (lane->fault_blind)
        flags |= DD_CLAIM_BLIND;
    rc = dd_handler_txn_begin(dd_db_mysql(lane->db), errstr, errstr_size);
    if (!rc)
        rc = dd_claim_acquire(lane->db, &lane->sh->copts, lane->claimv, u, token, flags,
                              lane->claimw, &lane->sql, errstr, errstr_size);
    if (!rc && !(flags & DD_CLAIM_DEFER)) /* deferring pre-checks every batch */
        dd_lane_tune_precheck(lane, u);
    if (!rc && mode == DD_LANE_BATCHED)
        rc = dd_lane_run_batch(lane, items, n, d, errstr, errstr_size);
    for (size_t i = 0; !rc && i < n; i++) {
        dd_item_t *item = items[i];
        int first = item->claim == &lane->claims[i];
        if (first && item->claim->mine && mode == DD_LANE_BATCHED)
            continue; /* applied by dd_lane_run_batch */
        if (first && item->claim->mine && item == lane->decided)
            dd_lane_record_decided(item);
        else if (first && item->claim->mine)
            rc = dd_lane_run_handler(lane, item, mode == DD_LANE_SAVEPOINTS, d, errstr,
                                     errstr_size);
        else
            rc = dd_lane_judge_copy(lane, item, first, d);
        if (rc == DD_LANE_TXN_RETRY) {
            *retry_at = (long)i;
            rc = DD_OK;
            goto rollback;
        }
    }
    /* Outcomes of the keys this batch owns, in key order, one statement. */
    for (size_t i = 0; !rc && i < u; i++)
        if (lane->claimv[i]->mine && lane->claimv[i]->result_status >= 0)
            lane->claimv[mine++] = lane->claimv[i];
    if (!rc && mine)
        rc = dd_claim_finish(lane->db, &lane->sh->copts, lane->claimv, mine, &lane->sql,
                             lane->rows, errstr, errstr_size);
    if (!rc)
        rc = dd_lane_end(lane, items, n, 1, errstr, errstr_size);
    if (!rc && lane->fault_commit_lost && ++lane->commits % lane->fault_commit_lost == 0) {
        /* Test-only fault: the COMMIT went through but its reply is "lost",
         * exactly what a dropped connection during COMMIT looks like. */
        dd_errstr_set(errstr, errstr_size, "2013: Lost connection to server during COMMIT "
                                           "(injected by DEDUPD_TEST_FAULTS)");
        rc = DD_ERR_RETRIABLE;
    }
    if (!rc) {
        dd_lane_free_responses(items, n);
        d->batches = 1;
        return DD_OK;
    }
rollback:
    rc = dd_lane_rollback(lane, items, n, rc, errstr, errstr_size);
    dd_lane_free_responses(items, n);
    return rc;
}

/* One transaction over items[0..n). Sets *retry_at to the index of a message
 * whose handler asked for RETRY (everything rolled back) or -1. Returns 0 or
 * a dd_err_t class.
 *
 * The cheapest way that gives the right result is tried first:
 *  1. a handler with handle_batch() gets every owned message in one call;
 *     if it declines, all is rolled back and it goes on with 2;
 *  2. handle() per message without savepoints (they cost a round trip per
 *     message and are only needed when a message fails);
 *  3. when a handler REJECTs (or runs out of RETRY attempts) in 2, the
 *     whole transaction is rolled back and run again with a savepoint per
 *     message, that message's failure recorded without calling its handler
 *     again.
 * The committed result is what 3 alone gives; handlers are called again only
 * for messages whose effects were rolled back, as on a deadlock replay. */
static int dd_lane_txn_modes(dd_lane_t *lane, dd_item_t **items, size_t n, int locking,
                             long *retry_at, dd_stats_t *d, char *errstr, size_t errstr_size)
{
    int batched = lane->sh->conf->handler.batch && dd_handler_has_batch(lane->sh->h);
    int rc = DD_LANE_TXN_UNBATCHED, declined = 0;
    uint64_t retries;

    lane->decided = NULL;
    if (batched)
        rc = dd_lane_txn_once(lane, items, n, DD_LANE_BATCHED, locking, retry_at, d, errstr,
                              errstr_size);
    if (rc == DD_LANE_TXN_UNBATCHED) {
        declined = batched;
        rc = dd_lane_txn_once(lane, items, n, DD_LANE_OPTIMISTIC, locking, retry_at, d, errstr,
                              errstr_size);
    }
    if (rc == DD_LANE_TXN_REDO) {
        retries = d->retries; /* counted for the decided message */
        rc = dd_lane_txn_once(lane, items, n, DD_LANE_SAVEPOINTS, locking, retry_at, d, errstr,
                              errstr_size);
        d->retries += retries;
        lane->decided = NULL;
    }
    d->batch_declined += (uint64_t)declined;
    return rc;
}

/* One transaction over items[0..n), as dd_lane_txn_modes. When a deferred
 * claim raced another consumer, everything was rolled back: the batch runs
 * again with every key claimed first, so it waits for that consumer's
 * commit and then finds its row. */
static int dd_lane_txn(dd_lane_t *lane, dd_item_t **items, size_t n, long *retry_at,
                       dd_stats_t *d, char *errstr, size_t errstr_size)
{
    int rc;

    rc = dd_lane_txn_modes(lane, items, n, 0, retry_at, d, errstr, errstr_size);
    if (rc == DD_CLAIM_RACED) {
        dd_log(DD_LOG_INFO, "Lane %d: another consumer claimed a key of this batch meanwhile; "
               "rolled back, running it again with the locking claim.", lane->idx);
        rc = dd_lane_txn_modes(lane, items, n, 1, retry_at, d, errstr, errstr_size);
        d->claim_races++;
    }
    return rc;
}

/* ---- retries ---- */

static int64_t dd_lane_backoff_ms(dd_lane_t *lane, int attempt)
{
    const dd_conf_t *conf = lane->sh->conf;
    int64_t ms = conf->retry.backoff_initial_ms;

    for (int i = 1; i < attempt && ms < conf->retry.backoff_max_ms; i++)
        ms *= 2;
    if (ms > conf->retry.backoff_max_ms)
        ms = conf->retry.backoff_max_ms;
    /* +-20% jitter so lanes and workers do not retry in lock step */
    return ms * (80 + rand_r(&lane->seed) % 41) / 100;
}

/* Retriable database error: roll back (done), reconnect when the
 * connection is gone, back off. Returns 0 to replay, or a fatal class. */
static int dd_lane_recover(dd_lane_t *lane, int attempt, const char *why)
{
    char err[512];
    int rc;

    dd_log(DD_LOG_WARN, "Lane %d: batch rolled back, will replay it (attempt %d): %s", lane->idx,
           attempt, why);
    for (;;) {
        if (dd_sleep_ms(dd_lane_backoff_ms(lane, attempt), &lane->sh->stop_hard))
            return DD_OK;
        if (dd_db_mysql(lane->db) && mysql_ping(dd_db_mysql(lane->db)) == 0)
            return DD_OK;
        rc = dd_db_reconnect(lane->db, err, sizeof(err));
        if (!rc) {
            dd_log(DD_LOG_INFO, "Lane %d: reconnected to the database.", lane->idx);
            return DD_OK;
        }
        if (rc != DD_ERR_RETRIABLE) {
            dd_log(DD_LOG_ERROR, "Lane %d: %s", lane->idx, err);
            return rc;
        }
        dd_log(DD_LOG_WARN, "Lane %d: %s", lane->idx, err);
        attempt++;
    }
}

/* Puts unfinished items back at the head of the queue (shutdown timeout or
 * fatal error), so dd_lane_join() hands them to the main thread to free. */
static void dd_lane_requeue(dd_lane_t *lane, dd_item_t **items, size_t n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&lane->mu);
    for (size_t i = n; i-- > 0;) {
        items[i]->next = lane->head;
        lane->head = items[i];
        if (!lane->tail)
            lane->tail = items[i];
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
}

/* Runs a whole batch to completion: replays on database errors, commits
 * the part before a RETRY message and retries from it with backoff. */
static void dd_lane_process(dd_lane_t *lane, dd_item_t **items, size_t n)
{
    dd_lane_shared_t *sh = lane->sh;
    dd_item_t *backoff_item = NULL;
    size_t start = 0;
    int db_attempt = 0;
    char err[1024];
    dd_stats_t d;

    /* The main thread hashes as it parses; what it could not hash is tried
     * again here, from the payload (the main thread's document is gone). A
     * request hash fails only for want of memory or on a libcrypto error,
     * never for the input, which parsed already: stop rather than compare a
     * hash that was not computed. */
    for (size_t i = 0; i < n; i++) {
        if (items[i]->hashed)
            continue;
        if (dd_hash_payload(sh->hspec, items[i]->rkm->payload, items[i]->rkm->len,
                            items[i]->hash) != DD_OK) {
            dd_lane_set_fatal(lane, "cannot compute a request hash (out of memory or a "
                                    "libcrypto error)");
            dd_lane_requeue(lane, items, n);
            return;
        }
        items[i]->hashed = 1;
    }
    while (start < n && !sh->stop_hard && !sh->fatal) {
        size_t limit = n - start;
        long retry_at = -1;
        dd_stats_t carried = {0}; /* events of attempts rolled back for a prefix commit */
        int64_t t0;
        int rc;

        if (items[start] == backoff_item &&
            dd_sleep_ms(dd_lane_backoff_ms(lane, items[start]->attempts), &sh->stop_hard))
            break;
        t0 = dd_now_us();
        for (;;) {
            rc = dd_lane_txn(lane, items + start, limit, &retry_at, &d, err, sizeof(err));
            if (rc || retry_at <= 0)
                break;
            dd_lane_carry(&carried, &d);
            backoff_item = items[start + (size_t)retry_at];
            limit = (size_t)retry_at; /* commit what came before it */
        }
        dd_lane_carry(&d, &carried);
        if (rc == DD_ERR_RETRIABLE) {
            dd_stats_t e = {.db_errors_retriable = 1};
            dd_lane_carry(&e, &d); /* what the failed attempt saw still happened */
            dd_lane_post(lane, NULL, 0, &e);
            rc = dd_lane_recover(lane, ++db_attempt, err);
            if (!rc)
                continue;
        }
        if (rc) {
            dd_lane_set_fatal(lane, err);
            break;
        }
        db_attempt = 0;
        if (retry_at == 0) {
            backoff_item = items[start];
            dd_lane_post(lane, NULL, 0, &d);
            continue;
        }
        dd_stats_observe_batch(&d, (double)(dd_now_us() - t0) / 1e6);
        dd_lane_post(lane, items + start, limit, &d);
        start += limit;
    }
    dd_lane_requeue(lane, items + start, n - start);
}

static void *dd_lane_main(void *arg)
{
    dd_lane_t *lane = arg;
    size_t n;

    while (!lane->sh->fatal && !lane->sh->stop_hard && (n = dd_lane_collect(lane)) > 0)
        dd_lane_process(lane, lane->batch, n);
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
        dd_log(DD_LOG_WARN, "DEDUPD_TEST_FAULTS: every %lu. COMMIT will report a lost "
               "connection after succeeding (test fault injection).", n);
    return n;
}

int dd_lane_start(dd_lane_t **lanep, dd_lane_shared_t *sh, int idx, char *errstr,
                  size_t errstr_size)
{
    size_t cap = (size_t)sh->conf->batch.max_messages;
    dd_lane_t *lane = calloc(1, sizeof(*lane));
    int rc;

    *lanep = NULL;
    if (!lane)
        return DD_ERR_NOMEM;
    lane->sh = sh;
    lane->idx = idx;
    lane->seed = (unsigned int)(time(NULL) ^ (idx * 7919));
    lane->need = cap;
    lane->fault_commit_lost = dd_lane_fault_setting("commit_lost");
    lane->fault_blind = dd_test_fault("precheck_blind") != 0;
    if (lane->fault_blind && idx == 0)
        dd_log(DD_LOG_WARN, "DEDUPD_TEST_FAULTS: the claim pre-check finds no keys, so every "
               "known key races (test fault injection).");
    pthread_mutex_init(&lane->mu, NULL);
    pthread_cond_init(&lane->cv, NULL);
    lane->batch = calloc(cap, sizeof(*lane->batch));
    lane->claims = calloc(cap, sizeof(*lane->claims));
    lane->claimv = calloc(cap, sizeof(*lane->claimv));
    lane->claimw = calloc(cap, sizeof(*lane->claimw));
    lane->rows = dd_claim_rows_new();
    lane->msgs = calloc(cap, sizeof(*lane->msgs));
    lane->msgv = calloc(cap, sizeof(*lane->msgv));
    lane->results = calloc(cap, sizeof(*lane->results));
    lane->cap = cap;
    if (!lane->batch || !lane->claims || !lane->claimv || !lane->claimw || !lane->rows ||
        !lane->msgs || !lane->msgv || !lane->results) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        rc = DD_ERR_NOMEM;
        goto fail;
    }
    rc = dd_db_open(&lane->db, sh->conf, errstr, errstr_size);
    if (!rc) rc = dd_claim_require(lane->db, &sh->copts, errstr, errstr_size);
    if (rc)
        goto fail;
    if (pthread_create(&lane->thr, NULL, dd_lane_main, lane) != 0) {
        dd_errstr_set(errstr, errstr_size, "cannot start lane thread");
        rc = DD_ERR_FATAL;
        goto fail;
    }
    lane->started = 1;
    *lanep = lane;
    return DD_OK;
fail:
    dd_lane_join(lane, NULL);
    return rc;
}

void dd_lane_join(dd_lane_t *lane, dd_item_t **leftover)
{
    if (!lane)
        return;
    if (lane->started) {
        pthread_mutex_lock(&lane->mu);
        pthread_cond_broadcast(&lane->cv);
        pthread_mutex_unlock(&lane->mu);
        pthread_join(lane->thr, NULL);
    }
    if (leftover) {
        /* Abandoned work (shutdown timeout): the caller frees it. */
        dd_item_t *tail = lane->head;
        while (tail && tail->next)
            tail = tail->next;
        if (tail) {
            tail->next = *leftover;
            *leftover = lane->head;
        }
    }
    lane->head = lane->tail = NULL;
    lane->queued = 0;
    dd_db_close(lane->db);
    dd_buf_release(&lane->sql);
    free(lane->batch);
    free(lane->claims);
    free(lane->claimv);
    free(lane->claimw);
    dd_claim_rows_free(lane->rows);
    free(lane->msgs);
    free(lane->msgv);
    free(lane->results);
    pthread_mutex_destroy(&lane->mu);
    pthread_cond_destroy(&lane->cv);
    free(lane);
}
