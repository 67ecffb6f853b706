/*
 * Test handler whose descriptor has no handle function: dedupd must refuse it
 * at load instead of crashing on the first message.
 */
#include "dedupd/handler.h"

static const dedupd_handler th_no_handle = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_no_handle",
    .handle = NULL,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_no_handle;
}
