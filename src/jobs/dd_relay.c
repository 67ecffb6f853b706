/*
 * The outbox relay (see dd_relay.h): a thread per shard turning rounds.
 * One round: make sure of the connection, the producer and the shard's
 * lock; while fewer than outbox.inflight batches are on their way, read
 * the next pending events (ids above the last one read, paused topics left
 * out) and produce them; then wait for every delivery report of the oldest
 * batch, delete its acknowledged events, park the refused ones and pause
 * the topics whose events failed for now. The idempotent producer keeps
 * each partition's order across the batches in flight, so per key the
 * events reach Kafka in id order.
 *
 * Each read takes the lowest pending ids that are not in flight, in one
 * statement: an event committed with a lower id than one already read
 * (two lanes' transactions committing out of id order) comes in the next
 * read, and because a key's events commit one after the other, that read
 * sees every earlier event of the key that is not yet sent, before the
 * later ones. A batch that ends short (the outbox is caught up), a failure
 * or a pause makes the relay drain: it reads nothing more until every
 * batch in flight is settled. So an event taken back (it stays in the
 * table) is sent again before any later event of its topic is read.
 *
 * The relay holds no transaction: each statement autocommits, and the
 * reads see what committed (READ COMMITTED).
 */
#include "dd_relay.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "dd_buf.h"
#include "dd_common.h"
#include "dd_db.h"
#include "dd_dlq.h"
#include "dd_log.h"
#include "dd_outbox.h"

#define DD_RELAY_STATUS_MS 1000 /* the status is refreshed this often */
#define DD_RELAY_LOCK_WAIT_MS 1000
#define DD_RELAY_LOCK_PREFIX "dedupd_outbox_relay:" /* + 40 hex digits: 60 characters */
#define DD_RELAY_PAUSE_MAX 32                       /* topics paused at once, at most */
#define DD_RELAY_STOP_WAIT_MS 5000
#define DD_RELAY_RUNS_MAX 64 /* ranges of ids in flight left out of a read, at most */

typedef struct dd_relay_batch_s dd_relay_batch_t;

typedef struct {
    uint64_t id;
    char topic[256];
    rd_kafka_resp_err_t err;
    int done; /* its delivery report came */
    dd_relay_batch_t *b;
} dd_relay_ev_t;

/* A batch read and produced: outbox.batch entries. */
struct dd_relay_batch_s {
    dd_relay_ev_t *ev;
    size_t n, pending; /* events in it; reports still to come */
    int64_t sent_ms;   /* when it was produced */
};

typedef struct {
    char topic[256];
    int64_t until_ms;
    int pause_ms;
} dd_relay_pause_t;

typedef struct {
    dd_relay_t *relay;
    int idx;
    pthread_t thread;
    int started;
    dd_db_t *db;
    rd_kafka_t *rk;
    int leader;          /* holds the shard's lock on this connection */
    dd_relay_batch_t *b; /* outbox.inflight batches, a ring */
    uint64_t *ids;       /* room for the ids of every batch in flight */
    int head, cnt;       /* the oldest batch in flight; batches in flight */
    int drain;           /* read nothing more until cnt is 0 */
    int timed_out;       /* unsent events were taken back (until the drain ends) */
    int64_t stop_at;     /* at stop: when the reports are no longer waited for */
    dd_relay_pause_t pause[DD_RELAY_PAUSE_MAX];
    int pause_cnt;
    dd_buf_t sql;
    int64_t status_ms; /* when the status was last refreshed */
    char logged[240];  /* the state last logged */
    /* under relay->mu */
    int64_t backlog, parked;
    double oldest_s;
    uint64_t sent, refused, failed;
    char state[240];
} dd_relay_shard_t;

struct dd_relay_s {
    const dd_conf_t *conf;
    dd_relay_status_fn *status;
    void *opaque;
    dd_relay_shard_t *shard;
    int cnt;
    pthread_mutex_t mu;
    atomic_int stop;
};

/* ---- status ---- */

