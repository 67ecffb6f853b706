/*
 * What the bench baselines (bare.c, ledger_bare.c, naive.c) share: reading
 * every partition of a topic from the beginning with a plain librdkafka
 * consumer, parsing and keying each payload the way dedupd does, and a
 * connection to the bench's MariaDB.
 *
 * The baselines exist to put dedupd's throughput in perspective: "bare" is
 * the least any consumer writing keys to this database must do, "ledger, no
 * dedup" is the ledger handler's business writes with no deduplication at
 * all, and "naive" is what one transaction per message costs. They assign
 * partitions directly (no group join, no offset commits) because they
 * promise nothing; their clock starts at the first message, like dedupd's
 * in the bench.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>
#include <mysql.h>

#include "dd_hash.h"
#include "dd_json.h"
#include "dd_key.h"

#define BENCH_MAX_PROPS 8

typedef struct {
    const char *brokers, *topic, *socket, *database, *key;
    const char *handler; /* -H: a handler plugin whose migrate() makes the tables */
    long batch;          /* messages per transaction (bare, ledger_bare) */
    long limit;          /* stop after this many messages, 0 = whole topic */
    /* librdkafka consumer properties, "name=value" (-p): the bench gives the
     * baselines the consumer settings it gives dedupd */
    const char *props[BENCH_MAX_PROPS];
    int nprops;
} bench_opts_t;

typedef struct {
    rd_kafka_t *rk;
    int parts;     /* partitions of the topic */
    int eofs;      /* partitions that reached their end */
    long messages; /* consumed */
    int64_t t_first_us, t_last_us;
} bench_src_t;

/* Parses -b -t -S -D -k -n -m -p -H; exits with usage on error. */
void bench_args(int argc, char **argv, bench_opts_t *o, const char *usage);

int64_t bench_now_us(void);

/* Consumer assigned to every partition of the topic at the beginning. */
int bench_src_open(bench_src_t *src, const bench_opts_t *o);
/* Next message (NULL at the end of every partition or after the limit). */
rd_kafka_message_t *bench_src_next(bench_src_t *src, const bench_opts_t *o);
void bench_src_close(bench_src_t *src);

/* Parses the payload as dedupd does (strictly into doc, for the key and
 * the hash, and into a cJSON tree, as handlers get it) and renders its key;
 * 0 on success. *json is the tree (caller frees) or NULL. */
int bench_key(dd_json_doc_t *doc, const dd_key_tmpl_t *tmpl, const rd_kafka_message_t *rkm,
              cJSON **json, char key[DD_KEY_MAX + 1], size_t *key_len);

MYSQL *bench_db_open(const bench_opts_t *o);
/* Runs sql (all its statements) or exits with the server's message;
 * returns the first statement's affected rows. */
long bench_db_exec(MYSQL *db, const char *sql, size_t len);

/* Appends X'hex' of data at out; returns the characters written. */
size_t bench_hex(char *out, const void *data, size_t n);

#endif /* BENCH_COMMON_H */
