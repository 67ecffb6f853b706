/*
 * bench-bare: the bare pipeline dedupd is measured against.
 *
 * It does the least any consumer that records business keys must do:
 * consume, parse the JSON (strictly for the key, and into a cJSON tree as
 * dedupd does for its handlers), render the key with dd_key_render,
 * and insert the keys into a plain table with one multi-row INSERT IGNORE
 * per N rows (autocommit: one statement is one transaction). No handler, no
 * request hash, no claim protocol, no offsets, one thread. Its rate is the
 * ceiling "near the raw speed of the database" refers to. The bench gives
 * it the consumer settings it gives dedupd (-p), so that librdkafka's fetch
 * pacing bounds neither of them.
 *
 *   bench-bare -b BROKERS -t TOPIC -S SOCKET -D DATABASE [-k TEMPLATE] [-n ROWS]
 *              [-p NAME=VALUE ...]
 *   prints: bare messages=N keys=K seconds=S msg_per_s=R
 * The clock runs from the first message to the last commit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define BARE_USAGE                                                                                 \
    "bench-bare -b BROKERS -t TOPIC -S SOCKET -D DATABASE [-k TEMPLATE] [-n ROWS] "                \
    "[-p NAME=VALUE ...]"

typedef struct {
    MYSQL *db;
    char *sql;
    size_t len, cap, head;
    long rows, keys;
} bare_batch_t;

static void bare_flush(bare_batch_t *b)
{
    if (!b->rows) return;
    b->keys += bench_db_exec(b->db, b->sql, b->len);
    b->len = b->head;
    b->rows = 0;
}

static void bare_add(bare_batch_t *b, const char *key, size_t key_len)
{
    if (b->len + 2 * key_len + 8 > b->cap) {
        b->cap = 2 * b->cap + 2 * key_len + 8;
        b->sql = realloc(b->sql, b->cap);
        if (!b->sql) {
            fprintf(stderr, "bench-bare: out of memory\n");
            exit(1);
        }
    }
    b->sql[b->len++] = b->rows ? ',' : ' ';
    b->sql[b->len++] = '(';
    b->len += bench_hex(b->sql + b->len, key, key_len);
    b->sql[b->len++] = ')';
    b->rows++;
}

int main(int argc, char **argv)
{
    static const char head[] = "INSERT IGNORE INTO bare_key (k) VALUES";
    static const char ddl[] =
        "CREATE TABLE IF NOT EXISTS bare_key (k VARBINARY(255) PRIMARY KEY) ENGINE=InnoDB";
    bench_opts_t o;
    bench_src_t src;
    bare_batch_t b = {0};
    dd_key_tmpl_t *tmpl = NULL;
    dd_json_doc_t *doc = dd_json_doc_new();
    rd_kafka_message_t *rkm;
    char key[DD_KEY_MAX + 1], err[256];
    long bad = 0;
    int64_t t_end;

    bench_args(argc, argv, &o, BARE_USAGE);
    if (dd_key_tmpl_new(&tmpl, o.key, err, sizeof(err))) {
        fprintf(stderr, "bench-bare: key template: %s\n", err);
        return 2;
    }
    b.db = bench_db_open(&o);
    bench_db_exec(b.db, ddl, strlen(ddl));
    b.cap = 1 << 20;
    b.sql = malloc(b.cap);
    memcpy(b.sql, head, sizeof(head) - 1);
    b.len = b.head = sizeof(head) - 1;
    if (!b.sql || bench_src_open(&src, &o)) return 1;
    while ((rkm = bench_src_next(&src, &o))) {
        cJSON *json;
        size_t key_len;
        if (bench_key(doc, tmpl, rkm, &json, key, &key_len) == 0)
            bare_add(&b, key, key_len);
        else
            bad++;
        cJSON_Delete(json);
        rd_kafka_message_destroy(rkm);
        if (b.rows >= o.batch) bare_flush(&b);
    }
    bare_flush(&b);
    t_end = bench_now_us();
    printf("bare messages=%ld keys=%ld bad=%ld seconds=%.3f msg_per_s=%.0f\n", src.messages, b.keys,
           bad, (double)(t_end - src.t_first_us) / 1e6,
           src.messages / ((double)(t_end - src.t_first_us) / 1e6));
    bench_src_close(&src);
    mysql_close(b.db);
    free(b.sql);
    dd_key_tmpl_destroy(tmpl);
    dd_json_doc_destroy(doc);
    return 0;
}
