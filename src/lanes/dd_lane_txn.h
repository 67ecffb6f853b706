/*
 * The batch transaction, one of a lane's executors (see dd_lane_txn.c):
 * its scratch space, sized for batch.max_messages, and its test faults.
 * It calls down to the lane's connection (dd_lane_conn.h) only.
 */
#ifndef DD_LANE_TXN_H
#define DD_LANE_TXN_H

#include <stddef.h>

#include "dd_claim.h"
#include "dd_lane_conn.h"

/* Outcomes of one attempt at the transaction besides 0 and a dd_err_t
 * class, each met by rolling it back; they never leave dd_lane_txn.c. */
typedef enum {
    DD_TXN_RACED = DD_CLAIM_RACED, /* a deferred claim lost to another consumer: replay, locking */
    DD_TXN_RETRY = -9,             /* the handler asked to retry a message: back off, run again */
    DD_TXN_REDO = -10,             /* a message failed without a savepoint: run with savepoints */
    DD_TXN_DECLINED = -11,         /* handle_batch() declined: run message by message */
    DD_TXN_FAULT = -12             /* a test fault rolled it back after the handler: run again */
} dd_lane_txn_outcome_t;

typedef struct {
    dd_lane_conn_t *conn;
    dd_claim_t *claims;    /* claims[i] belongs to items[i] */
    dd_claim_t **claimv;   /* one per key, sorted */
    dd_claim_t **claimw;   /* the pre-check's scratch */
    dd_claim_rows_t *rows; /* the finish's scratch */
    dedupd_msg *msgs;      /* handle_batch() arguments, batch.max_messages each */
    const dedupd_msg **msgv;
    dedupd_result *results;
    dd_item_t *decided; /* REJECT seen without a savepoint (see dd_lane_txn.c) */
    int declined_route; /* whose handle_batch() declined the last batched attempt */
    int precheck;       /* the last batch found many keys applied: pre-check */
    struct {
        int blind;                 /* DEDUPD_TEST_FAULTS=precheck_blind */
        int rollback;              /* DEDUPD_TEST_FAULTS=rollback_after_handler */
        unsigned long commit_lost; /* DEDUPD_TEST_FAULTS=commit_lost=N: every Nth */
        unsigned long commits;
    } fault;
} dd_lane_txn_t;

/* Scratch for batches of up to cap messages on conn. */
int dd_lane_txn_init(dd_lane_txn_t *txn, dd_lane_conn_t *conn, size_t cap, char *errstr,
                     size_t errstr_size);
/* Frees the scratch; a zeroed or half-built txn is fine. */
void dd_lane_txn_release(dd_lane_txn_t *txn);

/* One transaction over items[0..n) (see dd_lane_txn.c). Sets *retry_at to
 * the index of a message whose handler asked for RETRY (everything rolled
 * back) or -1. Returns 0 or a dd_err_t class. */
int dd_lane_txn_run(dd_lane_txn_t *txn, dd_item_t **items, size_t n, long *retry_at, dd_stats_t *d,
                    char *errstr, size_t errstr_size);

#endif /* DD_LANE_TXN_H */