/* Sets the shard's state ("" when publishing) and logs a change. */
static void dd_relay_state(dd_relay_shard_t *sh, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void dd_relay_state(dd_relay_shard_t *sh, const char *fmt, ...)
{
    char text[240];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&sh->relay->mu);
    snprintf(sh->state, sizeof(sh->state), "%s", text);
    pthread_mutex_unlock(&sh->relay->mu);
    if (strcmp(text, sh->logged) == 0) return;
    if (text[0])
        dd_log(DD_LOG_WARN, "Outbox relay of shard %d: %s", sh->idx, text);
    else if (sh->logged[0])
        dd_log(DD_LOG_INFO, "Outbox relay of shard %d: publishing again.", sh->idx);
    snprintf(sh->logged, sizeof(sh->logged), "%s", text);
}

void dd_relay_stats(dd_relay_t *relay, dd_outbox_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    out->on = 1;
    out->shards = relay->cnt;
    pthread_mutex_lock(&relay->mu);
    for (int s = 0; s < relay->cnt; s++) {
        const dd_relay_shard_t *sh = &relay->shard[s];
        out->leading += sh->leader;
        out->backlog = sh->backlog < 0 || out->backlog < 0 ? -1 : out->backlog + sh->backlog;
        out->parked += sh->parked > 0 ? sh->parked : 0;
        if (sh->oldest_s > out->oldest_s) out->oldest_s = sh->oldest_s;
        out->sent += sh->sent;
        out->refused += sh->refused;
        out->failed += sh->failed;
        if (!out->state[0] && sh->state[0])
            snprintf(out->state, sizeof(out->state), "shard %d: %.200s", s, sh->state);
    }
    pthread_mutex_unlock(&relay->mu);
}

/* One row of numbers from a query; 0 or the error's class. */
static int dd_relay_query_nums(dd_relay_shard_t *sh, const char *sql, double *v, int n,
                               char *errstr, size_t errstr_size)
{
    MYSQL *my = dd_db_mysql(sh->db);
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mysql_real_query(my, sql, (unsigned long)strlen(sql)) != 0 ||
        !(res = mysql_store_result(my))) {
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(my), mysql_error(my));
        return mysql_errno(my) ? dd_db_classify(mysql_errno(my)) : DD_ERR_RETRIABLE;
    }
    row = mysql_fetch_row(res);
    for (int i = 0; i < n; i++)
        v[i] = row && row[i] ? strtod(row[i], NULL) : 0;
    mysql_free_result(res);
    return DD_OK;
}

/* The backlog, the parked events and the oldest pending one's age, once
 * every DD_RELAY_STATUS_MS; then the status goes to the callback. */
static int dd_relay_refresh(dd_relay_shard_t *sh, char *errstr, size_t errstr_size)
{
    dd_relay_t *relay = sh->relay;
    dd_outbox_stats_t st;
    dd_outbox_count_t c;
    int rc;

    if (dd_now_ms() - sh->status_ms < DD_RELAY_STATUS_MS) return DD_OK;
    sh->status_ms = dd_now_ms();
    if ((rc = dd_outbox_count(dd_db_mysql(sh->db), &c, errstr, errstr_size))) return rc;
    pthread_mutex_lock(&relay->mu);
    sh->backlog = c.pending;
    sh->parked = c.parked;
    sh->oldest_s = c.oldest_s;
    pthread_mutex_unlock(&relay->mu);
    if (relay->status) {
        dd_relay_stats(relay, &st);
        relay->status(relay->opaque, &st);
    }
    return DD_OK;
}

/* ---- the connection, the producer, the lock ---- */

static void dd_relay_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    dd_relay_ev_t *ev = rkm->_private;

    (void)rk;
    (void)opaque;
    if (!ev || ev->done) return;
    ev->err = rkm->err;
    ev->done = 1;
    ev->b->pending--;
}

/* The idempotent producer: kafka.properties (consumer-only ones left
 * out), then what the order needs and no property may change. */
