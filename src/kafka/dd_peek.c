/*
 * Message fingerprints, and the client that reads a message at an offset
 * again (see dd_peek.h for why). The reads of one assignment go out
 * together: every partition asked is assigned at its offset on one client,
 * and each is paused as soon as its first message (or its end) arrives, so
 * the fetch brings little more than the messages asked for.
 */
#include "dd_peek.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_hash.h"
#include "dd_kafka.h"
#include "dd_text.h"

static void dd_peek_len(unsigned char out[8], const void *p, size_t len)
{
    uint64_t v = p ? (uint64_t)len : UINT64_MAX;

    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (unsigned char)(v & 0xff);
}

int dd_peek_fingerprint_of(int64_t timestamp, const void *key, size_t key_len, const void *value,
                           size_t value_len, dd_peek_fp_t *fp)
{
    unsigned char klen[8], vlen[8];
    const void *parts[4] = {klen, key, vlen, value};
    size_t lens[4] = {8, key ? key_len : 0, 8, value ? value_len : 0};

    dd_peek_len(klen, key, key_len);
    dd_peek_len(vlen, value, value_len);
    fp->timestamp = timestamp;
    return dd_hash_bytes(parts, lens, 4, fp->digest);
}

int dd_peek_fingerprint(const rd_kafka_message_t *rkm, dd_peek_fp_t *fp)
{
    return dd_peek_fingerprint_of(rd_kafka_message_timestamp(rkm, NULL), rkm->key, rkm->key_len,
                                  rkm->payload, rkm->len, fp);
}

int dd_peek_fp_equal(const dd_peek_fp_t *a, const dd_peek_fp_t *b)
{
    return a->timestamp == b->timestamp && memcmp(a->digest, b->digest, DD_PEEK_DIGEST_LEN) == 0;
}

void dd_peek_fp_text(const dd_peek_fp_t *fp, char *out, size_t out_size)
{
    char hex[17];

    dd_text_hex(hex, fp->digest, 8, 0);
    hex[16] = '\0';
    snprintf(out, out_size, "timestamp %lld, digest %s...", (long long)fp->timestamp, hex);
}

int dd_peek_new(rd_kafka_t **rkp, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    /* The live group's id, which this client never joins nor commits for
     * (a consumer needs one to be assigned partitions; ACLs that let dedupd
     * use its group allow it). */
    static const char *const extra[][2] = {
        {"enable.partition.eof", "true"},
        {"auto.offset.reset", "error"},
        {"max.partition.fetch.bytes", "65536"},
        {"queued.min.messages", "1"},
    };

    return dd_kafka_reader_new_with(rkp, conf, conf->kafka.group, extra, DD_ARRAY_LEN(extra),
                                    errstr, errstr_size);
}

static dd_peek_t *dd_peek_find(dd_peek_t *reqs, int cnt, const rd_kafka_message_t *rkm)
{
    const char *topic = rkm->rkt ? rd_kafka_topic_name(rkm->rkt) : NULL;

    for (int i = 0; topic && i < cnt; i++)
        if (reqs[i].partition == rkm->partition && strcmp(reqs[i].topic, topic) == 0)
            return &reqs[i];
    return NULL;
}

/* What rkm says of req: 1 when req is settled. */
static int dd_peek_take(dd_peek_t *req, const rd_kafka_message_t *rkm)
{
    if (rkm->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        req->status = DD_PEEK_ABSENT;
        req->found = -1;
        return 1;
    }
    if (rkm->err) {
        /* An offset out of range is final; anything else librdkafka
         * retries on its own, so wait for it until the deadline. */
        snprintf(req->why, sizeof(req->why), "%s", rd_kafka_message_errstr(rkm));
        return rkm->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
               rkm->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE;
    }
    if (rkm->offset < req->offset) return 0;
    if (rkm->offset > req->offset) {
        req->status = DD_PEEK_ABSENT;
        req->found = rkm->offset;
    } else if (dd_peek_fingerprint(rkm, &req->fp) == 0) {
        req->status = DD_PEEK_READ;
    } else {
        snprintf(req->why, sizeof(req->why), "out of memory");
    }
    return 1;
}

static void dd_peek_pause(rd_kafka_t *rk, const dd_peek_t *req)
{
    rd_kafka_topic_partition_list_t *one = rd_kafka_topic_partition_list_new(1);

    rd_kafka_topic_partition_list_add(one, req->topic, req->partition);
    rd_kafka_pause_partitions(rk, one);
    rd_kafka_topic_partition_list_destroy(one);
}

/* Polls until every request is settled or the deadline. */
static void dd_peek_poll(rd_kafka_t *rk, dd_peek_t *reqs, int cnt, unsigned char *settled,
                         int64_t deadline)
{
    int left = cnt;

    while (left > 0) {
        int64_t wait = deadline - dd_now_ms();
        rd_kafka_message_t *rkm;
        dd_peek_t *req;

        if (wait <= 0) break;
        if (!(rkm = rd_kafka_consumer_poll(rk, (int)(wait < 100 ? wait : 100)))) continue;
        req = dd_peek_find(reqs, cnt, rkm);
        if (req && !settled[req - reqs] && dd_peek_take(req, rkm)) {
            settled[req - reqs] = 1;
            left--;
            dd_peek_pause(rk, req);
        }
        rd_kafka_message_destroy(rkm);
    }
}

void dd_peek_read(rd_kafka_t *rk, dd_peek_t *reqs, int cnt, int timeout_ms)
{
    rd_kafka_topic_partition_list_t *list;
    unsigned char *settled = calloc((size_t)cnt + 1, 1);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;

    for (int i = 0; i < cnt; i++) {
        reqs[i].status = DD_PEEK_UNREAD;
        reqs[i].found = -1;
        snprintf(reqs[i].why, sizeof(reqs[i].why),
                 rk ? "no answer within %d ms" : "no client to read it with", timeout_ms);
    }
    if (!rk || !cnt || !settled) {
        free(settled);
        return;
    }
    list = rd_kafka_topic_partition_list_new(cnt);
    for (int i = 0; i < cnt; i++)
        rd_kafka_topic_partition_list_add(list, reqs[i].topic, reqs[i].partition)->offset =
            reqs[i].offset;
    if ((err = rd_kafka_assign(rk, list)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < cnt; i++)
            snprintf(reqs[i].why, sizeof(reqs[i].why), "%s", rd_kafka_err2str(err));
    } else {
        rd_kafka_resume_partitions(rk, list); /* paused by an earlier read */
        dd_peek_poll(rk, reqs, cnt, settled, dd_now_ms() + timeout_ms);
        rd_kafka_assign(rk, NULL);
    }
    rd_kafka_topic_partition_list_destroy(list);
    free(settled);
}
