/*
 * Kafka consumer wrapper (see dd_source.h). The rebalance callback is the
 * delicate part: offsets of revoked partitions must be stored and committed
 * before the partitions are given up, and never stored afterwards.
 */
#include "dd_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_kafka.h"
#include "dd_log.h"

struct dd_source_s {
    rd_kafka_t *rk;
    const dd_conf_t *conf;
    dd_offsets_t *offs;
    dd_source_rebalance_cb_t *cb;
    void *cb_arg;
    int paused;
    int64_t leave_by_ms; /* leaving the group: the revoke's commit ends by then; 0: not */
};

static void dd_source_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    dd_source_t *src = opaque;

    if (err == RD_KAFKA_RESP_ERR__NO_OFFSET) return; /* nothing was stored since the last commit */
    if (err) dd_log(DD_LOG_WARN, "Offset commit failed: %s", rd_kafka_err2str(err));
    for (int i = 0; offsets && i < offsets->cnt; i++) {
        rd_kafka_topic_partition_t *p = &offsets->elems[i];
        dd_ptrack_t *pt = dd_offsets_get(src->offs, p->topic, p->partition, 0);
        if (!p->err && pt && p->offset >= 0 && p->offset > pt->committed)
            pt->committed = p->offset;
        else if (p->err)
            dd_log(DD_LOG_WARN, "Offset commit for %s [%d] failed: %s", p->topic, (int)p->partition,
                   rd_kafka_err2str(p->err));
    }
}

/* The offset a partition's group has committed, as this consumer knows it. */
static void dd_source_committed_str(dd_source_t *src, const char *topic, int32_t partition,
                                    char *out, size_t out_size)
{
    dd_ptrack_t *pt = dd_offsets_get(src->offs, topic, partition, 0);

    if (pt && pt->committed >= 0)
        snprintf(out, out_size, "%lld", (long long)pt->committed);
    else
        snprintf(out, out_size, "none");
}

/* One line per revoked partition, with the offset its group keeps. */
static void dd_source_log_revoked(dd_source_t *src, const rd_kafka_topic_partition_list_t *parts,
                                  int lost)
{
    char at[32];

    for (int i = 0; i < parts->cnt; i++) {
        dd_source_committed_str(src, parts->elems[i].topic, parts->elems[i].partition, at,
                                sizeof(at));
        if (lost)
            dd_log(DD_LOG_WARN,
                   "Lost %s [%d]: another member may own it already, so nothing was committed; "
                   "the committed offset stays %s, and what was applied after it comes again "
                   "and is skipped as duplicates.",
                   parts->elems[i].topic, (int)parts->elems[i].partition, at);
        else
            dd_log(DD_LOG_INFO, "Revoked %s [%d]: committed offset %s.", parts->elems[i].topic,
                   (int)parts->elems[i].partition, at);
    }
}

static void dd_source_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                   rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    dd_source_t *src = opaque;
    int cooperative = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    rd_kafka_error_t *error = NULL;
    rd_kafka_resp_err_t rerr = 0;

    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        dd_log(DD_LOG_INFO, "The group %s assigned %d partition(s) to this member.",
               src->conf->kafka.group, parts->cnt);
        src->cb(src->cb_arg, 1, parts, 0);
        if (cooperative)
            error = rd_kafka_incremental_assign(rk, parts);
        else
            rerr = rd_kafka_assign(rk, parts);
        if (src->paused) rd_kafka_pause_partitions(rk, parts);
    } else {
        int lost = rd_kafka_assignment_lost(rk);
        dd_log(DD_LOG_INFO, "Revoking %d partition(s)%s.", parts->cnt,
               lost ? " (lost: not committing)" : "");
        src->cb(src->cb_arg, 0, parts, lost);
        if (!lost) {
            char errstr[256];
            int64_t left = src->leave_by_ms ? src->leave_by_ms - dd_now_ms() : DD_SOURCE_COMMIT_MS;
            if (left > DD_SOURCE_COMMIT_MS) left = DD_SOURCE_COMMIT_MS;
            if (left > 0) dd_source_commit_wait(src, (int)left, errstr, sizeof(errstr));
        }
        dd_source_log_revoked(src, parts, lost);
        if (cooperative)
            error = rd_kafka_incremental_unassign(rk, parts);
        else
            rerr = rd_kafka_assign(rk, NULL);
    }
    if (error) {
        dd_log(DD_LOG_ERROR, "Rebalance (%s) failed: %s", rd_kafka_err2name(err),
               rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    } else if (rerr) {
        dd_log(DD_LOG_ERROR, "Rebalance (%s) failed: %s", rd_kafka_err2name(err),
               rd_kafka_err2str(rerr));
    }
}

