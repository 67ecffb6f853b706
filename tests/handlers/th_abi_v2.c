/*
 * Test handler built against the frozen ABI 2 header (tests/abi/v2): a
 * descriptor that ends at handle_batch. dedupd must load it, use its
 * handle_batch, apply its writes exactly once (test 38) and never read the
 * fields of ABI 3: canaries follow the descriptor.
 *
 * Effect: th_v2_effect.n counts applications per business key; .path says
 * whether handle ("single") or handle_batch ("batch") applied it. A batch
 * holding a payload with "single": true is declined, so both run.
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <string.h>

#if DEDUPD_HANDLER_ABI_VERSION != 2
#error "th_abi_v2 must be built against tests/abi/v2/dedupd/handler.h"
#endif

static int th_v2_migrate(void *state, MYSQL *db, char *err, size_t errlen)
{
    (void)state;
    if (mysql_query(db,
                    "CREATE TABLE IF NOT EXISTS th_v2_effect (biz_key VARBINARY(255) NOT NULL"
                    " PRIMARY KEY, n INT NOT NULL, path VARCHAR(8) NOT NULL) ENGINE=InnoDB") != 0) {
        snprintf(err, errlen, "%s", mysql_error(db));
        return -1;
    }
    return 0;
}

static dedupd_status th_v2_apply(MYSQL *db, const dedupd_msg *msg, const char *path,
                                 dedupd_result *res)
{
    char key[2 * 255 + 1], sql[700];

    mysql_real_escape_string(db, key, msg->biz_key, (unsigned long)strlen(msg->biz_key));
    snprintf(sql, sizeof(sql),
             "INSERT INTO th_v2_effect (biz_key, n, path) VALUES ('%s', 1, '%s')"
             " ON DUPLICATE KEY UPDATE n = n + 1",
             key, path);
    if (mysql_query(db, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", mysql_error(db));
        return DEDUPD_RETRY;
    }
    return DEDUPD_OK;
}

static dedupd_status th_v2_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state;
    return th_v2_apply(db, msg, "single", res);
}

static dedupd_status th_v2_handle_batch(void *state, MYSQL *db, const dedupd_msg *const *msgs,
                                        size_t n, dedupd_result *res)
{
    (void)state;
    for (size_t i = 0; i < n; i++) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msgs[i]->json, "single"))) {
            snprintf(res[0].error, sizeof(res[0].error), "th_abi_v2: declines a single");
            return DEDUPD_REJECT;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (th_v2_apply(db, msgs[i], "batch", &res[0]) != DEDUPD_OK) return DEDUPD_RETRY;
    return DEDUPD_OK;
}

static const struct {
    dedupd_handler desc;
    const void *canary[8];
} th_v2 = {
    .desc = {.abi_version = DEDUPD_HANDLER_ABI_VERSION,
             .name = "th_abi_v2",
             .migrate = th_v2_migrate,
             .handle = th_v2_handle,
             .handle_batch = th_v2_handle_batch},
    .canary = {&th_v2, &th_v2, &th_v2, &th_v2, &th_v2, &th_v2, &th_v2, &th_v2},
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_v2.desc;
}
