/*
 * A broken handler, for `dedupd handler-test` (test 37): it keeps running
 * totals in memory and writes them to the table. When dedupd rolls a
 * transaction back and replays it, the table's write is undone but the
 * memory's is not: the replay adds the amount a second time.
 *
 * Payload {"id": "...", "account": "...", "n": N}: th_memory_total holds
 * each account's total as the handler counts it.
 */
#include "dedupd/handler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TH_MEM_ACCOUNTS 64

typedef struct th_mem {
    pthread_mutex_t lock;
    char account[TH_MEM_ACCOUNTS][65];
    long long total[TH_MEM_ACCOUNTS];
} th_mem;

static int th_mem_init(void **state, const config_setting_t *conf, char *errstr, size_t errstr_size)
{
    th_mem *m = calloc(1, sizeof(*m));

    (void)conf;
    if (!m) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    pthread_mutex_init(&m->lock, NULL);
    *state = m;
    return 0;
}

static void th_mem_fini(void *state)
{
    th_mem *m = state;

    pthread_mutex_destroy(&m->lock);
    free(m);
}

static int th_mem_migrate(void *state, MYSQL *db, char *errstr, size_t errstr_size)
{
    (void)state;
    if (mysql_query(db, "CREATE TABLE IF NOT EXISTS th_memory_total (account VARCHAR(64) NOT NULL"
                        " PRIMARY KEY, total BIGINT NOT NULL) ENGINE=InnoDB") != 0) {
        snprintf(errstr, errstr_size, "%s", mysql_error(db));
        return -1;
    }
    return 0;
}

/* Adds n to account's total in memory; returns the new total. */
static long long th_mem_add(th_mem *m, const char *account, long long n)
{
    long long total = n;
    int i;

    pthread_mutex_lock(&m->lock);
    for (i = 0; i < TH_MEM_ACCOUNTS && m->account[i][0]; i++)
        if (strcmp(m->account[i], account) == 0) break;
    if (i < TH_MEM_ACCOUNTS) {
        if (!m->account[i][0]) snprintf(m->account[i], sizeof(m->account[i]), "%s", account);
        total = m->total[i] += n;
    }
    pthread_mutex_unlock(&m->lock);
    return total;
}

static dedupd_status th_mem_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                   dedupd_result *res)
{
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(msg->json, "account");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(msg->json, "n");
    char a[129], sql[300];

    if (!cJSON_IsString(acc) || strlen(acc->valuestring) > 64 || !cJSON_IsNumber(n)) {
        snprintf(res->error, sizeof(res->error), "account and n, please");
        return DEDUPD_REJECT;
    }
    mysql_real_escape_string(db, a, acc->valuestring, (unsigned long)strlen(acc->valuestring));
    snprintf(sql, sizeof(sql),
             "INSERT INTO th_memory_total (account, total) VALUES ('%s', %lld)"
             " ON DUPLICATE KEY UPDATE total = VALUES(total)",
             a, th_mem_add(state, acc->valuestring, (long long)n->valuedouble));
    if (mysql_query(db, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", mysql_error(db));
        return DEDUPD_RETRY;
    }
    return DEDUPD_OK;
}

static const dedupd_handler th_memory = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_memory",
    .init = th_mem_init,
    .migrate = th_mem_migrate,
    .handle = th_mem_handle,
    .fini = th_mem_fini,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_memory;
}