static int dd_source_conf(rd_kafka_conf_t *kconf, const dd_conf_t *conf, char *errstr,
                          size_t errstr_size)
{
    static const char *const fixed[][2] = {{"enable.auto.offset.store", "false"},
                                           {"enable.partition.eof", "false"}};
    /* Defaults, before the user's properties so those can override them:
     * earliest for a new group, and a prefetch queue of 64 MB (librdkafka's
     * own default, set here so that it is dedupd's documented default
     * whatever the library's). dedupd's own bound is batch.max_inflight; this
     * queue is where fetched messages wait while the pipeline is at it.
     *
     * The queue must hold more than a second of the stream: librdkafka 2.0.2
     * stops fetching once it holds queued.max.messages.kbytes or
     * queued.min.messages, and looks again only on its broker thread's
     * one-second tick. A queue that drains sooner leaves the pipeline idle
     * until then (docs/PERFORMANCE-NOTES.md says what that costs a replay).
     * queued.min.messages stays at librdkafka's 100,000, which binds first
     * for small messages. User properties come next; the ones that carry our
     * guarantees come last. */
    static const char *const defaults[][2] = {{"auto.offset.reset", "earliest"},
                                              {"queued.max.messages.kbytes", "65536"}};
    int rc = 0;

    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(defaults); i++)
        rc = dd_conf_kafka_set(kconf, defaults[i][0], defaults[i][1], errstr, errstr_size);

    if (!rc) rc = dd_conf_kafka_apply(conf, kconf, NULL, errstr, errstr_size);
    if (!rc) rc = dd_conf_kafka_set(kconf, "group.id", conf->kafka.group, errstr, errstr_size);
    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(fixed); i++)
        rc = dd_conf_kafka_set(kconf, fixed[i][0], fixed[i][1], errstr, errstr_size);
    return rc;
}

