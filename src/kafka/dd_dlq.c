/*
 * Dead-letter producer (see dd_dlq.h). One producer for the process; each
 * dead letter names its topic (its route's dlq.topic or "<source
 * topic>.dlq").
 *
 * Sizes: librdkafka refuses to queue a record larger than message.max.bytes
 * (key, value, headers and the record's framing), and a refused dead letter
 * would hold its partition's offset forever. So the payload is cut to what
 * fits, leaving DD_DLQ_RECORD_RESERVE for the framing.
 */
#include "dd_dlq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_kafka.h"
#include "dd_log.h"

/* The record's framing within message.max.bytes: its length, attributes,
 * timestamp and offset deltas and the key, value and header-count varints
 * (36 bytes in message format v2), and the record batch header (61), with
 * room to spare. */
#define DD_DLQ_RECORD_RESERVE 512
/* dedupd's own headers at their longest: names, values (an error of 255
 * bytes, a topic of 249, a business key of 255, numbers) and lengths. */
#define DD_DLQ_OWN_HEADERS_MAX 1536
/* Each header costs its name and value plus two varint lengths. */
#define DD_DLQ_HEADER_OVERHEAD 10
#define DD_DLQ_PREFIX "dedupd."

struct dd_dlq_s {
    rd_kafka_t *rk;
    const dd_conf_t *conf;
    dd_dlq_cb_t *cb;
    void *cb_arg;
    size_t max_bytes; /* the producer's message.max.bytes */
};

static void dd_dlq_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkmessage, void *opaque)
{
    dd_dlq_t *dlq = opaque;

    if (rkmessage->err)
        dd_log(DD_LOG_WARN, "Dead letter to %s was not delivered: %s",
               rd_kafka_topic_name(rkmessage->rkt), rd_kafka_err2str(rkmessage->err));
    if (dlq->cb) dlq->cb(rkmessage->_private, rkmessage->err, dlq->cb_arg);
}

/* Consumer-only properties are skipped for the producer (librdkafka would
 * only warn about them, and the log should stay quiet). */
int dd_dlq_consumer_only(const char *prop)
{
    static const char *const names[] = {"session.timeout.ms",
                                        "max.poll.interval.ms",
                                        "heartbeat.interval.ms",
                                        "auto.offset.reset",
                                        "enable.auto.commit",
                                        "auto.commit.interval.ms",
                                        "partition.assignment.strategy",
                                        "group.instance.id",
                                        "fetch.",
                                        "enable.auto.offset.store",
                                        "enable.partition.eof",
                                        "isolation.level",
                                        "queued.",
                                        "coordinator.query.interval.ms",
                                        "check.crcs",
                                        "group.",
                                        "allow.auto.create.topics"};
    for (size_t i = 0; i < DD_ARRAY_LEN(names); i++)
        if (strncmp(prop, names[i], strlen(names[i])) == 0) return 1;
    return 0;
}

/* The effective message.max.bytes, after kafka.properties, and a warning
 * when a payload dedupd accepts may not fit in a dead letter whole. */
static int dd_dlq_read_max_bytes(dd_dlq_t *dlq, rd_kafka_conf_t *kconf, char *errstr,
                                 size_t errstr_size)
{
    char val[32];
    size_t len = sizeof(val), carry;
    int64_t most = 0; /* the largest payload a route accepts */
    const char *which = "dedup.max_payload_bytes";

    if (rd_kafka_conf_get(kconf, "message.max.bytes", val, &len) != RD_KAFKA_CONF_OK) {
        dd_errstr_set(errstr, errstr_size, "dead-letter producer: cannot read message.max.bytes");
        return DD_ERR_FATAL;
    }
    dlq->max_bytes = (size_t)strtoull(val, NULL, 10);
    carry = dlq->max_bytes > DD_DLQ_RECORD_RESERVE + DD_DLQ_OWN_HEADERS_MAX
                ? dlq->max_bytes - DD_DLQ_RECORD_RESERVE - DD_DLQ_OWN_HEADERS_MAX
                : 0;
    for (int r = 0; r < dlq->conf->route_cnt; r++) {
        if (dlq->conf->routes[r].dedup.max_payload_bytes <= most) continue;
        most = dlq->conf->routes[r].dedup.max_payload_bytes;
        if (dlq->conf->has_routes) which = "max_payload_bytes of a route";
    }
    if ((size_t)most > carry)
        dd_log(DD_LOG_WARN,
               "%s (%lld) is more than a dead letter can carry whole: the "
               "dead-letter producer's message.max.bytes is %zu, which leaves %zu bytes for "
               "the payload, less the message's key and headers. Dead letters of larger "
               "payloads carry them truncated (header dedupd.truncated). Raise "
               "message.max.bytes in kafka.properties (and the topic's max.message.bytes) "
               "or lower %s.",
               which, (long long)most, dlq->max_bytes, carry, which);
    return DD_OK;
}

