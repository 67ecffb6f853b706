/*
 * bench-naive: the hand-written consumer most teams start with, one
 * transaction per message.
 *
 * For each message: START TRANSACTION; SELECT the key FOR UPDATE in the
 * dedup table; if absent, INSERT the dedup row and the ledger's three writes
 * (ledger_entry, merchant_balance, payment_order; sent in one round trip,
 * which flatters it); COMMIT. Correct, simple, and bounded by one durable
 * commit (one redo-log flush) per message. Tables are dedupd's own schema
 * (`dedupd migrate` with the ledger handler) in a database of its own.
 *
 *   bench-naive -b BROKERS -t TOPIC -S SOCKET -D DATABASE [-k TEMPLATE] [-m LIMIT]
 *               [-p NAME=VALUE ...]
 *   prints: naive messages=N applied=A seconds=S msg_per_s=R
 * The clock runs from the first message to the last commit; -m stops after
 * LIMIT messages (the bench runs a slice and reports the rate).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define NAIVE_USAGE                                                                                \
    "bench-naive -b BROKERS -t TOPIC -S SOCKET -D DATABASE [-k TEMPLATE] [-m LIMIT] "              \
    "[-p NAME=VALUE ...]"
#define NAIVE_SQL_MAX 4096

/* 'escaped' copy of a JSON string field, or NULL when absent. */
static const char *naive_str(MYSQL *db, const cJSON *json, const char *name, char *out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(json, name);
    size_t n;

    if (!cJSON_IsString(f) || (n = strlen(f->valuestring)) > 64) return NULL;
    out[0] = '\'';
    n = mysql_real_escape_string(db, out + 1, f->valuestring, (unsigned long)n);
    out[n + 1] = '\'';
    out[n + 2] = '\0';
    return out;
}

/* 1 when the key is already recorded (the row stays locked until COMMIT). */
static int naive_seen(MYSQL *db, const char *hexkey)
{
    char sql[NAIVE_SQL_MAX];
    MYSQL_RES *res;
    int seen;

    snprintf(sql, sizeof(sql), "SELECT 1 FROM dedup_record WHERE biz_key = %s FOR UPDATE", hexkey);
    bench_db_exec(db, "START TRANSACTION", 17);
    if (mysql_query(db, sql) != 0 || !(res = mysql_store_result(db))) {
        fprintf(stderr, "bench-naive: %s\n", mysql_error(db));
        exit(1);
    }
    seen = mysql_num_rows(res) > 0;
    mysql_free_result(res);
    return seen;
}

/* The dedup row and the ledger's effect, in one multi-statement round trip. */
static int naive_apply(MYSQL *db, const rd_kafka_message_t *rkm, const cJSON *json,
                       const char *hexkey, const char *hexhash)
{
    char m[2 * 64 + 3], on[2 * 64 + 3], t[2 * 64 + 3], sql[NAIVE_SQL_MAX];
    const cJSON *amount = cJSON_GetObjectItemCaseSensitive(json, "amount");
    long long cents;
    int n;

    if (!naive_str(db, json, "merchant_id", m) || !naive_str(db, json, "order_no", on) ||
        !naive_str(db, json, "txn_id", t) || !cJSON_IsNumber(amount))
        return -1;
    cents = llround(amount->valuedouble * 100);
    n = snprintf(sql, sizeof(sql),
                 "INSERT INTO dedup_record (biz_key, request_hash, status, attempts, topic,"
                 " kpartition, koffset, expire_at) VALUES (%s, %s, 1, 1, '%s', %d, %lld,"
                 " NOW(6) + INTERVAL 7 DAY);"
                 "INSERT INTO ledger_entry (merchant_id, order_no, txn_id, amount_cents,"
                 " currency, biz_key) VALUES (%s, %s, %s, %lld, 'CNY', %s);"
                 "INSERT INTO merchant_balance (merchant_id, currency, balance_cents, entries)"
                 " VALUES (%s, 'CNY', %lld, 1) ON DUPLICATE KEY UPDATE"
                 " balance_cents = balance_cents + VALUES(balance_cents), entries = entries + 1;"
                 "INSERT INTO payment_order (merchant_id, order_no, status, txn_id, amount_cents)"
                 " VALUES (%s, %s, 'PAID', %s, %lld) ON DUPLICATE KEY UPDATE"
                 " status = IF(status = 'UNPAID', VALUES(status), status)",
                 hexkey, hexhash, rd_kafka_topic_name(rkm->rkt), (int)rkm->partition,
                 (long long)rkm->offset, m, on, t, cents, hexkey, m, cents, m, on, t, cents);
    bench_db_exec(db, sql, (size_t)n);
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    bench_src_t src;
    dd_key_tmpl_t *tmpl = NULL;
    dd_json_doc_t *doc = dd_json_doc_new();
    rd_kafka_message_t *rkm;
    char key[DD_KEY_MAX + 1], hexkey[2 * DD_KEY_MAX + 4], hexhash[2 * DD_HASH_LEN + 4];
    char err[256];
    unsigned char hash[DD_HASH_LEN];
    long applied = 0, bad = 0;
    MYSQL *db;
    int64_t t_end;

    bench_args(argc, argv, &o, NAIVE_USAGE);
    if (dd_key_tmpl_new(&tmpl, o.key, err, sizeof(err))) {
        fprintf(stderr, "bench-naive: key template: %s\n", err);
        return 2;
    }
    db = bench_db_open(&o);
    if (bench_src_open(&src, &o)) return 1;
    while ((rkm = bench_src_next(&src, &o))) {
        cJSON *json;
        size_t key_len;
        if (bench_key(doc, tmpl, rkm, &json, key, &key_len) == 0) {
            hexkey[bench_hex(hexkey, key, key_len)] = '\0';
            dd_hash_doc(NULL, doc, hash);
            hexhash[bench_hex(hexhash, hash, sizeof(hash))] = '\0';
            if (!naive_seen(db, hexkey) && naive_apply(db, rkm, json, hexkey, hexhash) == 0)
                applied++;
            bench_db_exec(db, "COMMIT", 6);
        } else {
            bad++;
        }
        cJSON_Delete(json);
        rd_kafka_message_destroy(rkm);
    }
    t_end = bench_now_us();
    printf("naive messages=%ld applied=%ld bad=%ld seconds=%.3f msg_per_s=%.0f\n", src.messages,
           applied, bad, (double)(t_end - src.t_first_us) / 1e6,
           src.messages / ((double)(t_end - src.t_first_us) / 1e6));
    bench_src_close(&src);
    mysql_close(db);
    dd_key_tmpl_destroy(tmpl);
    dd_json_doc_destroy(doc);
    return 0;
}
