/*
 * What comes back to the consumer's thread (see dd_pipeline_int.h): items
 * the lanes finished, and dead letters, which hold their message's offset
 * until the dead-letter topic acknowledges them. A dead letter that fails
 * is sent again (at once and bare when the broker refused it as too
 * large); at shutdown the ones still unacknowledged are given up, their
 * offsets not committed, so the messages come again after a restart.
 */
#include "dd_pipeline_int.h"

#include <stdlib.h>

#include "dd_common.h"
#include "dd_log.h"
#include "dd_text.h"

/* At most this many dead-letter lines per reason per window: a flood of
 * poison messages must not drown the log (each is counted on /metrics and
 * kept in the dead-letter topic all the same). */
#define DD_PIPELINE_DLQ_LINES 10
#define DD_PIPELINE_DLQ_WINDOW_MS 10000

static void dd_pipeline_dlq_suppressed(dd_reason_t reason, uint64_t n)
{
    dd_log(DD_LOG_WARN,
           "%llu more dead letter(s) of reason %s were not logged (at most %d lines per reason "
           "per %d s); each is in the dead-letter topic and counted in "
           "dedupd_dead_letters_total{reason=\"%s\"} (by route).",
           (unsigned long long)n, dd_reason2str(reason), DD_PIPELINE_DLQ_LINES,
           DD_PIPELINE_DLQ_WINDOW_MS / 1000, dd_reason2str(reason));
}

void dd_pipeline_dlq_log_flush(dd_pipeline_t *pl, int final)
{
    int64_t now = dd_now_ms();

    for (int i = 0; i < DD_REASON_CNT; i++) {
        dd_log_limit_t *lim = &pl->dlq_limit[i];
        uint64_t n = final ? lim->suppressed : dd_log_limit_flush(lim, now);
        if (final) lim->suppressed = 0;
        if (n) dd_pipeline_dlq_suppressed((dd_reason_t)i, n);
    }
}

/* The route field of a message's log lines: its route's name, when the
 * configuration has routes (NULL leaves the field out). */
static const char *dd_pipeline_route_field(const dd_pipeline_t *pl, const dd_item_t *item)
{
    return pl->conf->has_routes ? pl->conf->routes[item->route].name : NULL;
}

/* A conflict's line also names both request hashes and the row (or the
 * earlier copy in the batch) the message conflicts with. */
static void dd_pipeline_log_conflict(const dd_pipeline_t *pl, const dd_item_t *item,
                                     const rd_kafka_message_t *rkm)
{
    char hash[2 * DD_HASH_LEN + 1], stored[2 * DD_HASH_LEN + 1], with[300];
    int row = item->conflict_with == DD_CONFLICT_ROW;
    dd_log_field_t f[] = {
        {"route", dd_pipeline_route_field(pl, item)},
        {"reason", "conflict"},
        {"hash", hash},
        {"stored_hash", stored},
        {"stored_created_at", row && item->conflict_created[0] ? item->conflict_created : NULL},
        {"stored_updated_at", row && item->conflict_updated[0] ? item->conflict_updated : NULL},
        {"first_copy", row ? NULL : item->conflict_first},
    };

    dd_text_hex(hash, item->hash, DD_HASH_LEN, 0);
    dd_text_hex(stored, item->conflict_hash, DD_HASH_LEN, 0);
    hash[2 * DD_HASH_LEN] = stored[2 * DD_HASH_LEN] = '\0';
    if (row)
        snprintf(with, sizeof(with), "the stored row's %.12s (created %s, updated %s)", stored,
                 item->conflict_created[0] ? item->conflict_created : "?",
                 item->conflict_updated[0] ? item->conflict_updated : "?");
    else
        snprintf(with, sizeof(with), "%.12s of the earlier copy at %s", stored,
                 item->conflict_first);
    dd_log_msg_fields(DD_LOG_WARN, rd_kafka_topic_name(rkm->rkt), rkm->partition, rkm->offset,
                      item->key_len ? item->key : NULL, f, DD_ARRAY_LEN(f),
                      "Dead-lettering message (conflict): %s: its request hash %.12s differs "
                      "from %s.",
                      item->error, hash, with);
}

/* Every dead letter is logged once, at warn, when it is decided (a resend
 * is not), within the rate limit of its reason. */
