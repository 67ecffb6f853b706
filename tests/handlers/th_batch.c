/*
 * Test handler with handle_batch() (ABI 2), for the unit tests of
 * dd_handler_handle_batch(): no database use. Each message's payload is
 * {"th": action}; the batch's answer is the first action that is not "ok":
 *   "ok"       every message applied, response {"i":<index>}
 *   "decline"  REJECT with a reason, after making responses (dedupd must
 *              free them: ASan's leak check shows it)
 *   "status7"  an invalid status
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dedupd_status th_batch_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                     dedupd_result *res)
{
    (void)state, (void)db, (void)msg;
    res->response = strdup("{\"single\":true}");
    return DEDUPD_OK;
}

static const char *th_batch_action(const dedupd_msg *msg)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(msg->json, "th");

    return cJSON_IsString(a) ? a->valuestring : "ok";
}

static dedupd_status th_batch_handle_batch(void *state, MYSQL *db, const dedupd_msg *const *msgs,
                                           size_t n, dedupd_result *res)
{
    const char *verdict = "ok";

    (void)state, (void)db;
    for (size_t i = 0; i < n; i++) {
        char resp[32];
        snprintf(resp, sizeof(resp), "{\"i\":%zu}", i);
        res[i].response = strdup(resp);
        if (strcmp(verdict, "ok") == 0) verdict = th_batch_action(msgs[i]);
    }
    if (strcmp(verdict, "decline") == 0) {
        snprintf(res[0].error, sizeof(res[0].error), "th_batch declines");
        return DEDUPD_REJECT;
    }
    if (strcmp(verdict, "status7") == 0) return (dedupd_status)7;
    return DEDUPD_OK;
}

static const dedupd_handler th_batch = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_batch",
    .handle = th_batch_handle,
    .handle_batch = th_batch_handle_batch,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_batch;
}
