/*
 * Test handler laid out as one compiled against the ABI 2 header: a
 * descriptor that ends at handle_batch. dedupd must load it in local mode
 * and never read the fields of ABI 4 (mode, act, finish, reconcile); the
 * descriptor is followed by canaries that would be taken for an external
 * mode and its functions if it did.
 */
#include "dedupd/handler.h"

typedef struct th_v2_desc {
    int abi_version;
    const char *name;
    int (*init)(void **, const config_setting_t *, char *, size_t);
    int (*migrate)(void *, MYSQL *, char *, size_t);
    dedupd_status (*handle)(void *, MYSQL *, const dedupd_msg *, dedupd_result *);
    void (*fini)(void *);
    dedupd_status (*handle_batch)(void *, MYSQL *, const dedupd_msg *const *, size_t,
                                  dedupd_result *);
} th_v2_desc;

static dedupd_status th_v2_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state, (void)db, (void)msg, (void)res;
    return DEDUPD_OK;
}

static const struct {
    th_v2_desc desc;
    int mode;
    const void *act, *finish, *reconcile;
} th_v2 = {
    .desc = {.abi_version = 2, .name = "th_abi_v2", .handle = th_v2_handle},
    .mode = DEDUPD_MODE_EXTERNAL,
    .act = &th_v2,
    .finish = &th_v2,
    .reconcile = &th_v2,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return (const dedupd_handler *)(const void *)&th_v2.desc;
}
