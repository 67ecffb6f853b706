/*
 * One consumed message on its way through `dedupd run` or `dedupd replay`.
 * Created by the consumer's thread at poll time, owned by exactly one
 * thread at a time (the consumer's, then a lane's, then the consumer's
 * again, handed over through the lane group's queues), destroyed by the
 * consumer's thread once its offset may move.
 */
#ifndef DD_ITEM_H
#define DD_ITEM_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>

#include "dd_hash.h"
#include "dd_key.h"
#include "dd_parse.h"
#include "dd_stats.h"

/* Defined by the claim and the offsets modules, above this one; an item
 * only points at them. */
typedef struct dd_claim_s dd_claim_t;
typedef struct dd_ptrack_s dd_ptrack_t;
typedef struct dd_lease_hold_s dd_lease_hold_t;

typedef enum {
    DD_OUT_NONE = 0,
    DD_OUT_APPLIED,   /* handler OK, committed */
    DD_OUT_DUPLICATE, /* same key and hash already applied */
    DD_OUT_DLQ,       /* must be dead-lettered; reason says why */
} dd_outcome_t;

/* What a conflicting message conflicts with. */
typedef enum {
    DD_CONFLICT_NONE = 0,
    DD_CONFLICT_ROW,  /* the dedup table's row of its key */
    DD_CONFLICT_COPY, /* an earlier message of its key in the same batch */
} dd_conflict_with_t;

typedef struct dd_item_s {
    struct dd_item_s *next;
    rd_kafka_message_t *rkm; /* owned */
    dd_ptrack_t *pt;
    uint32_t epoch;
    uint64_t seq;
    int64_t t_poll_ms;
    int64_t t_poll_us; /* for the poll -> finish latency histogram */
    int route;         /* the message's route: its topic's, an index of conf->routes */
    int shard;         /* the database shard its rows live in, an index of conf->shards */

    cJSON *json; /* owned; in the parse pool the item was parsed into */
    /* owned, as json: the strict parser's document of text, which the
     * handler reads exact values from (the host's path_value) */
    const dd_json_doc_t *doc;
    /* The JSON text parsed (dedup.format): NULL for the payload itself;
     * else after a json_sr header, or text_owned, an Avro record decoded. */
    const char *text;
    size_t text_len;
    char *text_owned;
    char key[DD_KEY_MAX + 1];
    size_t key_len;
    unsigned char hash[DD_HASH_LEN];
    int hashed;
    int attempts; /* handler RETRY count */
    int faulted;  /* DEDUPD_TEST_FAULTS=rollback_after_handler rolled it back once */

    dd_outcome_t outcome;
    dd_reason_t reason;
    char error[512];
    char *response; /* handler's snapshot, owned until the batch is finished */
    dd_claim_t *claim;
    int64_t dlq_due_ms; /* resend time after a failed dead letter */
    int dlq_bare;       /* the broker refused the dead letter as too large: send it bare */
    int dlq_logged;     /* its dead letter was logged (resends are not) */

    /* A conflict (reason DD_REASON_CONFLICT), for the log line: the request
     * hash the message met, and whose it is. */
    dd_conflict_with_t conflict_with;
    unsigned char conflict_hash[DD_HASH_LEN];
    char conflict_created[32], conflict_updated[32]; /* the stored row's times */
    char conflict_first[160]; /* the earlier copy: "topic [partition] @offset" */

    /* external mode (the lanes' dd_lane_ext.c): where the message is in the
     * protocol, the claim it holds and what it waits for */
    int ext_step;          /* the next step: claim, reconcile, act, finish */
    int64_t fence;         /* the token of the claim it holds, 0: none */
    dd_lease_hold_t *hold; /* that claim's lease, renewed while held */
    int64_t due_ms;        /* waiting (dd_now_ms) until then */
    int ext_waits;         /* times it found its key in progress under another claim */
    int unknowns;          /* reconcile() answered UNKNOWN */
    int db_errors;         /* retriable database errors in a row */
    int rewound;           /* read again because the database went back in time: a key found absent
                            * may have been acted on under a claim the database lost */
    /* the hash of its lane key (dd_lanes_push): equal lane keys, equal
     * hashes; external.in_flight acts one lane key at a time */
    uint32_t lane_hash;
} dd_item_t;

/* The JSON text the item's key, hash and tree come from (see text). */
static inline const char *dd_item_text(const dd_item_t *item, size_t *len)
{
    if (item->text) {
        *len = item->text_len;
        return item->text;
    }
    *len = item->rkm->len;
    return item->rkm->payload;
}

/* A zeroed item, or NULL when out of memory. */
dd_item_t *dd_item_new(void);
/* Frees what the item holds (message, tree, document, response) and zeroes it, for
 * reuse. pool: where its tree was parsed (NULL: the heap). */
void dd_item_reset(dd_item_t *item, dd_parse_pool_t *pool);
/* dd_item_reset() and free; NULL is fine. */
void dd_item_destroy(dd_item_t *item, dd_parse_pool_t *pool);
/* Destroys every item of a list linked by next. */
void dd_item_list_destroy(dd_item_t *list, dd_parse_pool_t *pool);

#endif /* DD_ITEM_H */
