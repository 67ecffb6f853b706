/*
 * Test handler in external mode (ABI version 4), for the loader's unit
 * tests: no handle(), an act() and a reconcile() whose answers the business
 * key chooses:
 *   act:       "ok" -> OK, response {"fence":N}; "bad" -> status 42 (invalid);
 *              anything else -> RETRY
 *   reconcile: "done" -> DONE, response {"fence":N}; "weird" -> outcome 9
 *              (invalid); anything else -> NOT_DONE
 * Built again with TH_EXT_NO_ACT (an external descriptor without act, which
 * dedupd must refuse) and TH_EXT_BAD_MODE (a mode dedupd does not know).
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *th_ext_response(int64_t fence)
{
    char buf[64];

    snprintf(buf, sizeof(buf), "{\"fence\":%lld}", (long long)fence);
    return strdup(buf);
}

#ifndef TH_EXT_NO_ACT
static dedupd_status th_ext_act(void *state, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state;
    if (strcmp(msg->biz_key, "ok") == 0) {
        res->response = th_ext_response(msg->fence);
        return DEDUPD_OK;
    }
    if (strcmp(msg->biz_key, "bad") == 0) return (dedupd_status)42;
    snprintf(res->error, sizeof(res->error), "not now");
    return DEDUPD_RETRY;
}
#endif

static dedupd_outcome th_ext_reconcile(void *state, const char *biz_key, int64_t fence,
                                       dedupd_result *res)
{
    (void)state;
    if (strcmp(biz_key, "done") == 0) {
        res->response = th_ext_response(fence);
        return DEDUPD_DONE;
    }
    if (strcmp(biz_key, "weird") == 0) return (dedupd_outcome)9;
    return DEDUPD_NOT_DONE;
}

static const dedupd_handler th_external = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_external",
#ifdef TH_EXT_BAD_MODE
    .mode = 7,
#else
    .mode = DEDUPD_MODE_EXTERNAL,
#endif
#ifndef TH_EXT_NO_ACT
    .act = th_ext_act,
#endif
    .reconcile = th_ext_reconcile,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_external;
}