static int dd_relay_producer(dd_relay_shard_t *sh, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    char err[512];

    if (dd_conf_kafka_set(kconf, "linger.ms", "5", err, sizeof(err)) ||
        dd_conf_kafka_apply(sh->relay->conf, kconf, dd_dlq_consumer_only, err, sizeof(err)) ||
        dd_conf_kafka_set(kconf, "enable.idempotence", "true", err, sizeof(err)) ||
        dd_conf_kafka_set(kconf, "acks", "all", err, sizeof(err)) ||
        dd_conf_kafka_set(kconf, "message.timeout.ms", "0", err, sizeof(err))) {
        rd_kafka_conf_destroy(kconf);
        dd_errstr_set(errstr, errstr_size, "outbox producer: %s", err);
        return DD_ERR_FATAL;
    }
    rd_kafka_conf_set_dr_msg_cb(kconf, dd_relay_dr_cb);
    rd_kafka_conf_set_log_cb(kconf, dd_log_rdkafka);
    rd_kafka_conf_set_opaque(kconf, sh);
    if (!(sh->rk = rd_kafka_new(RD_KAFKA_PRODUCER, kconf, err, sizeof(err)))) {
        rd_kafka_conf_destroy(kconf);
        dd_errstr_set(errstr, errstr_size, "outbox producer: %s", err);
        return DD_ERR_FATAL;
    }
    return DD_OK;
}

/* The shard's lock, per database: 1 taken, 0 another session holds it.
 * Lock names are the server's (at most 64 characters), so the name holds
 * a digest of the whole database name: two databases of one server never
 * share it, however long a prefix their names share. */
static int dd_relay_lock(dd_relay_shard_t *sh, int *got, char *errstr, size_t errstr_size)
{
    double v = 0;
    int rc = dd_relay_query_nums(sh,
                                 "SELECT GET_LOCK(CONCAT('" DD_RELAY_LOCK_PREFIX
                                 "', LEFT(SHA2(DATABASE(), 256), 40)), 0)",
                                 &v, 1, errstr, errstr_size);

    *got = !rc && v == 1;
    return rc;
}

/* The connection (READ COMMITTED), the producer and the lock. *wait: the
 * lock is another relay's. */
static int dd_relay_ready(dd_relay_shard_t *sh, int *wait, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    *wait = 0;
    if (!sh->db) {
        rc = dd_db_new_shard(&sh->db, sh->relay->conf, sh->idx, errstr, errstr_size);
        if (!rc)
            rc = dd_db_exec_raw(dd_db_mysql(sh->db),
                                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", errstr,
                                errstr_size);
        if (rc) return rc;
    }
    if (!sh->rk && (rc = dd_relay_producer(sh, errstr, errstr_size))) return rc;
    if (!sh->leader) {
        if ((rc = dd_relay_lock(sh, &sh->leader, errstr, errstr_size))) return rc;
        if (sh->leader)
            dd_log(DD_LOG_INFO, "Outbox relay of shard %d: holding the shard's lock, publishing.",
                   sh->idx);
        *wait = !sh->leader;
    }
    return rc;
}

/* Drops the connection (and the lock with it) after a database error. */
static void dd_relay_drop_db(dd_relay_shard_t *sh)
{
    dd_db_destroy(sh->db);
    sh->db = NULL;
    sh->leader = 0;
}

/* ---- one round ---- */

/* 1 for an error no retry can mend: the event is parked. */
static int dd_relay_permanent(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
        return 1;
    default:
        return 0;
    }
}

/* The pause of topic, or NULL. */
static dd_relay_pause_t *dd_relay_paused(dd_relay_shard_t *sh, const char *topic)
{
    for (int i = 0; i < sh->pause_cnt; i++)
        if (strcmp(sh->pause[i].topic, topic) == 0) return &sh->pause[i];
    return NULL;
}

/* Pauses topic after a failure that may pass: twice as long as the last
 * time, from outbox.poll_interval to outbox.retry_max. */
static void dd_relay_pause(dd_relay_shard_t *sh, const char *topic, const char *why)
{
    const dd_conf_t *conf = sh->relay->conf;
    dd_relay_pause_t *p = dd_relay_paused(sh, topic);

    if (!p && sh->pause_cnt == DD_RELAY_PAUSE_MAX) return; /* tried again at once */
    if (!p) {
        p = &sh->pause[sh->pause_cnt++];
        snprintf(p->topic, sizeof(p->topic), "%s", topic);
        p->pause_ms = conf->outbox.poll_interval_ms;
    } else if (p->until_ms > dd_now_ms()) {
        return; /* several events of one round */
    } else {
        p->pause_ms = p->pause_ms * 2 > conf->outbox.retry_max_ms ? conf->outbox.retry_max_ms
                                                                  : p->pause_ms * 2;
    }
    p->until_ms = dd_now_ms() + p->pause_ms;
    dd_relay_state(sh, "events to %s failed (%s); they stay in the outbox, tried again in %d ms",
                   topic, why, p->pause_ms);
}