int dd_dlq_new(dd_dlq_t **dlqp, const dd_conf_t *conf, dd_dlq_cb_t *cb, void *cb_arg, char *errstr,
               size_t errstr_size)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    dd_dlq_t *dlq = calloc(1, sizeof(*dlq));
    char err[512];
    int rc = DD_ERR_FATAL;

    *dlqp = NULL;
    if (!dlq) goto fail_nomem;
    dlq->conf = conf;
    dlq->cb = cb;
    dlq->cb_arg = cb_arg;
    /* Defaults kafka.properties may change (how long one send is tried
     * before its delivery report fails and dedupd sends it again), then the
     * user's properties, then what a dead letter always needs: every
     * in-sync replica's acknowledgement. */
    if (dd_conf_kafka_set(kconf, "linger.ms", "5", err, sizeof(err)) ||
        dd_conf_kafka_set(kconf, "message.timeout.ms", "30000", err, sizeof(err)) ||
        dd_conf_kafka_apply(conf, kconf, dd_dlq_consumer_only, err, sizeof(err)) ||
        dd_conf_kafka_set(kconf, "acks", "all", err, sizeof(err))) {
        dd_errstr_set(errstr, errstr_size, "dead-letter producer: %s", err);
        goto fail;
    }
    if (dd_dlq_read_max_bytes(dlq, kconf, errstr, errstr_size)) goto fail;
    rd_kafka_conf_set_dr_msg_cb(kconf, dd_dlq_dr_cb);
    rd_kafka_conf_set_log_cb(kconf, dd_log_rdkafka);
    rd_kafka_conf_set_opaque(kconf, dlq);
    dlq->rk = rd_kafka_new(RD_KAFKA_PRODUCER, kconf, err, sizeof(err));
    if (!dlq->rk) {
        dd_errstr_set(errstr, errstr_size, "dead-letter producer: %s", err);
        goto fail;
    }
    *dlqp = dlq;
    return DD_OK;
fail_nomem:
    dd_errstr_set(errstr, errstr_size, "out of memory");
    rc = DD_ERR_NOMEM;
fail:
    rd_kafka_conf_destroy(kconf);
    free(dlq);
    return rc;
}

/* The bytes headers take in a record (an upper bound). */
static size_t dd_dlq_headers_size(const rd_kafka_headers_t *hdrs)
{
    const char *name;
    const void *val;
    size_t size, total = 0;

    for (size_t i = 0; hdrs && !rd_kafka_header_get_all(hdrs, i, &name, &val, &size); i++)
        total += strlen(name) + size + DD_DLQ_HEADER_OVERHEAD;
    return total;
}

#define DD_DLQ_HEADER_NAME(id, name, help) name,
const char *const dd_dlq_header_names[DD_DLQ_H_COUNT] = {DD_DLQ_HEADER_TABLE(DD_DLQ_HEADER_NAME)};
#undef DD_DLQ_HEADER_NAME
#define DD_DLQ_HEADER_HELP(id, name, help) help,
const char *const dd_dlq_header_helps[DD_DLQ_H_COUNT] = {DD_DLQ_HEADER_TABLE(DD_DLQ_HEADER_HELP)};
#undef DD_DLQ_HEADER_HELP

#define DD_DLQ_CONNECT "__connect.errors."

/* 1 for a header of ours: dedupd.*, and Kafka Connect's when we write them. */
static int dd_dlq_own_header(const dd_dlq_t *dlq, const char *name)
{
    return strncmp(name, DD_DLQ_PREFIX, strlen(DD_DLQ_PREFIX)) == 0 ||
           (dlq->conf->dlq_connect_headers &&
            strncmp(name, DD_DLQ_CONNECT, strlen(DD_DLQ_CONNECT)) == 0);
}

