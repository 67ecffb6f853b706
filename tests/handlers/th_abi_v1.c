/*
 * Test handler built the way a handler compiled against the ABI 1 header is
 * laid out: a descriptor that ends at fini. dedupd must load it and never
 * read past its end (no handle_batch); the descriptor is followed by a
 * canary that would be taken for a handle_batch pointer if it did.
 */
#include "dedupd/handler.h"

typedef struct th_v1_desc {
    int abi_version;
    const char *name;
    int (*init)(void **, const config_setting_t *, char *, size_t);
    int (*migrate)(void *, MYSQL *, char *, size_t);
    dedupd_status (*handle)(void *, MYSQL *, const dedupd_msg *, dedupd_result *);
    void (*fini)(void *);
} th_v1_desc;

static dedupd_status th_v1_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state, (void)db, (void)msg, (void)res;
    return DEDUPD_OK;
}

/* The v1 descriptor and, right after it, what an ABI 2 reader would take for
 * handle_batch: a non-NULL garbage value. */
static const struct {
    th_v1_desc desc;
    const void *canary;
} th_v1 = {
    .desc = {.abi_version = 1, .name = "th_abi_v1", .handle = th_v1_handle},
    .canary = &th_v1,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return (const dedupd_handler *)(const void *)&th_v1.desc;
}
