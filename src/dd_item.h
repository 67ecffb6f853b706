/*
 * One consumed message on its way through the pipeline. Created by the main
 * thread at poll time, owned by exactly one thread at a time (main, then a
 * lane, then main again), destroyed by the main thread once its offset may
 * move.
 */
#ifndef DD_ITEM_H
#define DD_ITEM_H

#include <stdint.h>

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include "dd_claim.h"
#include "dd_hash.h"
#include "dd_key.h"
#include "dd_offsets.h"
#include "dd_pipeline.h"

typedef enum {
    DD_OUT_NONE = 0,
    DD_OUT_APPLIED,   /* handler OK, committed */
    DD_OUT_DUPLICATE, /* same key and hash already applied */
    DD_OUT_DLQ,       /* must be dead-lettered; reason says why */
} dd_outcome_t;

typedef struct dd_item_s {
    struct dd_item_s *next;
    rd_kafka_message_t *rkm;
    dd_ptrack_t *pt;
    uint32_t epoch;
    uint64_t seq;
    int64_t t_poll_ms;
    int64_t t_poll_us; /* for the poll -> finish latency histogram */

    cJSON *json;
    char key[DD_KEY_MAX + 1];
    size_t key_len;
    unsigned char hash[DD_HASH_LEN];
    int hashed;
    int attempts; /* handler RETRY count */

    dd_outcome_t outcome;
    dd_reason_t reason;
    char error[256];
    char *response; /* handler's snapshot, owned until the batch is finished */
    dd_claim_t *claim;
    int64_t dlq_due_ms; /* resend time after a failed dead letter */
    int dlq_bare;       /* the broker refused the dead letter as too large: send it bare */
} dd_item_t;

#endif /* DD_ITEM_H */
