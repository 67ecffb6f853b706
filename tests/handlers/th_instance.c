/*
 * Test handler for one shared object loaded twice (two routes naming the
 * same file): dlopen() then hands out the same mapping, so the file's
 * globals are shared, but each route's dd_handler_t calls init() and gets
 * its own state. The state here is the instance's number (its init's turn,
 * a global count) and its own count of handle() calls; handle() answers
 * {"instance":I,"calls":N} without touching the database.
 */
#include "dedupd/handler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct th_instance {
    int instance;
    int calls;
} th_instance;

static int th_instance_inits; /* shared by every instance of this mapping */

static int th_instance_init(void **state, const config_setting_t *conf, char *errstr,
                            size_t errstr_size)
{
    th_instance *st = calloc(1, sizeof(*st));

    (void)conf;
    if (!st) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    st->instance = ++th_instance_inits;
    *state = st;
    return 0;
}

static dedupd_status th_instance_handle(void *state, MYSQL *db, const dedupd_msg *msg,
                                        dedupd_result *res)
{
    th_instance *st = state;
    char text[64];

    (void)db, (void)msg;
    snprintf(text, sizeof(text), "{\"instance\":%d,\"calls\":%d}", st->instance, ++st->calls);
    res->response = strdup(text);
    return DEDUPD_OK;
}

static void th_instance_fini(void *state)
{
    free(state);
}

static const dedupd_handler th_instance_desc = {
    .abi_version = DEDUPD_HANDLER_ABI_VERSION,
    .name = "th_instance",
    .init = th_instance_init,
    .handle = th_instance_handle,
    .fini = th_instance_fini,
};

const dedupd_handler *dedupd_handler_v1(void)
{
    return &th_instance_desc;
}