/* Kafka Connect's stage of a reason: the message could not be read
 * (VALUE_CONVERTER) or the sink could not apply it (TASK_PUT). */
static const char *dd_dlq_connect_stage(const char *reason)
{
    static const char *const read[] = {"bad_json",      "key_missing",       "key_too_long",
                                       "tombstone",     "payload_too_large", "shard_key_invalid",
                                       "shard_unmapped"};
    for (size_t i = 0; i < DD_ARRAY_LEN(read); i++)
        if (!strcmp(reason, read[i])) return "VALUE_CONVERTER";
    return "TASK_PUT";
}

/* Kafka Connect's names for what dedupd.* says (dlq.connect_headers). */
static void dd_dlq_connect_headers(const dd_dlq_t *dlq, const dd_dlq_letter_t *l,
                                   rd_kafka_headers_t *hdrs)
{
    char num[32], cls[64];

    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "topic", -1, l->topic, -1);
    snprintf(num, sizeof(num), "%d", (int)l->partition);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "partition", -1, num, -1);
    snprintf(num, sizeof(num), "%lld", (long long)l->offset);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "offset", -1, num, -1);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "connector.name", -1, dlq->conf->kafka.group, -1);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "task.id", -1, "0", -1);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "stage", -1, dd_dlq_connect_stage(l->reason), -1);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "class.name", -1, "dedupd", -1);
    snprintf(cls, sizeof(cls), "dedupd.%s", l->reason);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "exception.class.name", -1, cls, -1);
    rd_kafka_header_add(hdrs, DD_DLQ_CONNECT "exception.message", -1, l->error ? l->error : "", -1);
}

/* The dead letter's headers: the original message's (unless bare), except
 * those of ours (dd_dlq_own_header), so that each of ours appears once and
 * is this dead-lettering's; then ours. */
static rd_kafka_headers_t *dd_dlq_headers(const dd_dlq_t *dlq, const dd_dlq_letter_t *l, int bare)
{
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(8);
    const char *name;
    const void *val;
    size_t size;
    char num[32];

    for (size_t i = 0;
         !bare && l->headers && !rd_kafka_header_get_all(l->headers, i, &name, &val, &size); i++)
        if (!dd_dlq_own_header(dlq, name)) rd_kafka_header_add(hdrs, name, -1, val, (ssize_t)size);
    rd_kafka_header_add(hdrs, dd_dlq_header_names[DD_DLQ_H_REASON], -1, l->reason, -1);
    rd_kafka_header_add(hdrs, dd_dlq_header_names[DD_DLQ_H_ERROR], -1, l->error ? l->error : "",
                        -1);
    rd_kafka_header_add(hdrs, dd_dlq_header_names[DD_DLQ_H_TOPIC], -1, l->topic, -1);
    snprintf(num, sizeof(num), "%d", (int)l->partition);
    rd_kafka_header_add(hdrs, dd_dlq_header_names[DD_DLQ_H_PARTITION], -1, num, -1);
    snprintf(num, sizeof(num), "%lld", (long long)l->offset);
    rd_kafka_header_add(hdrs, dd_dlq_header_names[DD_DLQ_H_OFFSET], -1, num, -1);
    if (l->biz_key)
        rd_kafka_header_add(hdrs, dd_dlq_header_names[DD_DLQ_H_BIZ_KEY], -1, l->biz_key, -1);
    if (dlq->conf->dlq_connect_headers) dd_dlq_connect_headers(dlq, l, hdrs);
    return hdrs;
}

/* The headers of l and how much of its payload fits beside them and the
 * key: all of it, or a prefix and a dedupd.truncated header with the
 * original length. *bare is set when not even the key and headers fit:
 * the bare form carries dedupd's headers only. */
static rd_kafka_headers_t *dd_dlq_fit(const dd_dlq_t *dlq, const dd_dlq_letter_t *l, int *bare,
                                      size_t *payload_len)
{
    rd_kafka_headers_t *hdrs = dd_dlq_headers(dlq, l, *bare);
    size_t used = dd_dlq_headers_size(hdrs) + DD_DLQ_RECORD_RESERVE, trunc;
    char num[32];

    if (!*bare) used += l->key_len;
    *payload_len = l->payload_len;
    if (!*bare && used + l->payload_len <= dlq->max_bytes) return hdrs;
    snprintf(num, sizeof(num), "%zu", l->payload_len);
    trunc = strlen(dd_dlq_header_names[DD_DLQ_H_TRUNCATED]) + strlen(num) + DD_DLQ_HEADER_OVERHEAD;
    if (!*bare && used + trunc >= dlq->max_bytes) {
        rd_kafka_headers_destroy(hdrs);
        *bare = 1;
        return dd_dlq_fit(dlq, l, bare, payload_len);
    }
    *payload_len = *bare ? 0 : dlq->max_bytes - used - trunc;
    if (*payload_len < l->payload_len)
        rd_kafka_header_add(hdrs, dd_dlq_header_names[DD_DLQ_H_TRUNCATED], -1, num, -1);
    else
        *payload_len = l->payload_len;
    return hdrs;
}

