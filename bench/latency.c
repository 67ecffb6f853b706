/*
 * bench-latency: a paced producer and the test bed's floor, for
 * `scripts/bench --latency` (BENCHMARKS.md, "Latency under a steady load").
 *
 * One thread produces payment callbacks at a fixed rate for a fixed time,
 * each stamped with its send time ("sent_us" in the payload, microseconds
 * since the epoch); a share of them (-c) are redelivered copies of a recent
 * payment, byte for byte, with the header "bench.copy". Meanwhile the main
 * thread is the floor: a consumer in a group of its own that only reads the
 * messages and notes, for every first copy, how long after its send it was
 * polled. dedupd consumes the same topic at the same time in its own group,
 * so both see the same stream under the same load.
 *
 *   bench-latency -b BROKERS -t TOPIC -r RATE -d SECONDS [-c COPIES]
 *                 [-w FETCH_WAIT_MS] [-W WARMUP_S] [-g GROUP] [-L LINGER_MS]
 *
 * Prints one line: measure_from_us (the first send time that counts: the
 * warm-up's messages, sent while the consumers settle, do not), what was
 * produced and the floor's p50/p99/max in milliseconds.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#define LAT_RING 4096 /* recent payments a copy is taken from */
#define LAT_MERCHANTS 50
#define LAT_PARTS_MAX 256

typedef struct {
    const char *brokers, *topic, *group;
    long rate, seconds, warmup_s, fetch_wait_ms, linger_ms;
    double copies;
    int parts;
    volatile int done; /* the producer has flushed its last message */
    long originals;    /* first copies produced after the warm-up */
    long payments;     /* first copies produced in all */
    long produced;
    int64_t measure_from_us;
    double send_late_max_ms; /* how far the producer fell behind its pace */
} lat_t;

static int64_t lat_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void lat_die(const char *what, const char *why)
{
    fprintf(stderr, "bench-latency: %s: %s\n", what, why);
    exit(1);
}

static rd_kafka_t *lat_client(rd_kafka_type_t type, const lat_t *l)
{
    char err[512], wait[32], linger[32];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_t *rk;

    snprintf(wait, sizeof(wait), "%ld", l->fetch_wait_ms);
    snprintf(linger, sizeof(linger), "%ld", l->linger_ms);
    if (rd_kafka_conf_set(c, "bootstrap.servers", l->brokers, err, sizeof(err)) ||
        (type == RD_KAFKA_PRODUCER &&
         rd_kafka_conf_set(c, "linger.ms", linger, err, sizeof(err))) ||
        (type == RD_KAFKA_CONSUMER &&
         (rd_kafka_conf_set(c, "group.id", l->group, err, sizeof(err)) ||
          rd_kafka_conf_set(c, "auto.offset.reset", "earliest", err, sizeof(err)) ||
          rd_kafka_conf_set(c, "fetch.wait.max.ms", wait, err, sizeof(err)))))
        lat_die("configuration", err);
    rk = rd_kafka_new(type, c, err, sizeof(err));
    if (!rk) lat_die("client", err);
    return rk;
}

static int lat_partitions(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    int n = 0;

    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (md->topic_cnt == 1) n = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(rkt);
    if (n <= 0 || n > LAT_PARTS_MAX) lat_die(topic, "no such topic, or too many partitions");
    return n;
}

/* Payment number seq's payload (about 220 bytes), stamped with sent_us. */
static int lat_payload(char *out, size_t size, long seq, int64_t sent_us)
{
    return snprintf(
        out, size,
        "{\"merchant_id\": \"m%03ld\", \"order_no\": \"L%09ld\", \"amount\": %ld.%02ld, "
        "\"currency\": \"CNY\", \"status\": \"PAID\", \"channel\": \"alipay\", "
        "\"payer\": {\"id\": \"u%06ld\", \"bank\": \"ICBC\"}, \"txn_id\": "
        "\"T%012ld\", \"sent_us\": %" PRId64 "}",
        seq % LAT_MERCHANTS, seq, 1 + seq % 997, seq % 100, seq % 999983, seq, sent_us);
}