int dd_source_new(dd_source_t **srcp, const dd_conf_t *conf, dd_offsets_t *offs,
                  dd_source_rebalance_cb_t *cb, void *cb_arg, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    dd_source_t *src = calloc(1, sizeof(*src));
    char err[512];
    int rc;

    *srcp = NULL;
    if (!src) {
        rd_kafka_conf_destroy(kconf);
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    src->conf = conf;
    src->offs = offs;
    src->cb = cb;
    src->cb_arg = cb_arg;
    rc = dd_source_conf(kconf, conf, errstr, errstr_size);
    if (rc) {
        rd_kafka_conf_destroy(kconf);
        free(src);
        return rc;
    }
    rd_kafka_conf_set_log_cb(kconf, dd_log_rdkafka);
    rd_kafka_conf_set_rebalance_cb(kconf, dd_source_rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb(kconf, dd_source_commit_cb);
    rd_kafka_conf_set_opaque(kconf, src);
    src->rk = rd_kafka_new(RD_KAFKA_CONSUMER, kconf, err, sizeof(err));
    if (!src->rk) {
        rd_kafka_conf_destroy(kconf);
        free(src);
        dd_errstr_set(errstr, errstr_size, "cannot create Kafka consumer: %s", err);
        return DD_ERR_FATAL;
    }
    rd_kafka_poll_set_consumer(src->rk);
    *srcp = src;
    return DD_OK;
}

rd_kafka_t *dd_source_rk(dd_source_t *src)
{
    return src->rk;
}

rd_kafka_message_t *dd_source_poll(dd_source_t *src, int timeout_ms)
{
    return rd_kafka_consumer_poll(src->rk, timeout_ms);
}

rd_kafka_resp_err_t dd_source_committed(dd_source_t *src, rd_kafka_topic_partition_list_t *parts,
                                        int timeout_ms)
{
    return rd_kafka_committed(src->rk, parts, timeout_ms);
}

int64_t dd_source_high(dd_source_t *src, const char *topic, int32_t partition, int64_t *lo)
{
    int64_t hi = -1;

    *lo = -1;
    rd_kafka_get_watermark_offsets(src->rk, topic, partition, lo, &hi);
    return hi;
}

/* The routes' topics together: names and patterns, as librdkafka takes
 * them (a topic belongs to one route: no name comes twice). */
int dd_source_subscribe(dd_source_t *src, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(8);
    rd_kafka_resp_err_t err;

    for (int r = 0; r < src->conf->route_cnt; r++)
        for (int i = 0; i < src->conf->routes[r].topic_cnt; i++)
            rd_kafka_topic_partition_list_add(topics, src->conf->routes[r].topics[i],
                                              RD_KAFKA_PARTITION_UA);
    err = rd_kafka_subscribe(src->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err) {
        dd_errstr_set(errstr, errstr_size, "cannot subscribe: %s", rd_kafka_err2str(err));
        return DD_ERR_FATAL;
    }
    return DD_OK;
}

static int dd_source_topic_ends(dd_source_t *src, const char *topic, int timeout_ms, char *errstr,
                                size_t errstr_size)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(src->rk, topic, NULL);
    rd_kafka_resp_err_t err;
    int rc = DD_OK;

    err = rd_kafka_metadata(src->rk, 0, rkt, &md, timeout_ms);
    if (err || md->topic_cnt != 1 || md->topics[0].err) {
        dd_errstr_set(errstr, errstr_size, "cannot read metadata of topic %s: %s", topic,
                      rd_kafka_err2str(err ? err : md->topics[0].err));
        rc = DD_ERR_RETRIABLE;
        goto out;
    }
    for (int i = 0; i < md->topics[0].partition_cnt; i++) {
        int32_t part = md->topics[0].partitions[i].id;
        int64_t low = -1, high = -1;
        dd_ptrack_t *pt = dd_offsets_get(src->offs, topic, part, 1);
        err = rd_kafka_query_watermark_offsets(src->rk, topic, part, &low, &high, timeout_ms);
        if (err || !pt) {
            dd_errstr_set(errstr, errstr_size, "cannot read end offset of %s [%d]: %s", topic,
                          (int)part, err ? rd_kafka_err2str(err) : "out of memory");
            rc = DD_ERR_RETRIABLE;
            goto out;
        }
        pt->low_offset = low;
        pt->end_offset = high;
    }
out:
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return rc;
}

/* The routes' topics, patterns resolved against the cluster's topics now
 * (dd_kafka_route_topics: a topic that appears later is not waited for). */
int dd_source_query_ends(dd_source_t *src, int timeout_ms, char *errstr, size_t errstr_size)
{
    char **topics = NULL;
    int cnt = 0, rc = dd_kafka_route_topics(src->rk, src->conf, -1, timeout_ms, &topics, &cnt,
                                            errstr, errstr_size);

    for (int i = 0; !rc && i < cnt; i++)
        rc = dd_source_topic_ends(src, topics[i], timeout_ms, errstr, errstr_size);
    dd_kafka_topics_free(topics, cnt);
    return rc;
}

void dd_source_store(dd_source_t *src)
{
    rd_kafka_topic_partition_list_t *list = NULL;
    rd_kafka_resp_err_t err;

    for (size_t i = 0; i < dd_offsets_count(src->offs); i++) {
        dd_ptrack_t *pt = dd_offsets_at(src->offs, i);
        int64_t at = dd_ptrack_storable(pt); /* not past the database's position */
        if (!pt->assigned || at < 0 || at <= pt->stored) continue;
        if (!list) list = rd_kafka_topic_partition_list_new(8);
        rd_kafka_topic_partition_list_add(list, pt->topic, pt->partition)->offset = at;
    }
    if (!list) return;
    err = rd_kafka_offsets_store(src->rk, list);
    for (int i = 0; i < list->cnt; i++) {
        rd_kafka_topic_partition_t *p = &list->elems[i];
        dd_ptrack_t *pt = dd_offsets_get(src->offs, p->topic, p->partition, 0);
        if (p->err) {
            /* ERR__STATE: no longer assigned. Never retried for that partition. */
            dd_log(DD_LOG_INFO, "Offset %lld not stored for %s [%d]: %s", (long long)p->offset,
                   p->topic, (int)p->partition, rd_kafka_err2str(p->err));
            if (pt) pt->stored = p->offset; /* do not retry this value */
        } else if (pt) {
            pt->stored = p->offset;
        }
    }
    if (err && err != RD_KAFKA_RESP_ERR__STATE)
        dd_log(DD_LOG_WARN, "Storing offsets failed: %s", rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(list);
}

static void dd_source_note_committed(dd_source_t *src,
                                     const rd_kafka_topic_partition_list_t *offsets)
{
    for (int i = 0; offsets && i < offsets->cnt; i++) {
        const rd_kafka_topic_partition_t *p = &offsets->elems[i];
        dd_ptrack_t *pt = dd_offsets_get(src->offs, p->topic, p->partition, 0);
        if (!p->err && pt && p->offset >= 0 && p->offset > pt->committed) pt->committed = p->offset;
    }
}

void dd_source_log_committed(dd_source_t *src, const char *what)
{
    char at[32];

    for (size_t i = 0; i < dd_offsets_count(src->offs); i++) {
        dd_ptrack_t *pt = dd_offsets_at(src->offs, i);
        if (!pt->assigned) continue;
        dd_source_committed_str(src, pt->topic, pt->partition, at, sizeof(at));
        dd_log(DD_LOG_INFO, "%s: %s [%d]: committed offset %s.", what, pt->topic,
               (int)pt->partition, at);
    }
}

/* rd_kafka_commit() waits for the result without a bound; the reply on a
 * queue of our own can be waited for with one. The offset commit callback
 * still sees the result (librdkafka posts it to both). */
int dd_source_commit_wait(dd_source_t *src, int timeout_ms, char *errstr, size_t errstr_size)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(src->rk);
    rd_kafka_event_t *ev = NULL;
    rd_kafka_resp_err_t err;

    err = rd_kafka_commit_queue(src->rk, NULL, q, NULL, NULL);
    if (!err) {
        ev = rd_kafka_queue_poll(q, timeout_ms);
        err = ev ? rd_kafka_event_error(ev) : RD_KAFKA_RESP_ERR__TIMED_OUT;
    }
    /* What was committed: the trackers know it before any callback runs,
     * so the lines about revokes and the final commit can say it. */
    if (ev) dd_source_note_committed(src, rd_kafka_event_topic_partition_list(ev));
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q); /* a reply after the timeout is dropped */
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
        dd_errstr_set(errstr, errstr_size, "offset commit failed: %s", rd_kafka_err2str(err));
        dd_log(DD_LOG_WARN, "Synchronous offset commit failed: %s", rd_kafka_err2str(err));
        return DD_ERR_RETRIABLE;
    }
    return DD_OK;
}

