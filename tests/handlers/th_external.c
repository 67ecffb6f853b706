/*
 * Test handler in external mode (ABI version 4), for the loader's unit
 * tests: no handle(), an act() and a reconcile() whose answers the business
 * key chooses:
 *   act:       "ok" -> OK, response {"fence":N}; "big" -> OK, a response of
 *              200 bytes; "bad" -> status 42 (invalid);
 *              "emit" -> host->emit, which must fail outside a transaction:
 *              RETRY with its error; "wait" -> host->retry_after(5000),
 *              RETRY; anything else -> RETRY
 *   reconcile: "done" -> DONE, response {"fence":N}; "weird" -> outcome 9
 *              (invalid); "wait" -> host->retry_after(3000), UNKNOWN;
 *              anything else -> NOT_DONE
 *   check:     WARN, saying what host->retry_after answers there (ABI 7)
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

static const dedupd_host *th_ext_host;

static int th_ext_init(void **state, const dedupd_host *host, char *errstr, size_t errstr_size)
{
    (void)state, (void)errstr, (void)errstr_size;
    th_ext_host = host;
    return 0;
}

#ifndef TH_EXT_NO_ACT
static dedupd_status th_ext_act(void *state, const dedupd_msg *msg, dedupd_result *res)
{
    (void)state;
    if (strcmp(msg->biz_key, "emit") == 0) {
        if (th_ext_host->emit(th_ext_host, NULL, msg, "t", NULL, 0, "x", 1, NULL, 0, res->error,
                              sizeof(res->error)) == 0)
            snprintf(res->error, sizeof(res->error), "emit succeeded in act()");
        return DEDUPD_RETRY;
    }
    if (strcmp(msg->biz_key, "ok") == 0) {
        res->response = th_ext_response(msg->fence);
        return DEDUPD_OK;
    }
    if (strcmp(msg->biz_key, "big") == 0) {
        char *big = malloc(201);

        if (big) {
            memset(big, ' ', 200);
            memcpy(big, "{\"big\":1}", 9);
            big[200] = '\0';
        }
        res->response = big;
        return DEDUPD_OK;
    }
    if (strcmp(msg->biz_key, "bad") == 0) return (dedupd_status)42;
    if (strcmp(msg->biz_key, "wait") == 0 && th_ext_host->retry_after(th_ext_host, 5000) != 0)
        return DEDUPD_REJECT;
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
    if (strcmp(biz_key, "wait") == 0) {
        th_ext_host->retry_after(th_ext_host, 3000);
        return DEDUPD_UNKNOWN;
    }
    return DEDUPD_NOT_DONE;
}

static int th_ext_check(void *state, char *report, size_t report_size)
{
    (void)state;
    snprintf(report, report_size, "reached nothing; retry_after here: %d",
             th_ext_host->retry_after(th_ext_host, 1));
    return DEDUPD_CHECK_WARN;
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
    .init_host = th_ext_init,
    .check = th_ext_check,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_external;
}
