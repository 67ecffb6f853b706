/*
 * Test handler built against the frozen ABI 5 header (tests/abi/v5): the
 * last layout before host->emit. dedupd must load it, hand it a host API
 * whose fields it knows (host->version at least 1, log), fill the
 * message's shard, and apply its writes exactly once (test 38).
 *
 * Effect: th_v5_effect.n counts applications per business key; .shard is
 * the message's shard; .path says whether handle ("single") or
 * handle_batch ("batch") applied it. A batch holding a payload with
 * "single": true is declined, so both run.
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <string.h>

#if DEDUPD_HANDLER_ABI_VERSION != 5
#error "th_abi_v5 must be built against tests/abi/v5/dedupd/handler.h"
#endif

static int th_v5_init(void **state, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    if (host->version < 1 || !host->log) {
        snprintf(errstr, errstr_size, "th_abi_v5: incomplete host API");
        return -1;
    }
    host->log(host, DEDUPD_LOG_INFO, "th_abi_v5 init host_version_ok=%d",
              host->version >= DEDUPD_HOST_VERSION);
    *state = (void *)host;
    return 0;
}

static int th_v5_migrate(void *state, MYSQL *db, char *err, size_t errlen)
{
    (void)state;
    if (mysql_query(db, "CREATE TABLE IF NOT EXISTS th_v5_effect (biz_key VARBINARY(255) NOT NULL"
                        " PRIMARY KEY, n INT NOT NULL, shard INT NOT NULL, path VARCHAR(8) NOT"
                        " NULL) ENGINE=InnoDB") != 0) {
        snprintf(err, errlen, "%s", mysql_error(db));
        return -1;
    }
    return 0;
}

static dedupd_status th_v5_apply(MYSQL *db, const dedupd_msg *msg, const char *path,
                                 dedupd_result *res)
{
    char key[2 * 255 + 1], sql[700];

    mysql_real_escape_string(db, key, msg->biz_key, (unsigned long)strlen(msg->biz_key));
    snprintf(sql, sizeof(sql),
             "INSERT INTO th_v5_effect (biz_key, n, shard, path) VALUES ('%s', 1, %d, '%s')"
             " ON DUPLICATE KEY UPDATE n = n + 1",
             key, msg->shard, path);
    if (mysql_query(db, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", mysql_error(db));
        return DEDUPD_RETRY;
    }
    return DEDUPD_OK;
}

static dedupd_status th_v5_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state;
    return th_v5_apply(db, msg, "single", res);
}

static dedupd_status th_v5_handle_batch(void *state, MYSQL *db, const dedupd_msg *const *msgs,
                                        size_t n, dedupd_result *res)
{
    (void)state;
    for (size_t i = 0; i < n; i++) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msgs[i]->json, "single"))) {
            snprintf(res[0].error, sizeof(res[0].error), "th_abi_v5: declines a single");
            return DEDUPD_REJECT;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (th_v5_apply(db, msgs[i], "batch", &res[0]) != DEDUPD_OK) return DEDUPD_RETRY;
    return DEDUPD_OK;
}

static const dedupd_handler th_v5 = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_abi_v5",
    .init_host = th_v5_init,
    .migrate = th_v5_migrate,
    .handle = th_v5_handle,
    .handle_batch = th_v5_handle_batch,
    .mode = DEDUPD_MODE_LOCAL,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_v5;
}