static void lat_send(rd_kafka_t *rk, const lat_t *l, int part, const char *payload, int len,
                     int copy)
{
    rd_kafka_resp_err_t err;
    do {
        rd_kafka_headers_t *hdrs = rd_kafka_headers_new(1);
        if (copy) rd_kafka_header_add(hdrs, "bench.copy", -1, "1", 1);
        err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(l->topic), RD_KAFKA_V_PARTITION(part),
                                RD_KAFKA_V_VALUE((void *)payload, (size_t)len),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
                                RD_KAFKA_V_END);
        if (err) rd_kafka_headers_destroy(hdrs); /* on success the message owns them */
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) rd_kafka_poll(rk, 10);
    } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    if (err) lat_die("produce", rd_kafka_err2str(err));
}

typedef struct {
    long seq;
    int64_t sent_us;
} lat_sent_t;

/* Sends the messages due by now: first copies, and with probability
 * l->copies a copy of one of the last LAT_RING payments. */
static void lat_send_due(rd_kafka_t *rk, lat_t *l, int64_t t0, long *seq, lat_sent_t *ring,
                         unsigned *rnd)
{
    char payload[512];
    int64_t now = lat_now_us(), from = t0 + l->warmup_s * 1000000;
    long due = (long)((now - t0) * l->rate / 1000000);

    for (; l->produced < due; l->produced++) {
        int64_t planned = t0 + (int64_t)l->produced * 1000000 / l->rate;
        int copy = *seq > 0 && (double)rand_r(rnd) / RAND_MAX < l->copies;
        lat_sent_t m = {*seq, now};
        if (now >= from && (double)(now - planned) / 1000.0 > l->send_late_max_ms)
            l->send_late_max_ms = (double)(now - planned) / 1000.0;
        if (copy) m = ring[(size_t)rand_r(rnd) % (size_t)(*seq < LAT_RING ? *seq : LAT_RING)];
        int len = lat_payload(payload, sizeof(payload), m.seq, m.sent_us);
        lat_send(rk, l,
                 copy ? (int)((size_t)rand_r(rnd) % (size_t)l->parts) : (int)(m.seq % l->parts),
                 payload, len, copy);
        if (copy) continue;
        ring[*seq % LAT_RING] = m;
        (*seq)++;
        l->payments++;
        if (now >= from) l->originals++;
    }
}

static void *lat_produce(void *arg)
{
    lat_t *l = arg;
    rd_kafka_t *rk = lat_client(RD_KAFKA_PRODUCER, l);
    lat_sent_t *ring = calloc(LAT_RING, sizeof(*ring));
    int64_t t0, end;
    long seq = 0;
    unsigned rnd = 42;

    if (!ring) lat_die("produce", "out of memory");
    l->parts = lat_partitions(rk, l->topic);
    t0 = lat_now_us();
    l->measure_from_us = t0 + l->warmup_s * 1000000;
    end = l->measure_from_us + l->seconds * 1000000;
    while (lat_now_us() < end) {
        lat_send_due(rk, l, t0, &seq, ring, &rnd);
        rd_kafka_poll(rk, 0);
        usleep(500);
    }
    if (rd_kafka_flush(rk, 30000)) lat_die("produce", "messages not delivered in 30 s");
    rd_kafka_destroy(rk);
    free(ring);
    l->done = 1;
    return NULL;
}

static int lat_is_copy(const rd_kafka_message_t *rkm)
{
    rd_kafka_headers_t *hdrs;
    const void *v;
    size_t n;
    return !rd_kafka_message_headers(rkm, &hdrs) &&
           !rd_kafka_header_get_last(hdrs, "bench.copy", &v, &n);
}

/* The send time in a payload (its "sent_us" field), or -1. */
static int64_t lat_sent_us(const rd_kafka_message_t *rkm)
{
    char text[512];
    size_t n = rkm->len < sizeof(text) - 1 ? rkm->len : sizeof(text) - 1;
    const char *f;
    memcpy(text, rkm->payload, n);
    text[n] = '\0';
    f = strstr(text, "\"sent_us\": ");
    return f ? strtoll(f + 11, NULL, 10) : -1;
}

static int lat_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The floor: polls until every first copy sent after the warm-up has been
 * read (or 30 s after the producer finished); their latencies in *out. */