/* 1 when a failure of topic's events now pauses it (it is not paused
 * already by this round's). */
static int dd_relay_pausing(dd_relay_shard_t *sh, const char *topic)
{
    const dd_relay_pause_t *p = dd_relay_paused(sh, topic);

    return !p || p->until_ms <= dd_now_ms();
}

/* The cluster's metadata, fetched once per settle (of all topics: asking
 * for one would create it where the brokers create topics on demand). */
typedef struct {
    int fetched;
    rd_kafka_resp_err_t err;
    const struct rd_kafka_metadata *md;
} dd_relay_md_t;

/* Why events to topic were not taken within outbox.send_timeout: the
 * metadata tells a topic that does not exist from a cluster that does not
 * answer. Into out. */
static const char *dd_relay_unsent_why(dd_relay_shard_t *sh, dd_relay_md_t *m, const char *topic,
                                       char *out, size_t out_size)
{
    int found = 0, leaderless = 0;

    if (!m->fetched) {
        int timeout = sh->relay->conf->outbox.send_timeout_ms < 5000
                          ? sh->relay->conf->outbox.send_timeout_ms
                          : 5000;
        m->fetched = 1;
        m->err = rd_kafka_metadata(sh->rk, 1, NULL, &m->md, timeout);
    }
    for (int i = 0; !m->err && i < m->md->topic_cnt; i++) {
        if (strcmp(m->md->topics[i].topic, topic) != 0 || m->md->topics[i].err) continue;
        found = 1;
        for (int p = 0; p < m->md->topics[i].partition_cnt; p++)
            leaderless += m->md->topics[i].partitions[p].leader < 0;
    }
    if (m->err)
        snprintf(out, out_size, "Kafka unreachable: no broker answered a metadata request, %s",
                 rd_kafka_err2str(m->err));
    else if (!found)
        snprintf(out, out_size, "the topic does not exist");
    else if (leaderless)
        snprintf(out, out_size, "%d partition(s) of the topic without a leader", leaderless);
    else
        snprintf(out, out_size, "not taken within outbox.send_timeout; the topic exists");
    return out;
}

/* 1 while some topic is paused. */
static int dd_relay_any_paused(const dd_relay_shard_t *sh)
{
    int64_t now = dd_now_ms();

    for (int i = 0; i < sh->pause_cnt; i++)
        if (sh->pause[i].until_ms > now) return 1;
    return 0;
}

static int dd_relay_id_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Leaves the ids in flight out of the read: each run of consecutive ids
 * as one range, so the index scan skips them (no id can be missing inside
 * a run); as a list when there are many runs (ids that step by more than
 * one, as Galera's auto_increment_increment makes them). */
static void dd_relay_not_in_flight(dd_relay_shard_t *sh)
{
    size_t n = 0, runs = 0;

    for (int k = 0; k < sh->cnt; k++) {
        const dd_relay_batch_t *f = &sh->b[(sh->head + k) % sh->relay->conf->outbox.inflight];
        for (size_t i = 0; i < f->n; i++)
            sh->ids[n++] = f->ev[i].id;
    }
    qsort(sh->ids, n, sizeof(*sh->ids), dd_relay_id_cmp);
    for (size_t i = 0; i < n; i++)
        runs += i == 0 || sh->ids[i] != sh->ids[i - 1] + 1;
    if (runs > DD_RELAY_RUNS_MAX) {
        for (size_t i = 0; i < n; i++)
            dd_buf_printf(&sh->sql, "%s%llu", i ? "," : " AND id NOT IN (",
                          (unsigned long long)sh->ids[i]);
        dd_buf_puts(&sh->sql, ")");
        return;
    }
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && sh->ids[j] == sh->ids[j - 1] + 1; j++)
            ;
        dd_buf_printf(&sh->sql, " AND id NOT BETWEEN %llu AND %llu", (unsigned long long)sh->ids[i],
                      (unsigned long long)sh->ids[j - 1]);
    }
}

/* The read of a round: the oldest pending events, those in flight and
 * paused topics left out. */
