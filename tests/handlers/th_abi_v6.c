/*
 * Test handler built against the frozen ABI 6 header (tests/abi/v6): the
 * last layout before check(), in external mode. Its descriptor ends
 * where ABI 6 ended, so dedupd must not read a check() from it (unit test
 * handler).
 */
#include "dedupd/handler.h"

#include <string.h>

#if DEDUPD_HANDLER_ABI_VERSION != 6
#error "th_abi_v6 must be built against tests/abi/v6/dedupd/handler.h"
#endif

static dedupd_status th_v6_act(void *state, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state, (void)msg, (void)res;
    return DEDUPD_OK;
}

/* The descriptor, followed by a canary where ABI 7's check() would be. */
static const struct {
    dedupd_handler desc;
    void *canary;
} th_abi_v6 = {
    .desc = {.abi_version = DEDUPD_HANDLER_ABI_VERSION,
             .name = "th_abi_v6",
             .mode = DEDUPD_MODE_EXTERNAL,
             .act = th_v6_act},
    .canary = (void *)1,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_abi_v6.desc;
}
