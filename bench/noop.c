/*
 * bench_noop: a handler that applies nothing (returns OK, no response).
 *
 * With it, dedupd's run costs only what dedupd itself adds: parse, key,
 * request hash, the claim transaction, offsets. The bench compares that with
 * the bare pipeline, which has no handler either; the ledger run adds the
 * handler's own per-message writes on top.
 */
#include "dedupd/handler.h"

static dedupd_status noop_handle(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state, (void)db, (void)msg;
    res->response = NULL;
    return DEDUPD_OK;
}

static const dedupd_handler noop_handler = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "bench_noop",
    .handle = noop_handle,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &noop_handler;
}
