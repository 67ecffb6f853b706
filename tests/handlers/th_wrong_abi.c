/*
 * Test handler built for a future ABI version: dedupd must refuse to load it
 * and say which versions were involved, before calling anything else in it.
 */
#include "dedupd/handler.h"

static dedupd_status th_wrong_abi_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                         dedupd_result *res)
{
    return DEDUPD_OK;
}

static const dedupd_handler th_wrong_abi = {
    .abi_version = 999,
    .name = "th_wrong_abi",
    .handle = th_wrong_abi_handle,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_wrong_abi;
}
