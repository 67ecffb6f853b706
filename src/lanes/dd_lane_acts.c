/*
 * External mode's calls in flight (see dd_lane_acts.h). One slot per
 * thread: the lane fills a free slot with a message's act() and the
 * threads run it; the lane takes the result back when it ends. Only the
 * lane thread frees or fills a slot, only the threads run one, all under
 * one mutex: a slot moves FREE -> QUEUED (lane) -> RUNNING -> DONE
 * (thread) -> FREE (lane). Each slot keeps its own copy of the message's
 * headers, as the lane reuses its own array for the next message.
 */
#include "dd_lane_acts.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

enum { DD_ACT_FREE = 0, DD_ACT_QUEUED, DD_ACT_RUNNING, DD_ACT_DONE };

typedef struct {
    int state;
    dd_item_t *item;
    dd_handler_t *h;
    dedupd_msg msg;
    dedupd_header *hdrs; /* msg's headers, hdr_cap of room */
    size_t hdr_cap;
    dedupd_status st;
    dedupd_result res;
    int64_t retry_ms;
} dd_lane_act_t;

struct dd_lane_acts_s {
    pthread_mutex_t mu;
    pthread_cond_t work;  /* a slot queued, or stop */
    pthread_cond_t ended; /* a call ended */
    int stop;
    int n, started;
    pthread_t *thr;
    dd_lane_act_t *slot;
    void (*wake)(void *);
    void *arg;
};

static dd_lane_act_t *dd_lane_acts_find(dd_lane_acts_t *acts, int state)
{
    for (int i = 0; i < acts->n; i++)
        if (acts->slot[i].state == state) return &acts->slot[i];
    return NULL;
}

static void *dd_lane_acts_main(void *arg)
{
    dd_lane_acts_t *acts = arg;
    dd_lane_act_t *a;

    pthread_mutex_lock(&acts->mu);
    for (;;) {
        while (!acts->stop && !(a = dd_lane_acts_find(acts, DD_ACT_QUEUED)))
            pthread_cond_wait(&acts->work, &acts->mu);
        if (acts->stop) break;
        a->state = DD_ACT_RUNNING;
        pthread_mutex_unlock(&acts->mu);
        a->st = dd_handler_act(a->h, &a->msg, &a->res);
        a->retry_ms = dd_handler_retry_after_ms(); /* this thread's call's */
        pthread_mutex_lock(&acts->mu);
        a->state = DD_ACT_DONE;
        pthread_cond_broadcast(&acts->ended);
        pthread_mutex_unlock(&acts->mu);
        acts->wake(acts->arg); /* outside our lock: it takes the lane's */
        pthread_mutex_lock(&acts->mu);
    }
    pthread_mutex_unlock(&acts->mu);
    return NULL;
}

int dd_lane_acts_new(dd_lane_acts_t **actsp, int n, void (*wake)(void *), void *arg, char *errstr,
                     size_t errstr_size)
{
    dd_lane_acts_t *acts = calloc(1, sizeof(*acts));

    *actsp = NULL;
    if (!acts || !(acts->slot = calloc((size_t)n, sizeof(*acts->slot))) ||
        !(acts->thr = calloc((size_t)n, sizeof(*acts->thr)))) {
        if (acts) free(acts->slot);
        free(acts);
        dd_errstr_set(errstr, errstr_size, "out of memory for %d calls in flight", n);
        return DD_ERR_NOMEM;
    }
    acts->n = n;
    acts->wake = wake;
    acts->arg = arg;
    pthread_mutex_init(&acts->mu, NULL);
    pthread_cond_init(&acts->work, NULL);
    pthread_cond_init(&acts->ended, NULL);
    for (; acts->started < n; acts->started++)
        if (pthread_create(&acts->thr[acts->started], NULL, dd_lane_acts_main, acts) != 0) {
            dd_lane_acts_destroy(acts);
            dd_errstr_set(errstr, errstr_size, "cannot start the threads of external.in_flight");
            return DD_ERR_FATAL;
        }
    *actsp = acts;
    return DD_OK;
}

void dd_lane_acts_drain(dd_lane_acts_t *acts)
{
    pthread_mutex_lock(&acts->mu);
    while (dd_lane_acts_find(acts, DD_ACT_QUEUED) || dd_lane_acts_find(acts, DD_ACT_RUNNING))
        pthread_cond_wait(&acts->ended, &acts->mu);
    pthread_mutex_unlock(&acts->mu);
}