static void dd_relay_read_sql(dd_relay_shard_t *sh)
{
    int64_t now = dd_now_ms();
    int any = 0;

    dd_buf_reset(&sh->sql);
    dd_buf_puts(&sh->sql,
                "SELECT id, event_id, topic, msg_key, msg_value, headers FROM `" DD_OUTBOX_TABLE
                "` WHERE state = 0");
    for (int i = 0; i < sh->pause_cnt; i++) {
        if (sh->pause[i].until_ms <= now) continue;
        /* topics are names of [A-Za-z0-9._-] (emit checks them) */
        dd_buf_printf(&sh->sql, "%s'%s'", any ? ", " : " AND topic NOT IN (", sh->pause[i].topic);
        any = 1;
    }
    if (any) dd_buf_puts(&sh->sql, ")");
    dd_relay_not_in_flight(sh);
    dd_buf_printf(&sh->sql, " ORDER BY id LIMIT %d", sh->relay->conf->outbox.batch);
}

static void dd_relay_add_header(void *arg, const char *name, size_t name_len, const void *value,
                                size_t value_len)
{
    rd_kafka_header_add(arg, name, (ssize_t)name_len, value, (ssize_t)value_len);
}

/* Produces one row; an error librdkafka gives at once counts as its
 * report. */
static void dd_relay_produce(dd_relay_shard_t *sh, dd_relay_batch_t *b, MYSQL_ROW row,
                             const unsigned long *len)
{
    dd_relay_ev_t *ev = &b->ev[b->n++];
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(8);
    rd_kafka_resp_err_t err;

    memset(ev, 0, sizeof(*ev));
    ev->id = strtoull(row[0], NULL, 10);
    ev->b = b;
    snprintf(ev->topic, sizeof(ev->topic), "%s", row[2]);
    rd_kafka_header_add(hdrs, DD_OUTBOX_ID_HEADER, -1, row[1], (ssize_t)len[1]);
    if (row[5] && dd_outbox_headers_each(row[5], len[5], dd_relay_add_header, hdrs) != 0)
        dd_log(DD_LOG_WARN, "Outbox event %s: its headers are malformed; sent without them.",
               row[1]);
    b->pending++;
    for (;;) {
        err = rd_kafka_producev(sh->rk, RD_KAFKA_V_TOPIC(ev->topic),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_KEY(row[3], row[3] ? len[3] : 0),
                                RD_KAFKA_V_VALUE(row[4], row[4] ? len[4] : 0),
                                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(ev), RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) break;
        rd_kafka_poll(sh->rk, 50);
    }
    if (err) { /* not queued: the headers are still ours, no report comes */
        rd_kafka_headers_destroy(hdrs);
        ev->err = err;
        ev->done = 1;
        b->pending--;
    }
}

