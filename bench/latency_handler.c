/*
 * bench_latency: the handler of `scripts/bench --latency`. For every
 * payment it applies it writes a row (business key, sent_us, applied_us)
 * into bench_latency: sent_us is the producer's send time, from the
 * payload's "sent_us" field (microseconds since the epoch); applied_us is
 * the time the handler wrote the row, on the same clock. The row commits
 * with the dedup record or not at all, so every applied payment has
 * exactly one row, and a redelivered copy none.
 *
 * applied_us is taken inside the transaction, just before dedupd commits
 * it: the commit itself (about a millisecond on the bench's MariaDB) is
 * not in the figure. A handler cannot see the commit; the alternative, a
 * reader polling the table from outside, would add its own polling period
 * and CPU on a two-core machine.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dedupd/handler.h"

#define LAT_ROW_MAX (DEDUPD_ERROR_SIZE * 2 + 64) /* escaped key + two numbers */

static int64_t lat_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int lat_migrate(void *state, MYSQL *db, char *errstr, size_t errstr_size)
{
    static const char ddl[] = "CREATE TABLE IF NOT EXISTS bench_latency ("
                              " k VARCHAR(255) NOT NULL PRIMARY KEY,"
                              " sent_us BIGINT NOT NULL, applied_us BIGINT NOT NULL)";
    (void)state;
    if (mysql_query(db, ddl) == 0) return 0;
    snprintf(errstr, errstr_size, "cannot create bench_latency: %s", mysql_error(db));
    return 1;
}

/* Appends msg's row "(key,sent,applied)" at out; 0 when the payload has no
 * sent_us (the message is then rejected). */
static size_t lat_row(MYSQL *db, const dedupd_msg *msg, int64_t now, char *out)
{
    const cJSON *sent = msg->json ? cJSON_GetObjectItemCaseSensitive(msg->json, "sent_us") : NULL;
    size_t klen = strlen(msg->biz_key), n = 0;

    if (!cJSON_IsNumber(sent) || klen > 255) return 0;
    out[n++] = '(';
    out[n++] = '\'';
    n += mysql_real_escape_string(db, out + n, msg->biz_key, (unsigned long)klen);
    n += (size_t)sprintf(out + n, "',%" PRId64 ",%" PRId64 ")", (int64_t)sent->valuedouble, now);
    return n;
}

static dedupd_status lat_insert(MYSQL *db, const dedupd_msg *const *msgs, size_t n,
                                dedupd_result *res)
{
    static const char head[] = "INSERT INTO bench_latency (k, sent_us, applied_us) VALUES ";
    char *sql = malloc(sizeof(head) + n * (LAT_ROW_MAX + 1));
    int64_t now = lat_now_us();
    size_t len = sizeof(head) - 1;
    dedupd_status st = DEDUPD_OK;

    if (!sql) return DEDUPD_RETRY;
    memcpy(sql, head, len);
    for (size_t i = 0; i < n && st == DEDUPD_OK; i++) {
        size_t row;
        if (i) sql[len++] = ',';
        row = lat_row(db, msgs[i], now, sql + len);
        if (!row) {
            snprintf(res[i].error, sizeof(res[i].error), "payload has no numeric sent_us");
            st = DEDUPD_REJECT;
        }
        len += row;
    }
    if (st == DEDUPD_OK && mysql_real_query(db, sql, (unsigned long)len)) st = DEDUPD_RETRY;
    free(sql);
    return st;
}

static dedupd_status lat_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state;
    res->response = NULL;
    return lat_insert(db, &msg, 1, res);
}

static dedupd_status lat_handle_batch(void *state, MYSQL *db, const dedupd_msg *const *msgs,
                                      size_t n, dedupd_result *res)
{
    (void)state;
    return lat_insert(db, msgs, n, res);
}

static const dedupd_handler lat_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "bench_latency",
    .migrate = lat_migrate,
    .handle = lat_handle,
    .handle_batch = lat_handle_batch,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &lat_handler;
}
