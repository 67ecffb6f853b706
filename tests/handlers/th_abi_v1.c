/*
 * Test handler built against the frozen ABI 1 header (tests/abi/v1): what
 * a handler compiled for dedupd's first handler ABI looks like in memory,
 * a descriptor that ends at fini. dedupd must load it, apply its writes
 * exactly once (test 38) and never read past the descriptor's end: it is
 * followed by canaries that would be taken for the fields of later ABI
 * versions (handle_batch, init_host, conn_init, ...) if it did.
 *
 * Effect: th_v1_effect.n counts applications per business key.
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <string.h>

#if DEDUPD_HANDLER_ABI_VERSION != 1
#error "th_abi_v1 must be built against tests/abi/v1/dedupd/handler.h"
#endif

static int th_v1_migrate(void *state, MYSQL *db, char *err, size_t errlen)
{
    (void)state;
    if (mysql_query(db, "CREATE TABLE IF NOT EXISTS th_v1_effect (biz_key VARBINARY(255) NOT NULL"
                        " PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB") != 0) {
        snprintf(err, errlen, "%s", mysql_error(db));
        return -1;
    }
    return 0;
}

static dedupd_status th_v1_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    char key[2 * 255 + 1], sql[700];

    (void)state;
    mysql_real_escape_string(db, key, msg->biz_key, (unsigned long)strlen(msg->biz_key));
    snprintf(sql, sizeof(sql),
             "INSERT INTO th_v1_effect (biz_key, n) VALUES ('%s', 1)"
             " ON DUPLICATE KEY UPDATE n = n + 1",
             key);
    if (mysql_query(db, sql) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", mysql_error(db));
        return DEDUPD_RETRY;
    }
    return DEDUPD_OK;
}

/* The v1 descriptor and, right after it, what a reader of a later ABI
 * would take for its newer fields: non-NULL garbage. */
static const struct {
    dedupd_handler desc;
    const void *canary[8];
} th_v1 = {
    .desc = {.abi_version = DEDUPD_HANDLER_ABI_VERSION,
             .name = "th_abi_v1",
             .migrate = th_v1_migrate,
             .handle = th_v1_handle},
    .canary = {&th_v1, &th_v1, &th_v1, &th_v1, &th_v1, &th_v1, &th_v1, &th_v1},
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_v1.desc;
}