/* Reads the next batch into b and produces it; b->n gets its size. */
static int dd_relay_send(dd_relay_shard_t *sh, dd_relay_batch_t *b, char *errstr,
                         size_t errstr_size)
{
    MYSQL *my = dd_db_mysql(sh->db);
    MYSQL_RES *res;
    MYSQL_ROW row;

    b->n = b->pending = 0;
    b->sent_ms = dd_now_ms();
    dd_relay_read_sql(sh);
    if (sh->sql.oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    if (mysql_real_query(my, sh->sql.p, (unsigned long)sh->sql.len) != 0 ||
        !(res = mysql_store_result(my))) {
        dd_errstr_set(errstr, errstr_size, "reading the outbox: %u: %s", mysql_errno(my),
                      mysql_error(my));
        return mysql_errno(my) ? dd_db_classify(mysql_errno(my)) : DD_ERR_RETRIABLE;
    }
    while ((row = mysql_fetch_row(res)) && b->n < (size_t)sh->relay->conf->outbox.batch)
        dd_relay_produce(sh, b, row, mysql_fetch_lengths(res));
    mysql_free_result(res);
    return DD_OK;
}

/* Serves delivery reports until every event of batch b has one. While
 * they take long (a broker down) the status goes on. After
 * outbox.send_timeout the events not yet sent are taken back, those of
 * the later batches too (a topic without metadata holds its events in
 * librdkafka forever); at stop all are. Either way their reports say so,
 * they stay in the table, and the relay drains. */
static void dd_relay_wait(dd_relay_shard_t *sh, dd_relay_batch_t *b)
{
    char err[512];
    int64_t t0 = b->sent_ms;

    while (b->pending > 0) {
        rd_kafka_poll(sh->rk, 100);
        if (!sh->timed_out && dd_now_ms() - t0 > sh->relay->conf->outbox.send_timeout_ms) {
            /* only what is not on its way yet: no later event overtakes */
            rd_kafka_purge(sh->rk, RD_KAFKA_PURGE_F_QUEUE);
            sh->timed_out = 1;
            sh->drain = 1;
        }
        if (!sh->stop_at && atomic_load(&sh->relay->stop)) {
            rd_kafka_purge(sh->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
            sh->stop_at = dd_now_ms() + DD_RELAY_STOP_WAIT_MS;
        }
        if (sh->stop_at && dd_now_ms() > sh->stop_at) break;
        if (b->pending == 0 || dd_now_ms() - t0 < 2000) continue;
        dd_relay_state(sh, "waiting for Kafka to acknowledge the events sent (is the broker "
                           "down?)");
        if (dd_relay_refresh(sh, err, sizeof(err)) != DD_OK) sh->status_ms = dd_now_ms();
    }
}

/* Parks ev: state 1, with the broker's error. */
static int dd_relay_park(dd_relay_shard_t *sh, const dd_relay_ev_t *ev, char *errstr,
                         size_t errstr_size)
{
    MYSQL *my = dd_db_mysql(sh->db);
    const char *why = rd_kafka_err2str(ev->err);

    dd_buf_reset(&sh->sql);
    dd_buf_puts(&sh->sql, "UPDATE `" DD_OUTBOX_TABLE "` SET state = 1, error = ");
    dd_db_quote(&sh->sql, my, why, strnlen(why, 400));
    dd_buf_printf(&sh->sql, " WHERE id = %llu", (unsigned long long)ev->id);
    if (sh->sql.oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    return dd_db_exec_raw(my, sh->sql.p, errstr, errstr_size);
}

/* After the reports of batch b: deletes the acknowledged events, parks
 * the refused ones, pauses the topics of those that failed for now. */
static int dd_relay_settle(dd_relay_shard_t *sh, dd_relay_batch_t *b, char *errstr,
                           size_t errstr_size)
{
    MYSQL *my = dd_db_mysql(sh->db);
    dd_buf_t del = {0};
    uint64_t sent = 0, refused = 0, failed = 0;
    dd_relay_md_t md = {0};
    char why[300];
    int rc = DD_OK;

    dd_buf_puts(&del, "DELETE FROM `" DD_OUTBOX_TABLE "` WHERE id IN (");
    for (size_t i = 0; i < b->n; i++) {
        dd_relay_ev_t *ev = &b->ev[i];
        if (ev->done && !ev->err) {
            dd_buf_printf(&del, "%s%llu", sent++ ? "," : "", (unsigned long long)ev->id);
        } else if (ev->done && dd_relay_permanent(ev->err)) {
            if (!rc) rc = dd_relay_park(sh, ev, errstr, errstr_size);
            if (!rc) {
                refused++;
                dd_log(DD_LOG_ERROR,
                       "Outbox event %llu to %s refused for good (%s): parked (state 1), not "
                       "sent again.",
                       (unsigned long long)ev->id, ev->topic, rd_kafka_err2str(ev->err));
            }
        } else if (ev->done && ev->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE && sh->timed_out) {
            failed++;
            if (!dd_relay_pausing(sh, ev->topic)) continue; /* said for this round */
            dd_relay_pause(sh, ev->topic,
                           dd_relay_unsent_why(sh, &md, ev->topic, why, sizeof(why)));
        } else if (ev->done && ev->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
                   ev->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
            failed++;
            dd_relay_pause(sh, ev->topic, rd_kafka_err2str(ev->err));
        }
    }
    dd_buf_puts(&del, ")");
    if (md.md) rd_kafka_metadata_destroy(md.md);
    if (!rc && sent && del.oom) rc = DD_ERR_NOMEM;
    if (!rc && sent) rc = dd_db_exec_raw(my, del.p, errstr, errstr_size);
    dd_buf_release(&del);
    pthread_mutex_lock(&sh->relay->mu);
    sh->sent += rc ? 0 : sent;
    sh->refused += refused;
    sh->failed += failed;
    pthread_mutex_unlock(&sh->relay->mu);
    if (failed || refused || rc || sent < b->n) sh->drain = 1;
    if (!failed && !dd_relay_any_paused(sh)) dd_relay_state(sh, "%s", "");
    return rc;
}

/* Fills the pipeline: reads and produces batches while fewer than
 * outbox.inflight are in flight and the relay is not draining. */
static int dd_relay_fill(dd_relay_shard_t *sh, char *errstr, size_t errstr_size)
{
    const dd_conf_t *conf = sh->relay->conf;
    int rc;

    while (!sh->drain && sh->cnt < conf->outbox.inflight && !atomic_load(&sh->relay->stop)) {
        dd_relay_batch_t *b;
        b = &sh->b[(sh->head + sh->cnt) % conf->outbox.inflight];
        if ((rc = dd_relay_send(sh, b, errstr, errstr_size))) {
            sh->drain = 1;
            return rc;
        }
        if (b->n == 0) {
            sh->drain = 1; /* caught up */
            break;
        }
        sh->cnt++;
        if ((int)b->n < conf->outbox.batch) sh->drain = 1;
    }
    return DD_OK;
}

/* Waits for the oldest batch's reports and settles it. */
static int dd_relay_settle_oldest(dd_relay_shard_t *sh, char *errstr, size_t errstr_size)
{
    dd_relay_batch_t *b = &sh->b[sh->head];
    int rc;

    dd_relay_wait(sh, b);
    if (rd_kafka_fatal_error(sh->rk, NULL, 0)) sh->drain = 1;
    rc = dd_relay_settle(sh, b, errstr, errstr_size);
    sh->head = (sh->head + 1) % sh->relay->conf->outbox.inflight;
    sh->cnt--;
    return rc;
}

/* Once nothing is in flight: a drain ends (the relay reads again), and a
 * producer that hit a fatal error is replaced
 * (the idempotent producer cannot go on; the events stay). */
static void dd_relay_drained(dd_relay_shard_t *sh)
{
    if (sh->cnt > 0) return;
    if (sh->rk && rd_kafka_fatal_error(sh->rk, NULL, 0)) {
        rd_kafka_destroy(sh->rk);
        sh->rk = NULL;
    }
    if (!sh->drain) return;
    sh->drain = sh->timed_out = 0;
}

/* One round; *idle when there was nothing to do (or the lock is
 * another relay's). */
static int dd_relay_round(dd_relay_shard_t *sh, int *idle, char *errstr, size_t errstr_size)
{
    int wait = 0, rc;

    *idle = 0;
    dd_relay_drained(sh);
    if ((rc = dd_relay_ready(sh, &wait, errstr, errstr_size))) return rc;
    if (wait) sh->drain = 1; /* what is in flight is settled, nothing more read */
    if (wait && sh->cnt == 0) {
        dd_relay_state(sh, "waiting: another relay holds the shard's lock");
        *idle = 1;
        return DD_OK;
    }
    if ((rc = dd_relay_refresh(sh, errstr, errstr_size))) return rc;
    if ((rc = dd_relay_fill(sh, errstr, errstr_size))) return rc;
    if (sh->cnt == 0) {
        *idle = 1;
        return DD_OK;
    }
    return dd_relay_settle_oldest(sh, errstr, errstr_size);
}

/* At stop: what is still in flight is waited for (a bounded time) and
 * settled, so the acknowledged events are not sent again. */
static void dd_relay_flush(dd_relay_shard_t *sh)
{
    char err[1024];

    while (sh->cnt > 0) {
        if (!sh->db || dd_relay_settle_oldest(sh, err, sizeof(err)) != DD_OK) break;
    }
}

static void *dd_relay_main(void *arg)
{
    dd_relay_shard_t *sh = arg;
    const dd_conf_t *conf = sh->relay->conf;
    char err[1024];
    int64_t backoff = conf->outbox.poll_interval_ms;
    int idle;

    while (!atomic_load(&sh->relay->stop)) {
        int rc = dd_relay_round(sh, &idle, err, sizeof(err));
        if (rc) {
            dd_relay_state(sh, "trying again in %lld ms: %s", (long long)backoff, err);
            dd_relay_drop_db(sh);
            dd_sleep_ms(backoff, &sh->relay->stop);
            backoff =
                backoff * 2 > conf->outbox.retry_max_ms ? conf->outbox.retry_max_ms : backoff * 2;
            continue;
        }
        backoff = conf->outbox.poll_interval_ms;
        if (idle)
            dd_sleep_ms(sh->leader ? conf->outbox.poll_interval_ms : DD_RELAY_LOCK_WAIT_MS,
                        &sh->relay->stop);
    }
    dd_relay_flush(sh);
    return NULL;
}

/* ---- lifecycle ---- */

/* The shard's ring of outbox.inflight batches. */
static int dd_relay_batches_new(dd_relay_shard_t *sh)
{
    const dd_conf_t *conf = sh->relay->conf;

    if (!(sh->b = calloc((size_t)conf->outbox.inflight, sizeof(*sh->b))) ||
        !(sh->ids =
              calloc((size_t)conf->outbox.inflight * (size_t)conf->outbox.batch, sizeof(*sh->ids))))
        return DD_ERR_NOMEM;
    for (int i = 0; i < conf->outbox.inflight; i++)
        if (!(sh->b[i].ev = calloc((size_t)conf->outbox.batch, sizeof(*sh->b[i].ev))))
            return DD_ERR_NOMEM;
    return DD_OK;
}

int dd_relay_new(dd_relay_t **relayp, const dd_conf_t *conf, dd_relay_status_fn *status,
                 void *opaque, char *errstr, size_t errstr_size)
{
    dd_relay_t *relay = calloc(1, sizeof(*relay));

    *relayp = NULL;
    if (!relay || !(relay->shard = calloc((size_t)conf->shard_cnt, sizeof(*relay->shard)))) {
        free(relay);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    relay->conf = conf;
    relay->status = status;
    relay->opaque = opaque;
    relay->cnt = conf->shard_cnt;
    pthread_mutex_init(&relay->mu, NULL);
    for (int s = 0; s < relay->cnt; s++) {
        dd_relay_shard_t *sh = &relay->shard[s];
        sh->relay = relay;
        sh->idx = s;
        sh->backlog = -1;
        if (dd_relay_batches_new(sh) != DD_OK) {
            dd_relay_destroy(relay);
            dd_errstr_set(errstr, errstr_size, "out of memory");
            return DD_ERR_NOMEM;
        }
    }
    *relayp = relay;
    return DD_OK;
}

int dd_relay_start(dd_relay_t *relay, char *errstr, size_t errstr_size)
{
    for (int s = 0; s < relay->cnt; s++) {
        dd_relay_shard_t *sh = &relay->shard[s];
        if (pthread_create(&sh->thread, NULL, dd_relay_main, sh) != 0) {
            dd_errstr_set(errstr, errstr_size, "cannot start the outbox relay's thread");
            return DD_ERR_FATAL;
        }
        sh->started = 1;
    }
    dd_log(DD_LOG_INFO, "Outbox relay started: %d shard(s), batches of %d, %d in flight.",
           relay->cnt, relay->conf->outbox.batch, relay->conf->outbox.inflight);
    return DD_OK;
}

void dd_relay_stop(dd_relay_t *relay)
{
    if (!relay) return;
    atomic_store(&relay->stop, 1);
    for (int s = 0; s < relay->cnt; s++) {
        dd_relay_shard_t *sh = &relay->shard[s];
        if (!sh->started) continue;
        pthread_join(sh->thread, NULL);
        sh->started = 0;
    }
}

void dd_relay_destroy(dd_relay_t *relay)
{
    if (!relay) return;
    dd_relay_stop(relay);
    for (int s = 0; s < relay->cnt; s++) {
        dd_relay_shard_t *sh = &relay->shard[s];
        if (sh->rk) {
            rd_kafka_purge(sh->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
            rd_kafka_poll(sh->rk, 0);
            rd_kafka_destroy(sh->rk);
        }
        dd_db_destroy(sh->db);
        dd_buf_release(&sh->sql);
        for (int i = 0; sh->b && i < relay->conf->outbox.inflight; i++)
            free(sh->b[i].ev);
        free(sh->b);
        free(sh->ids);
    }
    pthread_mutex_destroy(&relay->mu);
    free(relay->shard);
    free(relay);
}