static void dd_pipeline_log_dlq(dd_pipeline_t *pl, dd_item_t *item)
{
    rd_kafka_message_t *rkm = item->rkm;
    dd_log_field_t f[] = {{"route", dd_pipeline_route_field(pl, item)},
                          {"reason", dd_reason2str(item->reason)}};
    uint64_t suppressed;

    if (item->dlq_logged) return;
    item->dlq_logged = 1;
    if (!dd_log_enabled(DD_LOG_WARN)) return;
    if (!pl->dlq_limit[item->reason].max) {
        pl->dlq_limit[item->reason].max = DD_PIPELINE_DLQ_LINES;
        pl->dlq_limit[item->reason].window_ms = DD_PIPELINE_DLQ_WINDOW_MS;
    }
    if (!dd_log_limit_take(&pl->dlq_limit[item->reason], dd_now_ms(), &suppressed)) return;
    if (suppressed) dd_pipeline_dlq_suppressed(item->reason, suppressed);
    if (item->reason == DD_REASON_CONFLICT && item->conflict_with != DD_CONFLICT_NONE) {
        dd_pipeline_log_conflict(pl, item, rkm);
        return;
    }
    dd_log_msg_fields(DD_LOG_WARN, rd_kafka_topic_name(rkm->rkt), rkm->partition, rkm->offset,
                      item->key_len ? item->key : NULL, f, DD_ARRAY_LEN(f),
                      "Dead-lettering message (%s): %s", dd_reason2str(item->reason), item->error);
}