int dd_source_commit_sync(dd_source_t *src, char *errstr, size_t errstr_size)
{
    return dd_source_commit_wait(src, DD_SOURCE_COMMIT_MS, errstr, errstr_size);
}

void dd_source_pause(dd_source_t *src, int pause)
{
    rd_kafka_topic_partition_list_t *parts = NULL;

    if (src->paused == pause) return;
    if (rd_kafka_assignment(src->rk, &parts) == 0 && parts) {
        if (pause)
            rd_kafka_pause_partitions(src->rk, parts);
        else
            rd_kafka_resume_partitions(src->rk, parts);
        rd_kafka_topic_partition_list_destroy(parts);
    }
    src->paused = pause;
}

int dd_source_paused(const dd_source_t *src)
{
    return src->paused;
}

/* rd_kafka_consumer_close() waits for the group without a bound; closing
 * through a queue of our own lets the wait end. Consuming from it serves the
 * revoke callback; anything else it returns is dropped. Returns 1 once
 * closed. */
static int dd_source_leave(dd_source_t *src, int timeout_ms)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(src->rk);
    int64_t deadline = dd_now_ms() + timeout_ms;
    rd_kafka_error_t *error;
    int closed;

    src->leave_by_ms = deadline;
    error = rd_kafka_consumer_close_queue(src->rk, q);
    if (error) {
        dd_log(DD_LOG_WARN, "Closing the consumer: %s", rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    }
    while (!error && !rd_kafka_consumer_closed(src->rk) && dd_now_ms() < deadline) {
        rd_kafka_message_t *rkm = rd_kafka_consume_queue(q, 100);
        if (rkm) rd_kafka_message_destroy(rkm);
    }
    closed = rd_kafka_consumer_closed(src->rk);
    rd_kafka_queue_destroy(q);
    return closed;
}

void dd_source_destroy(dd_source_t *src)
{
    if (!src) return;
    if (src->rk) {
        dd_log(DD_LOG_INFO, "Leaving the group %s.", src->conf->kafka.group);
        if (dd_source_leave(src, DD_SOURCE_CLOSE_MS)) {
            dd_log(DD_LOG_INFO, "Left the group %s.", src->conf->kafka.group);
        } else {
            dd_log(DD_LOG_WARN,
                   "The consumer did not leave the group within %d ms; the "
                   "group will notice when the session times out.",
                   DD_SOURCE_CLOSE_MS);
        }
        if (!dd_kafka_destroy_within(src->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE,
                                     DD_SOURCE_DESTROY_MS))
            dd_log(DD_LOG_WARN,
                   "The Kafka consumer was not destroyed within %d ms (brokers not "
                   "answering): going on without waiting for it.",
                   DD_SOURCE_DESTROY_MS);
    }
    free(src);
}