static size_t lat_floor(lat_t *l, rd_kafka_t *rk, int64_t **out)
{
    size_t n = 0, cap = (size_t)(l->rate * (l->seconds + l->warmup_s + 1)) + 16;
    int64_t *lat = malloc(cap * sizeof(*lat)), give_up = 0;

    if (!lat) lat_die("floor", "out of memory");
    while (!l->done || (long)n < l->originals) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 100);
        int64_t now = lat_now_us(), sent;
        if (l->done && !give_up) give_up = now + 30000000;
        if (give_up && now > give_up) break;
        if (!rkm) continue;
        if (!rkm->err && !lat_is_copy(rkm) && (sent = lat_sent_us(rkm)) >= l->measure_from_us &&
            l->measure_from_us && n < cap)
            lat[n++] = now - sent;
        rd_kafka_message_destroy(rkm);
    }
    *out = lat;
    return n;
}

/* Polls until the group has given the floor its partitions (at most 30 s),
 * so the measured part does not include its join. */
static void lat_wait_assigned(rd_kafka_t *rk)
{
    int64_t until = lat_now_us() + 30000000;
    while (lat_now_us() < until) {
        rd_kafka_topic_partition_list_t *parts = NULL;
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 100);
        int cnt = 0;
        if (rkm) rd_kafka_message_destroy(rkm);
        if (!rd_kafka_assignment(rk, &parts)) cnt = parts->cnt;
        if (parts) rd_kafka_topic_partition_list_destroy(parts);
        if (cnt) return;
    }
    lat_die("floor", "no partitions assigned in 30 s");
}

static double lat_pct_ms(const int64_t *v, size_t n, int pct)
{
    size_t i = n * (size_t)pct / 100;
    return n ? (double)v[i < n ? i : n - 1] / 1000.0 : -1;
}

int main(int argc, char **argv)
{
    lat_t l = {.group = "bench-latency-floor",
               .copies = 0.3,
               .warmup_s = 2,
               .fetch_wait_ms = 500,
               .linger_ms = 5};
    rd_kafka_topic_partition_list_t *topics;
    pthread_t producer;
    rd_kafka_t *rk;
    int64_t *lat;
    size_t n;
    int opt;

    while ((opt = getopt(argc, argv, "b:t:r:d:c:w:W:g:L:")) != -1) {
        switch (opt) {
        case 'b':
            l.brokers = optarg;
            break;
        case 't':
            l.topic = optarg;
            break;
        case 'r':
            l.rate = atol(optarg);
            break;
        case 'd':
            l.seconds = atol(optarg);
            break;
        case 'c':
            l.copies = atof(optarg);
            break;
        case 'w':
            l.fetch_wait_ms = atol(optarg);
            break;
        case 'W':
            l.warmup_s = atol(optarg);
            break;
        case 'g':
            l.group = optarg;
            break;
        case 'L':
            l.linger_ms = atol(optarg);
            break;
        default:
            l.brokers = NULL;
            break;
        }
    }
    if (!l.brokers || !l.topic || l.rate <= 0 || l.seconds <= 0) {
        fprintf(stderr, "usage: bench-latency -b BROKERS -t TOPIC -r RATE -d SECONDS [-c COPIES]"
                        " [-w FETCH_WAIT_MS] [-W WARMUP_S] [-g GROUP] [-L LINGER_MS]\n");
        return 2;
    }
    rk = lat_client(RD_KAFKA_CONSUMER, &l);
    rd_kafka_poll_set_consumer(rk);
    topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, l.topic, RD_KAFKA_PARTITION_UA);
    if (rd_kafka_subscribe(rk, topics)) lat_die("subscribe", l.topic);
    rd_kafka_topic_partition_list_destroy(topics);
    lat_wait_assigned(rk);
    if (pthread_create(&producer, NULL, lat_produce, &l)) lat_die("producer", "no thread");
    n = lat_floor(&l, rk, &lat);
    pthread_join(producer, NULL);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    qsort(lat, n, sizeof(*lat), lat_cmp);
    printf("measure_from_us=%" PRId64 " produced=%ld payments=%ld originals=%ld floor_n=%zu "
           "floor_p50_ms=%.1f floor_p99_ms=%.1f floor_max_ms=%.1f send_late_max_ms=%.1f\n",
           l.measure_from_us, l.produced, l.payments, l.originals, n, lat_pct_ms(lat, n, 50),
           lat_pct_ms(lat, n, 99), n ? (double)lat[n - 1] / 1000.0 : -1, l.send_late_max_ms);
    free(lat);
    return (long)n == l.originals ? 0 : 1;
}
