/*
 * Dead-letter producer (see dd_dlq.h). One producer for the process; the
 * destination topic follows dlq.topic or "<source topic>.dlq".
 */
#include "dd_dlq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"

struct dd_dlq_s {
    rd_kafka_t *rk;
    const dd_conf_t *conf;
    dd_dlq_cb_t *cb;
    void *cb_arg;
};

static void dd_dlq_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkmessage, void *opaque)
{
    dd_dlq_t *dlq = opaque;

    if (rkmessage->err)
        dd_log(DD_LOG_WARN, "Dead letter to %s was not delivered: %s",
               rd_kafka_topic_name(rkmessage->rkt), rd_kafka_err2str(rkmessage->err));
    if (dlq->cb)
        dlq->cb(rkmessage->_private, rkmessage->err, dlq->cb_arg);
}

/* Consumer-only properties are skipped for the producer (librdkafka would
 * only warn about them, and the log should stay quiet). */
static int dd_dlq_consumer_only(const char *prop)
{
    static const char *const names[] = {
        "session.timeout.ms", "max.poll.interval.ms", "heartbeat.interval.ms",
        "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
        "partition.assignment.strategy", "group.instance.id", "fetch.",
        "enable.auto.offset.store", "enable.partition.eof", "isolation.level",
        "queued.", "coordinator.query.interval.ms", "check.crcs", "group.",
        "allow.auto.create.topics"};
    for (size_t i = 0; i < DD_ARRAY_LEN(names); i++)
        if (strncmp(prop, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

int dd_dlq_new(dd_dlq_t **dlqp, const dd_conf_t *conf, dd_dlq_cb_t *cb, void *cb_arg,
               char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *kconf = rd_kafka_conf_new();
    dd_dlq_t *dlq = calloc(1, sizeof(*dlq));
    char err[512];

    *dlqp = NULL;
    if (!dlq)
        goto fail_nomem;
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
fail:
    rd_kafka_conf_destroy(kconf);
    free(dlq);
    return DD_ERR_FATAL;
}

static rd_kafka_headers_t *dd_dlq_headers(const dd_dlq_letter_t *l)
{
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(6);
    char num[32];

    rd_kafka_header_add(hdrs, "dedupd.reason", -1, l->reason, -1);
    rd_kafka_header_add(hdrs, "dedupd.error", -1, l->error ? l->error : "", -1);
    rd_kafka_header_add(hdrs, "dedupd.topic", -1, l->topic, -1);
    snprintf(num, sizeof(num), "%d", (int)l->partition);
    rd_kafka_header_add(hdrs, "dedupd.partition", -1, num, -1);
    snprintf(num, sizeof(num), "%lld", (long long)l->offset);
    rd_kafka_header_add(hdrs, "dedupd.offset", -1, num, -1);
    if (l->biz_key)
        rd_kafka_header_add(hdrs, "dedupd.biz_key", -1, l->biz_key, -1);
    return hdrs;
}

int dd_dlq_send(dd_dlq_t *dlq, const dd_dlq_letter_t *l, void *opaque)
{
    char topic[512];
    rd_kafka_resp_err_t err;

    dd_conf_dlq_topic(dlq->conf, l->topic, topic, sizeof(topic));
    for (int tries = 0;; tries++) {
        rd_kafka_headers_t *hdrs = dd_dlq_headers(l);
        err = rd_kafka_producev(dlq->rk, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_KEY(l->key, l->key_len),
                                RD_KAFKA_V_VALUE((void *)l->payload, l->payload_len),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(opaque),
                                RD_KAFKA_V_END);
        if (!err)
            return DD_OK;
        rd_kafka_headers_destroy(hdrs);
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

void dd_dlq_destroy(dd_dlq_t *dlq)
{
    if (!dlq)
        return;
    dlq->cb = NULL; /* the owners of pending opaques are gone */
    if (dlq->rk) {
        rd_kafka_flush(dlq->rk, 5000);
        rd_kafka_destroy(dlq->rk);
    }
    free(dlq);
}
