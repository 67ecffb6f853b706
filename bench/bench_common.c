/*
 * Shared plumbing of the bench baselines (see bench_common.h).
 */
#include "bench_common.h"

#include "dd_common.h"
#include "dd_conf.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void bench_args(int argc, char **argv, bench_opts_t *o, const char *usage)
{
    int c;

    memset(o, 0, sizeof(*o));
    o->key = "pay:${merchant_id}:${order_no}";
    o->batch = 1000;
    while ((c = getopt(argc, argv, "b:t:S:D:k:n:m:p:H:")) != -1) {
        switch (c) {
        case 'b':
            o->brokers = optarg;
            break;
        case 't':
            o->topic = optarg;
            break;
        case 'S':
            o->socket = optarg;
            break;
        case 'D':
            o->database = optarg;
            break;
        case 'k':
            o->key = optarg;
            break;
        case 'n':
            o->batch = atol(optarg);
            break;
        case 'm':
            o->limit = atol(optarg);
            break;
        case 'H':
            o->handler = optarg;
            break;
        case 'p':
            if (o->nprops == BENCH_MAX_PROPS || !strchr(optarg, '=')) {
                fprintf(stderr, "%s: -p wants NAME=VALUE, at most %d of them\n", argv[0],
                        BENCH_MAX_PROPS);
                exit(2);
            }
            o->props[o->nprops++] = optarg;
            break;
        default:
            fprintf(stderr, "usage: %s\n", usage);
            exit(2);
        }
    }
    if (!o->brokers || !o->topic || !o->socket || !o->database || o->batch < 1) {
        fprintf(stderr, "usage: %s\n", usage);
        exit(2);
    }
}

int64_t bench_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int bench_src_partitions(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    int n = -1;

    if (!rd_kafka_metadata(rk, 0, rkt, &md, 10000) && md->topic_cnt == 1 && !md->topics[0].err)
        n = md->topics[0].partition_cnt;
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return n;
}

int bench_src_open(bench_src_t *src, const bench_opts_t *o)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *parts;
    char err[512];
    int rc;

    memset(src, 0, sizeof(*src));
    rc = rd_kafka_conf_set(conf, "bootstrap.servers", o->brokers, err, sizeof(err)) ||
         rd_kafka_conf_set(conf, "group.id", "bench-baseline", err, sizeof(err)) ||
         rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err)) ||
         rd_kafka_conf_set(conf, "enable.partition.eof", "true", err, sizeof(err));
    for (int i = 0; !rc && i < o->nprops; i++)
        rc = dd_conf_kafka_set_prop(conf, o->props[i], err, sizeof(err)) != DD_OK;
    if (rc) {
        fprintf(stderr, "bench: %s\n", err);
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    src->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    if (!src->rk) {
        fprintf(stderr, "bench: %s\n", err);
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_poll_set_consumer(src->rk);
    src->parts = bench_src_partitions(src->rk, o->topic);
    if (src->parts < 1) {
        fprintf(stderr, "bench: no metadata for topic %s\n", o->topic);
        return -1;
    }
    parts = rd_kafka_topic_partition_list_new(src->parts);
    for (int i = 0; i < src->parts; i++)
        rd_kafka_topic_partition_list_add(parts, o->topic, i)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(src->rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    return 0;
}

rd_kafka_message_t *bench_src_next(bench_src_t *src, const bench_opts_t *o)
{
    while (src->eofs < src->parts && (!o->limit || src->messages < o->limit)) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(src->rk, 1000);
        if (!rkm) continue;
        if (rkm->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            src->eofs++;
        } else if (rkm->err) {
            fprintf(stderr, "bench: consumer: %s\n", rd_kafka_message_errstr(rkm));
        } else {
            if (!src->messages++) src->t_first_us = bench_now_us();
            return rkm;
        }
        rd_kafka_message_destroy(rkm);
    }
    return NULL;
}

void bench_src_close(bench_src_t *src)
{
    if (!src->rk) return;
    rd_kafka_consumer_close(src->rk);
    rd_kafka_destroy(src->rk);
    src->rk = NULL;
}

int bench_key(dd_json_doc_t *doc, const dd_key_tmpl_t *tmpl, const rd_kafka_message_t *rkm,
              cJSON **json, char key[DD_KEY_MAX + 1], size_t *key_len)
{
    char why[256];

    *json = NULL;
    if (dd_json_parse(doc, rkm->payload, rkm->len, why, sizeof(why)) != 0 ||
        dd_key_render(tmpl, doc, key, key_len, why, sizeof(why)) != DD_KEY_OK)
        return -1;
    *json = cJSON_ParseWithLength(rkm->payload, rkm->len);
    return *json ? 0 : -1;
}

MYSQL *bench_db_open(const bench_opts_t *o)
{
    MYSQL *db = mysql_init(NULL);

    if (!db || !mysql_real_connect(db, NULL, "root", NULL, o->database, 0, o->socket,
                                   CLIENT_MULTI_STATEMENTS)) {
        fprintf(stderr, "bench: cannot connect: %s\n", db ? mysql_error(db) : "out of memory");
        exit(1);
    }
    mysql_set_character_set(db, "utf8mb4");
    return db;
}

long bench_db_exec(MYSQL *db, const char *sql, size_t len)
{
    long affected;

    if (mysql_real_query(db, sql, (unsigned long)len) != 0) {
        fprintf(stderr, "bench: %.120s: %s\n", sql, mysql_error(db));
        exit(1);
    }
    affected = (long)mysql_affected_rows(db);
    do {
        MYSQL_RES *res = mysql_store_result(db);
        if (res) mysql_free_result(res);
    } while (mysql_next_result(db) == 0);
    return affected;
}

size_t bench_hex(char *out, const void *data, size_t n)
{
    static const char digits[] = "0123456789ABCDEF";
    const unsigned char *p = data;
    char *o = out;

    *o++ = 'X';
    *o++ = '\'';
    for (size_t i = 0; i < n; i++) {
        *o++ = digits[p[i] >> 4];
        *o++ = digits[p[i] & 15];
    }
    *o++ = '\'';
    return (size_t)(o - out);
}