void dd_lane_acts_destroy(dd_lane_acts_t *acts)
{
    if (!acts) return;
    if (acts->started == acts->n) dd_lane_acts_drain(acts);
    pthread_mutex_lock(&acts->mu);
    acts->stop = 1;
    pthread_cond_broadcast(&acts->work);
    pthread_mutex_unlock(&acts->mu);
    for (int i = 0; i < acts->started; i++)
        pthread_join(acts->thr[i], NULL);
    for (int i = 0; i < acts->n; i++) {
        free(acts->slot[i].hdrs);
        if (acts->slot[i].state == DD_ACT_DONE) free(acts->slot[i].res.response);
    }
    pthread_mutex_destroy(&acts->mu);
    pthread_cond_destroy(&acts->work);
    pthread_cond_destroy(&acts->ended);
    free(acts->thr);
    free(acts->slot);
    free(acts);
}

int dd_lane_acts_can_start(const dd_lane_acts_t *acts, uint32_t lane_hash)
{
    dd_lane_acts_t *a = (dd_lane_acts_t *)acts; /* the lock is not the state */
    int free_slot = 0, busy = 0;

    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < a->n; i++) {
        if (a->slot[i].state == DD_ACT_FREE)
            free_slot = 1;
        else if (a->slot[i].item->lane_hash == lane_hash)
            busy = 1;
    }
    pthread_mutex_unlock(&a->mu);
    return free_slot && !busy;
}

int dd_lane_acts_submit(dd_lane_acts_t *acts, dd_handler_t *h, dd_item_t *item,
                        const dedupd_msg *msg)
{
    dd_lane_act_t *a;

    pthread_mutex_lock(&acts->mu);
    a = dd_lane_acts_find(acts, DD_ACT_FREE);
    pthread_mutex_unlock(&acts->mu);
    if (!a) return DD_ERR_ARG; /* the caller asked dd_lane_acts_can_start */
    if (msg->header_cnt > a->hdr_cap) {
        dedupd_header *p = realloc(a->hdrs, msg->header_cnt * sizeof(*p));
        if (!p) return DD_ERR_NOMEM;
        a->hdrs = p;
        a->hdr_cap = msg->header_cnt;
    }
    if (msg->header_cnt) memcpy(a->hdrs, msg->headers, msg->header_cnt * sizeof(*a->hdrs));
    a->msg = *msg;
    a->msg.headers = msg->header_cnt ? a->hdrs : NULL;
    a->item = item;
    a->h = h;
    pthread_mutex_lock(&acts->mu);
    a->state = DD_ACT_QUEUED;
    pthread_cond_signal(&acts->work);
    pthread_mutex_unlock(&acts->mu);
    return DD_OK;
}

dd_item_t *dd_lane_acts_take(dd_lane_acts_t *acts, dedupd_status *st, dedupd_result *res,
                             int64_t *retry_after_ms)
{
    dd_lane_act_t *a;
    dd_item_t *item = NULL;

    pthread_mutex_lock(&acts->mu);
    if ((a = dd_lane_acts_find(acts, DD_ACT_DONE))) {
        item = a->item;
        *st = a->st;
        *res = a->res;
        *retry_after_ms = a->retry_ms;
        a->res.response = NULL;
        a->item = NULL;
        a->state = DD_ACT_FREE;
    }
    pthread_mutex_unlock(&acts->mu);
    return item;
}

/* Slots in state (FREE) or not in it. */
static int dd_lane_acts_count(dd_lane_acts_t *acts, int in_state)
{
    int n = 0;

    pthread_mutex_lock(&acts->mu);
    for (int i = 0; i < acts->n; i++)
        n += (acts->slot[i].state == DD_ACT_FREE) == in_state;
    pthread_mutex_unlock(&acts->mu);
    return n;
}

int dd_lane_acts_free(dd_lane_acts_t *acts)
{
    return dd_lane_acts_count(acts, 1);
}

int dd_lane_acts_pending(dd_lane_acts_t *acts)
{
    return dd_lane_acts_count(acts, 0);
}

int dd_lane_acts_ready(dd_lane_acts_t *acts)
{
    int ready;

    pthread_mutex_lock(&acts->mu);
    ready = dd_lane_acts_find(acts, DD_ACT_DONE) != NULL;
    pthread_mutex_unlock(&acts->mu);
    return ready;
}