int dd_dlq_err_too_large(rd_kafka_resp_err_t err)
{
    return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
           err == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE;
}

int dd_dlq_send(dd_dlq_t *dlq, const dd_dlq_letter_t *l, void *opaque)
{
    const char *topic = l->dlq_topic;
    rd_kafka_resp_err_t err;
    int bare = l->bare;

    for (int tries = 0;; tries++) {
        size_t payload_len;
        rd_kafka_headers_t *hdrs = dd_dlq_fit(dlq, l, &bare, &payload_len);
        err = rd_kafka_producev(dlq->rk, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_KEY(bare ? NULL : l->key, bare ? 0 : l->key_len),
                                RD_KAFKA_V_VALUE(bare ? NULL : (void *)l->payload, payload_len),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
                                RD_KAFKA_V_TIMESTAMP(l->timestamp_ms > 0 ? l->timestamp_ms : 0),
                                RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
        if (!err) return DD_OK;
        rd_kafka_headers_destroy(hdrs);
        if (dd_dlq_err_too_large(err) && !bare) {
            /* The size estimate fell short: the bare form is small. */
            dd_log(DD_LOG_WARN,
                   "Dead letter for %s [%d] @%lld is too large to queue (%s); "
                   "sending it with dedupd's headers only.",
                   l->topic, (int)l->partition, (long long)l->offset, rd_kafka_err2str(err));
            bare = 1;
            continue;
        }
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || tries > 100) {
            dd_log(DD_LOG_WARN, "Cannot queue dead letter for %s [%d] @%lld: %s", l->topic,
                   (int)l->partition, (long long)l->offset, rd_kafka_err2str(err));
            return DD_ERR_RETRIABLE;
        }
        /* Delivery reports are served by the polling thread only, so
         * callers on other threads just wait for the queue to drain. */
        dd_sleep_ms(10, NULL);
    }
}

void dd_dlq_poll(dd_dlq_t *dlq, int timeout_ms)
{
    rd_kafka_poll(dlq->rk, timeout_ms);
}

int dd_dlq_flush(dd_dlq_t *dlq, int timeout_ms)
{
    rd_kafka_flush(dlq->rk, timeout_ms);
    return rd_kafka_outq_len(dlq->rk);
}

int dd_dlq_pending(dd_dlq_t *dlq)
{
    return rd_kafka_outq_len(dlq->rk);
}

/* rd_kafka_purge() waits for the broker threads to drop their queues and
 * in-flight requests; the delivery reports (ERR__PURGE_QUEUE, ..INFLIGHT)
 * are then served by the flush. A purged in-flight letter may still have
 * reached the topic: dead letters are at least once. */
int dd_dlq_purge(dd_dlq_t *dlq, int timeout_ms)
{
    rd_kafka_resp_err_t err =
        rd_kafka_purge(dlq->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);

    if (err) dd_log(DD_LOG_WARN, "Purging the dead-letter queue: %s", rd_kafka_err2str(err));
    return dd_dlq_flush(dlq, timeout_ms);
}

void dd_dlq_destroy(dd_dlq_t *dlq)
{
    if (!dlq) return;
    dlq->cb = NULL; /* the owners of pending opaques are gone */
    if (dlq->rk) {
        /* Nothing is waited for: every letter's owner was released (see
         * dd_dlq_purge). */
        rd_kafka_purge(dlq->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_flush(dlq->rk, 500);
        if (!dd_kafka_destroy_within(dlq->rk, 0, 1000))
            dd_log(DD_LOG_WARN, "The dead-letter producer was not destroyed within 1000 ms "
                                "(brokers not answering): going on without waiting for it.");
    }
    free(dlq);
}
