/*
 * dedupd handler ABI, version 1.
 *
 * A handler is a shared object exporting one symbol, dedupd_handler_v1(),
 * which returns a static descriptor. dedupd calls handle() inside the open
 * claim transaction on `db`, so the business write commits or rolls back
 * together with the dedup record. This is the only public header of dedupd:
 * handlers built outside this repository compile against it alone.
 *
 * Rules for handle():
 *  - never COMMIT, ROLLBACK or change autocommit on `db`; dedupd checks the
 *    server's in-transaction flag after each call and treats a broken
 *    transaction as a handler bug (the worker stops);
 *  - it may be called from several threads at once, each with its own `db`;
 *  - RETRY rolls back this message's work and tries it again later with
 *    backoff; REJECT rolls it back, records the key as failed and sends the
 *    message to the dead-letter topic with res->error as the reason.
 *
 * Compatibility: new fields are only ever appended to these structs, and
 * DEDUPD_HANDLER_ABI_VERSION changes when a change is not backward
 * compatible. dedupd refuses to load a handler built for another version.
 */
#ifndef DEDUPD_HANDLER_H
#define DEDUPD_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <libconfig.h>
#include <mysql.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUPD_HANDLER_ABI_VERSION 1

typedef enum { DEDUPD_OK = 0, DEDUPD_RETRY = 1, DEDUPD_REJECT = 2 } dedupd_status;

typedef struct dedupd_msg {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms;
    const void *key; /* Kafka key, may be NULL */
    size_t key_len;
    const void *payload;
    size_t payload_len;
    const cJSON *json;   /* parsed payload */
    const char *biz_key; /* derived business key */
} dedupd_msg;

typedef struct dedupd_result {
    char *response;  /* malloc'd JSON text kept as the response snapshot, or NULL */
    char error[256]; /* why, on RETRY/REJECT */
} dedupd_result;

typedef struct dedupd_handler {
    int abi_version; /* DEDUPD_HANDLER_ABI_VERSION */
    const char *name;
    int (*init)(void **state, const config_setting_t *conf, char *err,
                size_t errlen);                                       /* optional */
    int (*migrate)(void *state, MYSQL *db, char *err, size_t errlen); /* optional */
    dedupd_status (*handle)(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res);
    void (*fini)(void *state); /* optional */
} dedupd_handler;

/* The one exported symbol. */
const dedupd_handler *dedupd_handler_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* DEDUPD_HANDLER_H */