static void dd_pipeline_send_dlq(dd_pipeline_t *pl, dd_item_t *item)
{
    rd_kafka_message_t *rkm = item->rkm;
    rd_kafka_headers_t *hdrs = NULL;
    char dlq_topic[512];
    dd_dlq_letter_t letter = {
        .dlq_topic = dd_conf_dlq_topic(&pl->conf->routes[item->route],
                                       rd_kafka_topic_name(rkm->rkt), dlq_topic, sizeof(dlq_topic)),
        .topic = rd_kafka_topic_name(rkm->rkt),
        .partition = rkm->partition,
        .offset = rkm->offset,
        .key = rkm->key,
        .key_len = rkm->key_len,
        .payload = rkm->payload,
        .payload_len = rkm->len,
        .reason = dd_reason2str(item->reason),
        .error = item->error,
        .biz_key = item->key_len ? item->key : NULL,
        .timestamp_ms = rd_kafka_message_timestamp(rkm, NULL),
        .bare = item->dlq_bare,
    };

    /* longer than any topic name Kafka takes: the broker refuses it, and
     * the dead letter is sent again and logged each time */
    if (!letter.dlq_topic) letter.dlq_topic = pl->conf->routes[item->route].dlq.topic;
    if (rd_kafka_message_headers(rkm, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) letter.headers = hdrs;
    if (!pl->closing && dd_dlq_send(pl->dlq, &letter, item) == DD_OK) return;
    item->dlq_due_ms = dd_now_ms() + 1000;
    item->next = pl->dlq_retry;
    pl->dlq_retry = item;
}

void dd_pipeline_dlq_cb(void *opaque, rd_kafka_resp_err_t err, void *cb_arg)
{
    dd_pipeline_t *pl = cb_arg;
    dd_item_t *item = opaque;

    if (!err) {
        pthread_mutex_lock(&pl->mu);
        pl->stats.dead_letters[item->reason]++;
        pl->stats.route[item->route].dead_letters[item->reason]++;
        pthread_mutex_unlock(&pl->mu);
        dd_pipeline_finish(pl, item, dd_now_us());
        return;
    }
    /* Not acknowledged: the offset must not move. Send it again later;
     * at once and bare when it was refused as too large, for unchanged it
     * would be refused forever. */
    item->dlq_due_ms = dd_now_ms() + 1000;
    if (dd_dlq_err_too_large(err) && !item->dlq_bare) {
        rd_kafka_message_t *rkm = item->rkm;
        dd_log_msg(DD_LOG_WARN, rd_kafka_topic_name(rkm->rkt), rkm->partition, rkm->offset,
                   item->key_len ? item->key : NULL,
                   "The broker refused the dead letter as too large; sending it again "
                   "without key, payload or original headers.");
        item->dlq_bare = 1;
        item->dlq_due_ms = 0;
    }
    item->next = pl->dlq_retry;
    pl->dlq_retry = item;
}

static void dd_pipeline_resend_dlq(dd_pipeline_t *pl)
{
    dd_item_t *list = pl->dlq_retry, *next;
    int64_t now = dd_now_ms();

    pl->dlq_retry = NULL;
    for (; list; list = next) {
        next = list->next;
        if (list->dlq_due_ms <= now) {
            dd_pipeline_send_dlq(pl, list);
        } else {
            list->next = pl->dlq_retry;
            pl->dlq_retry = list;
        }
    }
}

/* Takes finished items from the lanes; waits up to wait_ms for some. */
void dd_pipeline_drain(dd_pipeline_t *pl, int wait_ms)
{
    dd_item_t *list, *next;
    int64_t now_us;

    list = dd_lanes_take_done(pl->lanes, wait_ms);
    now_us = list ? dd_now_us() : 0;

    for (; list; list = next) {
        next = list->next;
        if (list->outcome == DD_OUT_DLQ) {
            dd_pipeline_log_dlq(pl, list);
            dd_pipeline_send_dlq(pl, list);
        } else
            dd_pipeline_finish(pl, list, now_us);
    }
    if (!pl->dlq) return;
    dd_dlq_poll(pl->dlq, 0);
    if (pl->dlq_retry && !pl->closing) dd_pipeline_resend_dlq(pl);
}

/* A tombstone (a null value) is no business message: skipped (counted,
 * its offset free to move) or dead-lettered `tombstone`, as
 * kafka.tombstones says; never parsed as bad JSON. */
void dd_pipeline_tombstone(dd_pipeline_t *pl, dd_item_t *item)
{
    if (pl->conf->kafka.tombstones != DD_CONF_TOMBSTONES_SKIP) {
        snprintf(item->error, sizeof(item->error), "a tombstone (null value)");
        dd_pipeline_reject(pl, item, DD_REASON_TOMBSTONE);
        return;
    }
    pthread_mutex_lock(&pl->mu);
    pl->stats.route[item->route].tombstones_skipped++;
    pthread_mutex_unlock(&pl->mu);
    dd_pipeline_finish(pl, item, dd_now_us());
}

void dd_pipeline_reject(dd_pipeline_t *pl, dd_item_t *item, dd_reason_t reason)
{
    item->outcome = DD_OUT_DLQ;
    item->reason = reason;
    dd_pipeline_log_dlq(pl, item);
    dd_pipeline_send_dlq(pl, item);
}

/* How long the shutdown waits for the delivery reports of purged dead
 * letters (they come at once: the purge drops them locally). */
#define DD_PIPELINE_PURGE_MS 2000

/* Logs, per partition, the dead letters in list that are given up. */
static void dd_pipeline_log_abandoned(dd_pipeline_t *pl, dd_item_t *list)
{
    for (size_t i = 0; i < dd_offsets_count(pl->offs); i++) {
        dd_ptrack_t *pt = dd_offsets_at(pl->offs, i);
        int64_t n = 0, first = -1;
        for (dd_item_t *item = list; item; item = item->next) {
            if (item->pt != pt || item->epoch != pt->epoch) continue;
            n++;
            if (first < 0 || item->rkm->offset < first) first = item->rkm->offset;
        }
        if (n && pt->assigned)
            dd_log(DD_LOG_WARN,
                   "%s [%d]: %lld dead letter(s) not acknowledged, the first for "
                   "offset %lld; the offset committed stays at %lld at most, so the messages "
                   "from there on are consumed again after a restart.",
                   pt->topic, (int)pt->partition, (long long)n, (long long)first,
                   (long long)pt->next);
    }
}

/* Shutdown, the lanes stopped: gives up on the dead letters not yet
 * acknowledged. Their offsets stay where they are, so the messages come
 * again after a restart. Every item is released here: a message still
 * held would keep the consumer's destroy waiting for it forever. */
void dd_pipeline_abandon_dlq(dd_pipeline_t *pl)
{
    dd_item_t *next;
    int left;

    pl->closing = 1;
    dd_pipeline_drain(pl, 0); /* the lanes' last results; dead letters go to dlq_retry */
    if (pl->dlq && (left = dd_dlq_purge(pl->dlq, DD_PIPELINE_PURGE_MS)) > 0)
        dd_log(DD_LOG_ERROR, "%d dead letter(s) still queued after the purge.", left);
    dd_pipeline_drain(pl, 0);
    if (pl->dlq_retry) dd_pipeline_log_abandoned(pl, pl->dlq_retry);
    for (; pl->dlq_retry; pl->dlq_retry = next) {
        next = pl->dlq_retry->next;
        pl->inflight--;
        pl->abandoned++;
        pl->abandoned_dlq++;
        dd_item_destroy(pl->dlq_retry, pl->pool);
    }
    if (pl->inflight != 0)
        dd_log(DD_LOG_ERROR, "%lld message(s) unaccounted for at shutdown.",
               (long long)pl->inflight);
}
