/*
 * A lane: one thread, one database connection, batches of messages whose
 * keys hash to it. Each batch is one transaction: claim every key, run the
 * handler for the keys this batch owns (a savepoint each), record outcomes,
 * COMMIT. Finished items go back to the main thread through `done`.
 */
#ifndef DD_LANE_H
#define DD_LANE_H

#include <pthread.h>
#include <stddef.h>

#include "dd_claim.h"
#include "dd_conf.h"
#include "dd_handler.h"
#include "dd_item.h"

typedef struct dd_lane_s dd_lane_t;

/* Shared by the main thread and every lane. */
typedef struct {
    const dd_conf_t *conf;
    dd_handler_t *h;
    const dd_hash_spec_t *hspec;
    dd_claim_opts_t copts;

    pthread_mutex_t mu; /* guards done list and stats */
    pthread_cond_t cv;  /* signalled when items are done */
    dd_item_t *done_head, *done_tail;
    dd_stats_t stats;

    volatile int stop_soft; /* finish queued work, then exit */
    volatile int stop_hard; /* abandon work now (shutdown timeout) */
    volatile int fatal;
    char fatal_err[1024];
} dd_lane_shared_t;

int dd_lane_start(dd_lane_t **lanep, dd_lane_shared_t *sh, int idx, char *errstr,
                  size_t errstr_size);
/* Takes the list of finished items (NULL when none), waiting up to wait_ms
 * for some when none are there yet (and the lanes are not failed). */
dd_item_t *dd_lane_take_done(dd_lane_shared_t *sh, int wait_ms);

/* Hands an item to the lane (main thread). */
void dd_lane_push(dd_lane_t *lane, dd_item_t *item);
/* Wakes the lane so it sees stop flags; joins and frees it. Items still
 * queued are returned through *leftover (a list) for the caller to free. */
void dd_lane_join(dd_lane_t *lane, dd_item_t **leftover);

#endif /* DD_LANE_H */
