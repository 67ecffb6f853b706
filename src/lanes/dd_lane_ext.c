/*
 * A route whose handler is in external mode (include/dedupd/handler.h,
 * "External mode"): the lane runs each of its messages through the
 * protocol on its own, instead of a batch transaction, because the effect
 * happens outside the database:
 *
 *   claim ──owned──▶ [reconcile, after a takeover] ──▶ act ──▶ finish ──▶ done
 *     │ busy: another claim's lease runs: wait, claim again
 *     └ applied / conflict / failed: duplicate or dead letter, done
 *
 * A message that must wait (its key in progress under another claim, a
 * RETRY, an UNKNOWN answer, a database error) is parked with a due time and
 * the lane goes on with other messages: waiting never holds up other keys.
 * The claim of a parked message stays held and renewed (dd_lease) unless
 * it waits for someone else's. Before every call into the handler and
 * before finishing, the lane checks that the claim is still held; if not,
 * the message goes back to its claim, which finds what the newer owner did
 * (a claim found taken over before its finish is logged with both tokens,
 * as a finish finding the newer token is). The finish itself only writes a
 * row that still carries the token, so a claim lost in the last moment
 * finishes nothing either.
 */
#include "dd_lane_ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"
#include "dd_utf8.h"

/* item->ext_step */
enum { DD_STEP_CLAIM = 0, DD_STEP_RECONCILE, DD_STEP_ACT, DD_STEP_FINISH };

/* What a step says about the message. */
enum {
    DD_EXT_NEXT,  /* go on with its next step now */
    DD_EXT_DONE,  /* finished: outcome set, its offset may move */
    DD_EXT_PARK,  /* wait until item->due_ms */
    DD_EXT_FATAL, /* the lane fails (set already) */
    DD_EXT_AWAY,  /* its act() runs on a thread of external.in_flight (dd_lane_acts.c) */
};

/* A line about one message (topic, partition, offset and key with it). */
#define dd_lane_ext_log(level, item, ...)                                                          \
    dd_log_msg((level), rd_kafka_topic_name((item)->rkm->rkt), (item)->rkm->partition,             \
               (item)->rkm->offset, (item)->key, __VA_ARGS__)

/* The item's route: its handler, hash specification and counters. */
static const dd_route_t *dd_lane_ext_route(const dd_lane_ext_t *ext, const dd_item_t *item)
{
    return &ext->conn->env->routes->route[item->route];
}

/* The statements' options of the item's route: its dedup table. */
static const dd_external_opts_t *dd_lane_ext_opts(const dd_lane_ext_t *ext, const dd_item_t *item)
{
    return &ext->conn->env->route[item->route].xopts;
}

/* ---- waiting ---- */

static void dd_lane_ext_park(dd_lane_ext_t *ext, dd_item_t *item, int64_t wait_ms)
{
    dd_item_t **pp = &ext->parked;

    /* At least 1 ms: a round of due messages ends (dd_lane_ext_process). */
    item->due_ms = dd_now_ms() + (wait_ms > 1 ? wait_ms : 1);
    while (*pp && (*pp)->due_ms <= item->due_ms)
        pp = &(*pp)->next;
    item->next = *pp;
    *pp = item;
}

int dd_lane_ext_due(const dd_lane_ext_t *ext)
{
    return (ext->parked && ext->parked->due_ms <= dd_now_ms()) ||
           (ext->acts && dd_lane_acts_ready(ext->acts));
}

/* ---- the claim a message holds ---- */

static void dd_lane_ext_drop_claim(dd_lane_ext_t *ext, dd_item_t *item)
{
    dd_lease_release(ext->conn->env->lease, item->hold);
    item->hold = NULL;
    item->fence = 0;
}

static int dd_lane_ext_held(dd_lane_ext_t *ext, const dd_item_t *item)
{
    return dd_lease_held(ext->conn->env->lease, item->hold);
}

/* A claim lost, to a takeover or for want of renewal: what was done under
 * it is dropped and the message goes back to its claim. */
static int dd_lane_ext_reclaim(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    d->route[item->route].ext_stale++;
    dd_lane_ext_drop_claim(ext, item);
    free(item->response);
    item->response = NULL;
    item->outcome = DD_OUT_NONE;
    item->ext_step = DD_STEP_CLAIM;
    return DD_EXT_NEXT;
}

/* The claim was lost before `when`: the handler is not called for it any
 * more, and nothing is finished. The message goes back to its claim, which
 * finds what the newer owner did (applied: a duplicate; still processing:
 * it waits). */
static int dd_lane_ext_lost(dd_lane_ext_t *ext, dd_item_t *item, const char *when, dd_stats_t *d)
{
    dd_lane_ext_log(DD_LOG_WARN, item,
                    "Lost the claim of this key (token %lld) %s: %s. Not going on with it; "
                    "the key is claimed again.",
                    (long long)item->fence, when, dd_lease_why(ext->conn->env->lease, item->hold));
    return dd_lane_ext_reclaim(ext, item, d);
}

/* A database error during a step: retriable ones park the message (the
 * step is tried again) and have the connection checked; others fail the
 * lane. */
static int dd_lane_ext_db_error(dd_lane_ext_t *ext, dd_item_t *item, int rc, const char *err,
                                dd_stats_t *d)
{
    if (rc != DD_ERR_RETRIABLE) {
        dd_lane_conn_fatal(ext->conn, err);
        return DD_EXT_FATAL;
    }
    d->db_errors_retriable++;
    dd_lane_ext_log(DD_LOG_WARN, item, "Database error, trying again: %s", err);
    ext->reconnect = 1;
    dd_lane_ext_park(ext, item, dd_lane_conn_backoff_ms(ext->conn, ++item->db_errors));
    return DD_EXT_PARK;
}

/* What the handler sees of item (dd_lane_conn_msg_fill); DD_EXT_FATAL, the
 * lane failed, when out of memory for its headers. */
static int dd_lane_ext_msg(dd_lane_ext_t *ext, const dd_item_t *item, dedupd_msg *msg)
{
    char err[128];
    size_t at = 0;

    if (dd_lane_conn_headers_reserve(ext->conn, dd_lane_conn_header_cnt(item->rkm), err,
                                     sizeof(err)) != DD_OK) {
        dd_lane_conn_fatal(ext->conn, err);
        return DD_EXT_FATAL;
    }
    dd_lane_conn_msg_fill(ext->conn, item, &at, msg);
    return DD_EXT_NEXT;
}

/* The effect happened (act() or reconcile() said so): keep the response
 * (taken over) for the finish. One that is not UTF-8 cannot be stored. */
static void dd_lane_ext_applied(dd_item_t *item, char *response, const char *note)
{
    if (note[0]) dd_lane_ext_log(DD_LOG_WARN, item, "%s; not stored.", note);
    if (response && !dd_utf8_valid(response, strlen(response))) {
        dd_lane_ext_log(DD_LOG_WARN, item, "Handler response is not valid UTF-8; not stored.");
        free(response);
        response = NULL;
    }
    free(item->response);
    item->response = response;
    item->outcome = DD_OUT_APPLIED;
    item->ext_step = DD_STEP_FINISH;
}

/* The wait before the next attempt after act() answered RETRY or
 * reconcile() UNKNOWN: the backoff, or longer when the handler asked for
 * longer (asked: host->retry_after, a service's Retry-After). */
static int64_t dd_lane_ext_retry_wait_ms(dd_lane_ext_t *ext, int attempt, int64_t asked)
{
    int64_t backoff = dd_lane_conn_backoff_ms(ext->conn, attempt);

    return asked > backoff ? asked : backoff;
}

/* ---- the steps ---- */

/* A key claimed anew whose message was read again because the database
 * went back in time: its earlier claim may have been lost with the
 * database after act() ran, so the handler is asked first, as after a
 * takeover. */
static int dd_lane_ext_rewound(dd_lane_ext_t *ext, dd_item_t *item)
{
    if (!item->rewound || !dd_handler_has_reconcile(dd_lane_ext_route(ext, item)->h))
        return DD_EXT_NEXT;
    item->ext_step = DD_STEP_RECONCILE;
    dd_lane_ext_log(DD_LOG_INFO, item,
                    "Claimed anew a key read again after the database went back in time "
                    "(token %lld); asking reconcile() first.",
                    (long long)item->fence);
    return DD_EXT_NEXT;
}

/* Waiting for another claim: back off, but not much past the end of its
 * lease, when the key may be taken over. */
static int dd_lane_ext_busy(dd_lane_ext_t *ext, dd_item_t *item, const dd_external_claim_t *c,
                            dd_stats_t *d)
{
    int64_t wait = dd_lane_conn_backoff_ms(ext->conn, ++item->ext_waits);
    int64_t left = (int64_t)(c->lease_left_s * 1000) + 20;

    d->route[item->route].ext_waits++;
    dd_lane_ext_log(item->ext_waits == 1 ? DD_LOG_INFO : DD_LOG_DEBUG, item,
                    "Key in progress under the claim of %s (token %lld, lease %.3f s more): "
                    "this message waits.",
                    c->prev_owner, (long long)c->prev_fence, c->lease_left_s);
    dd_lane_ext_park(ext, item, left > 0 && left < wait ? left : wait);
    return DD_EXT_PARK;
}

static int dd_lane_ext_claim(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    dd_external_claim_t c = {.key = item->key,
                             .key_len = item->key_len,
                             .hash = item->hash,
                             .topic = rd_kafka_topic_name(item->rkm->rkt),
                             .partition = item->rkm->partition,
                             .offset = item->rkm->offset};
    int64_t t0 = dd_now_ms();
    char err[512];
    int rc = dd_external_claim(ext->conn->db, dd_lane_ext_opts(ext, item), &c, &ext->conn->sql, err,
                               sizeof(err));

    if (rc) return dd_lane_ext_db_error(ext, item, rc, err, d);
    item->db_errors = 0;
    switch (c.result) {
    case DD_EXTERNAL_OWNED:
        item->fence = c.fence;
        item->hold = dd_lease_hold(ext->conn->env->lease, dd_lane_ext_opts(ext, item),
                                   ext->conn->shard, item->key, item->key_len, c.fence, t0);
        item->ext_step = DD_STEP_ACT;
        if (!c.taken_over) return dd_lane_ext_rewound(ext, item);
        d->route[item->route].ext_takeovers++;
        if (dd_handler_has_reconcile(dd_lane_ext_route(ext, item)->h))
            item->ext_step = DD_STEP_RECONCILE;
        dd_lane_ext_log(DD_LOG_INFO, item,
                        "Took the key over from %s (token %lld -> %lld, it was %s)%s.",
                        c.prev_owner[0] ? c.prev_owner : "an unknown owner",
                        (long long)c.prev_fence, (long long)c.fence,
                        c.prev_status == DD_ROW_FAILED ? "failed" : "processing past its lease",
                        item->ext_step == DD_STEP_RECONCILE
                            ? "; asking reconcile() first"
                            : "; the handler has no reconcile(): acting again, the effect may "
                              "happen twice");
        return DD_EXT_NEXT;
    case DD_EXTERNAL_APPLIED:
        item->outcome = DD_OUT_DUPLICATE;
        d->duplicates++;
        d->route[item->route].duplicates++;
        return DD_EXT_DONE;
    case DD_EXTERNAL_CONFLICT:
        d->conflicts++;
        d->route[item->route].conflicts++;
        dd_lane_conn_dlq(item, DD_REASON_CONFLICT, "%s",
                         "business key already recorded with other content");
        return DD_EXT_DONE;
    case DD_EXTERNAL_FAILED:
        dd_lane_conn_dlq(item, DD_REASON_REJECTED, "previously rejected: %.200s", c.row_error);
        return DD_EXT_DONE;
    case DD_EXTERNAL_BUSY:
        break;
    }
    return dd_lane_ext_busy(ext, item, &c, d);
}

/* The message is to be recorded failed and dead-lettered. */
static int dd_lane_ext_give_up(dd_item_t *item, dd_reason_t reason, const char *fmt,
                               const char *arg)
{
    dd_lane_conn_dlq(item, reason, fmt, arg);
    dd_lane_ext_log(DD_LOG_INFO, item, "Message %s: %s", dd_reason2str(item->reason), item->error);
    item->ext_step = DD_STEP_FINISH;
    return DD_EXT_NEXT;
}

static int dd_lane_ext_reconcile(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    const dd_conf_t *conf = ext->conn->env->conf;
    dedupd_result res;
    dedupd_outcome out;

    if (!dd_lane_ext_held(ext, item))
        return dd_lane_ext_lost(ext, item, "before asking reconcile()", d);
    out = dd_handler_reconcile(dd_lane_ext_route(ext, item)->h, item->key, item->fence, &res);
    d->route[item->route].ext_reconciled[out]++;
    if (out == DEDUPD_DONE) {
        dd_lane_ext_log(DD_LOG_INFO, item,
                        "reconcile() says the effect happened: recording the key applied "
                        "without acting again.");
        dd_lane_ext_applied(item, res.response, res.error);
        return DD_EXT_NEXT;
    }
    if (out == DEDUPD_NOT_DONE) {
        dd_lane_ext_log(DD_LOG_INFO, item,
                        "reconcile() says the effect did not happen: acting again.");
        item->ext_step = DD_STEP_ACT;
        return DD_EXT_NEXT;
    }
    item->unknowns++;
    if (conf->external.unknown_attempts > 0 && item->unknowns >= conf->external.unknown_attempts)
        return dd_lane_ext_give_up(item, DD_REASON_UNRESOLVED,
                                   "reconcile() could not tell whether the effect happened: %.200s",
                                   res.error[0] ? res.error : "UNKNOWN");
    dd_lane_ext_log(DD_LOG_INFO, item, "reconcile() cannot tell yet (%d): %s; asking again later.",
                    item->unknowns, res.error[0] ? res.error : "UNKNOWN");
    dd_lane_ext_park(ext, item,
                     dd_lane_ext_retry_wait_ms(ext, item->unknowns, dd_handler_retry_after_ms()));
    return DD_EXT_PARK;
}

static int dd_lane_ext_away(dd_lane_ext_t *ext, dd_handler_t *h, dd_item_t *item,
                            const dedupd_msg *msg);

/* What act() answered: st, res (its response taken over) and the wait it
 * asked for before another attempt (-1: none). */
static int dd_lane_ext_acted(dd_lane_ext_t *ext, dd_item_t *item, dedupd_status st,
                             dedupd_result *res, int64_t asked, dd_stats_t *d)
{
    const dd_conf_t *conf = ext->conn->env->conf;

    if (st == DEDUPD_OK) {
        dd_lane_ext_applied(item, res->response, res->error);
        return DD_EXT_NEXT;
    }
    if (st == DEDUPD_REJECT) return dd_lane_ext_give_up(item, DD_REASON_REJECTED, "%s", res->error);
    item->attempts++;
    d->retries++;
    d->route[item->route].retries++;
    dd_lane_conn_log_retry(ext->conn, item, 0, res->error); /* act() has a connection of its own */
    if (conf->retry.max_attempts > 0 && item->attempts >= conf->retry.max_attempts)
        return dd_lane_ext_give_up(item, DD_REASON_RETRIES_EXHAUSTED,
                                   "gave up after retries: %.200s", res->error);
    dd_lane_ext_park(ext, item, dd_lane_ext_retry_wait_ms(ext, item->attempts, asked));
    return DD_EXT_PARK;
}

static int dd_lane_ext_act(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    dd_handler_t *h = dd_lane_ext_route(ext, item)->h;
    dedupd_result res;
    dedupd_msg msg;
    dedupd_status st;

    if (!dd_lane_ext_held(ext, item)) return dd_lane_ext_lost(ext, item, "before calling act()", d);
    if (dd_lane_ext_msg(ext, item, &msg) != DD_EXT_NEXT) return DD_EXT_FATAL;
    if (ext->acts) return dd_lane_ext_away(ext, h, item, &msg);
    st = dd_handler_act(h, &msg, &res);
    return dd_lane_ext_acted(ext, item, st, &res, dd_handler_retry_after_ms(), d);
}

/* The claim was taken over before its finish: the row carries a newer
 * token and, soon or already, the newer owner's result, which stands. The
 * message goes back to its claim (a duplicate once the newer owner is
 * done). */
static int dd_lane_ext_peek(dd_lane_ext_t *ext, const dd_item_t *item, int64_t *fence, int *status,
                            char *owner, size_t owner_size)
{
    char err[256];
    int rc = dd_external_peek(ext->conn->db, dd_lane_ext_opts(ext, item), item->key, item->key_len,
                              fence, status, owner, owner_size, &ext->conn->sql, err, sizeof(err));

    if (rc != DD_OK) snprintf(owner, owner_size, "? (%.120s)", err);
    return rc;
}

static int dd_lane_ext_stale_log(dd_lane_ext_t *ext, dd_item_t *item, int64_t fence, int status,
                                 const char *owner, dd_stats_t *d)
{
    dd_lane_ext_log(DD_LOG_WARN, item,
                    "Finished nothing: the claim of this key (token %lld) was taken over "
                    "before its finish; the row carries token %lld (status %d, owner %s), "
                    "whose result stands.",
                    (long long)item->fence, (long long)fence, status, owner);
    return dd_lane_ext_reclaim(ext, item, d);
}

static int dd_lane_ext_stale(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    char owner[129] = "";
    int64_t fence = -1;
    int status = -1;

    dd_lane_ext_peek(ext, item, &fence, &status, owner, sizeof(owner));
    return dd_lane_ext_stale_log(ext, item, fence, status, owner, d);
}

/* The claim is not held when the finish comes (the lease ran out here: the
 * process was paused, or the database did not answer the renewals). Not
 * finishing, but saying what happened: when the row carries a newer token,
 * another consumer took the key over, and the warning names both tokens,
 * as a finish finding it would; else why the lease was lost. */
static int dd_lane_ext_finish_unheld(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    char owner[129] = "";
    int64_t fence = -1;
    int status = -1;

    if (dd_lane_ext_peek(ext, item, &fence, &status, owner, sizeof(owner)) == DD_OK &&
        fence > item->fence)
        return dd_lane_ext_stale_log(ext, item, fence, status, owner, d);
    return dd_lane_ext_lost(ext, item, "before finishing", d);
}

/* finish() answered RETRY or REJECT after the effect happened. */
static int dd_lane_ext_finish_failed(dd_lane_ext_t *ext, dd_item_t *item, dedupd_status st,
                                     const char *why, dd_stats_t *d)
{
    const dd_conf_t *conf = ext->conn->env->conf;

    if (st == DEDUPD_REJECT)
        return dd_lane_ext_give_up(item, DD_REASON_REJECTED,
                                   "finish() rejected the message after act() did its effect: "
                                   "%.180s",
                                   why);
    item->attempts++;
    d->retries++;
    d->route[item->route].retries++;
    dd_lane_ext_log(DD_LOG_INFO, item, "finish() asked to retry (attempt %d): %s", item->attempts,
                    why);
    if (conf->retry.max_attempts > 0 && item->attempts >= conf->retry.max_attempts)
        return dd_lane_ext_give_up(item, DD_REASON_RETRIES_EXHAUSTED,
                                   "gave up after retries of finish(): %.180s", why);
    dd_lane_ext_park(ext, item, dd_lane_conn_backoff_ms(ext->conn, item->attempts));
    return DD_EXT_PARK;
}

static int dd_lane_ext_finish(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    dd_handler_t *h = dd_lane_ext_route(ext, item)->h;
    int applied = item->outcome == DD_OUT_APPLIED, held = 0, rc;
    dedupd_status st = DEDUPD_OK;
    char err[1024], why[256] = "";

    if (!dd_lane_ext_held(ext, item)) return dd_lane_ext_finish_unheld(ext, item, d);
    if (applied && dd_handler_has_finish(h)) {
        dedupd_result res = {.response = item->response};
        dedupd_msg msg;

        if (dd_lane_ext_msg(ext, item, &msg) != DD_EXT_NEXT) return DD_EXT_FATAL;
        rc = dd_external_finish_txn(ext->conn->db, dd_lane_ext_opts(ext, item), h, &msg, &res,
                                    &held, &st, &ext->conn->sql, err, sizeof(err));
        item->response = res.response;
        snprintf(why, sizeof(why), "%s", res.error);
    } else
        rc = dd_external_finish(
            ext->conn->db, dd_lane_ext_opts(ext, item), item->key, item->key_len, item->fence,
            applied ? DD_ROW_APPLIED : DD_ROW_FAILED, applied ? item->response : NULL,
            applied ? NULL : item->error, &held, &ext->conn->sql, err, sizeof(err));
    if (rc) return dd_lane_ext_db_error(ext, item, rc, err, d);
    item->db_errors = 0;
    if (!held) return dd_lane_ext_stale(ext, item, d);
    if (st != DEDUPD_OK) return dd_lane_ext_finish_failed(ext, item, st, why, d);
    dd_lane_ext_drop_claim(ext, item);
    free(item->response);
    item->response = NULL;
    if (applied) {
        d->applied++;
        d->route[item->route].applied++;
        d->shard[item->shard].applied++;
    }
    return DD_EXT_DONE;
}

/* ---- a message through the protocol ---- */

/* Checks the connection after a database error: a lost one is opened
 * again, with every route's handler state on it (dd_lane_conn_reconnect). A
 * retriable failure leaves the check for the next step; another fails the
 * lane (DD_EXT_FATAL), as it does the batch transaction's. */
static int dd_lane_ext_reconnect(dd_lane_ext_t *ext)
{
    char err[512];
    int rc;

    if (!ext->reconnect) return DD_EXT_NEXT;
    rc = dd_lane_conn_reconnect(ext->conn, err, sizeof(err));
    if (rc == DD_OK) {
        ext->reconnect = 0;
        return DD_EXT_NEXT;
    }
    if (rc != DD_ERR_RETRIABLE) {
        dd_lane_conn_fatal(ext->conn, err);
        return DD_EXT_FATAL;
    }
    dd_log(DD_LOG_WARN, "Lane %d: %s", ext->conn->idx, err);
    return DD_EXT_NEXT;
}

/* Runs item's steps until it is done, waits or the lane fails. */
static int dd_lane_ext_run(dd_lane_ext_t *ext, dd_item_t *item, dd_stats_t *d)
{
    int r = DD_EXT_NEXT;

    for (int steps = 0; r == DD_EXT_NEXT; steps++) {
        if (dd_lane_ext_reconnect(ext) == DD_EXT_FATAL) return DD_EXT_FATAL;
        if (steps >= 16) { /* a claim lost again and again: let the others go first */
            dd_lane_ext_park(ext, item, dd_lane_conn_backoff_ms(ext->conn, 1));
            return DD_EXT_PARK;
        }
        switch (item->ext_step) {
        case DD_STEP_CLAIM:
            r = dd_lane_ext_claim(ext, item, d);
            break;
        case DD_STEP_RECONCILE:
            r = dd_lane_ext_reconcile(ext, item, d);
            break;
        case DD_STEP_ACT:
            r = dd_lane_ext_act(ext, item, d);
            break;
        default:
            r = dd_lane_ext_finish(ext, item, d);
            break;
        }
    }
    return r;
}

/* Reports what a run of item's steps ended with (r) and counted (d): done,
 * or kept (parked, away). Returns 0, or -1 when the lane failed (the
 * message is then not taken: its claim given up, it starts again from its
 * claim). */
static int dd_lane_ext_post(dd_lane_ext_t *ext, dd_item_t *item, int r, dd_stats_t *d)
{
    dd_lane_conn_post(ext->conn, r == DD_EXT_DONE ? &item : NULL, r == DD_EXT_DONE ? 1 : 0, d);
    if (r != DD_EXT_FATAL) return 0;
    dd_lane_ext_drop_claim(ext, item); /* the lane ends: nobody renews it any more */
    item->ext_step = DD_STEP_CLAIM;
    return -1;
}

/* One message: its steps until it is done, waits or acts away. */
static int dd_lane_ext_go(dd_lane_ext_t *ext, dd_item_t *item)
{
    dd_stats_t d;

    memset(&d, 0, sizeof(d));
    if (dd_lane_conn_hash(ext->conn, item) != 0) return -1;
    return dd_lane_ext_post(ext, item, dd_lane_ext_run(ext, item, &d), &d);
}

/* ---- calls in flight (external.in_flight, dd_lane_acts.h) ---- */

static int dd_lane_ext_away(dd_lane_ext_t *ext, dd_handler_t *h, dd_item_t *item,
                            const dedupd_msg *msg)
{
    if (dd_lane_acts_submit(ext->acts, h, item, msg) == DD_OK) return DD_EXT_AWAY;
    dd_lane_conn_fatal(ext->conn, "out of memory for a call in flight");
    return DD_EXT_FATAL;
}

/* A message starts now, or waits behind those waiting already: for a
 * free call, or for its lane key's call in flight to end. */
static int dd_lane_ext_one(dd_lane_ext_t *ext, dd_item_t *item)
{
    if (!ext->acts || (!ext->blocked && dd_lane_acts_can_start(ext->acts, item->lane_hash)))
        return dd_lane_ext_go(ext, item);
    item->next = NULL;
    if (ext->blocked_tail)
        ext->blocked_tail->next = item;
    else
        ext->blocked = item;
    ext->blocked_tail = item;
    return 0;
}

/* The calls that ended: each message goes on from what act() answered.
 * One the lane failed on goes back to the parked ones, for
 * dd_lane_ext_unpark. */
static void dd_lane_ext_returned(dd_lane_ext_t *ext)
{
    dedupd_status st;
    dedupd_result res;
    int64_t asked;
    dd_item_t *item;

    while (ext->acts && (item = dd_lane_acts_take(ext->acts, &st, &res, &asked))) {
        dd_stats_t d;
        int r;

        memset(&d, 0, sizeof(d));
        r = dd_lane_ext_acted(ext, item, st, &res, asked, &d);
        if (r == DD_EXT_NEXT) r = dd_lane_ext_run(ext, item, &d);
        if (dd_lane_ext_post(ext, item, r, &d) == 0) continue;
        item->next = ext->parked;
        ext->parked = item;
    }
}

/* The messages waiting for a call that can start now, in order: one whose
 * lane key is busy stays, and so do the later ones of its lane key (they
 * find it busy too, or no free call once an earlier one took the last).
 * The walk ends when no call is free: the list may hold all the lane's
 * messages. */
static void dd_lane_ext_unblock(dd_lane_ext_t *ext)
{
    dd_item_t **pp = &ext->blocked, *item, *prev = NULL;

    while ((item = *pp) && !dd_lane_conn_stopping(ext->conn) && dd_lane_acts_free(ext->acts) > 0) {
        if (!dd_lane_acts_can_start(ext->acts, item->lane_hash)) {
            prev = item;
            pp = &item->next;
            continue;
        }
        *pp = item->next;
        if (ext->blocked_tail == item) ext->blocked_tail = prev;
        item->next = NULL;
        if (dd_lane_ext_go(ext, item) == 0) continue;
        item->next = ext->parked;
        ext->parked = item;
        break;
    }
}

/* The lane ends: waits for its calls in flight and puts what they were for
 * with the parked messages (an effect that happened is found by the next
 * claim's reconcile()), and the messages waiting for a call too. */
static void dd_lane_ext_recall(dd_lane_ext_t *ext)
{
    dedupd_status st;
    dedupd_result res;
    int64_t asked;
    dd_item_t *item;

    if (!ext->acts) return;
    dd_lane_acts_drain(ext->acts);
    while ((item = dd_lane_acts_take(ext->acts, &st, &res, &asked))) {
        free(res.response);
        item->next = ext->parked;
        ext->parked = item;
    }
    if (ext->blocked_tail) {
        ext->blocked_tail->next = ext->parked;
        ext->parked = ext->blocked;
    }
    ext->blocked = ext->blocked_tail = NULL;
}

int dd_lane_ext_open_acts(dd_lane_ext_t *ext, int n, void (*wake)(void *), void *arg, char *errstr,
                          size_t errstr_size)
{
    return dd_lane_acts_new(&ext->acts, n, wake, arg, errstr, errstr_size);
}

/* ---- the lane's calls ---- */

size_t dd_lane_ext_process(dd_lane_ext_t *ext, dd_item_t **items, size_t n)
{
    size_t i = 0;

    dd_lane_ext_returned(ext);
    if (ext->blocked) dd_lane_ext_unblock(ext);
    /* Waiting messages first, those whose time came when the round began
     * (one parked again is due later, so this ends). One the lane failed
     * on goes back to the head, for dd_lane_ext_unpark. */
    for (int64_t now = dd_now_ms(); ext->parked && ext->parked->due_ms <= now;) {
        dd_item_t *item = ext->parked;
        if (dd_lane_conn_stopping(ext->conn)) break;
        ext->parked = item->next;
        item->next = NULL;
        if (dd_lane_ext_one(ext, item) == 0) continue;
        item->next = ext->parked;
        ext->parked = item;
        break;
    }
    for (; i < n && !dd_lane_conn_stopping(ext->conn); i++)
        if (dd_lane_ext_one(ext, items[i]) != 0) break;
    return i;
}

int dd_lane_ext_parked(const dd_lane_ext_t *ext)
{
    return ext->parked || ext->blocked || (ext->acts && dd_lane_acts_pending(ext->acts));
}

dd_item_t *dd_lane_ext_unpark(dd_lane_ext_t *ext)
{
    dd_item_t *item, *list;
    char err[512];
    int held;

    dd_lane_ext_recall(ext);
    list = ext->parked;
    for (item = list; item; item = item->next) {
        if (item->hold && dd_db_mysql(ext->conn->db))
            dd_external_expire(ext->conn->db, dd_lane_ext_opts(ext, item), item->key, item->key_len,
                               item->fence, &held, &ext->conn->sql, err, sizeof(err));
        dd_lane_ext_drop_claim(ext, item);
        item->ext_step = DD_STEP_CLAIM;
    }
    ext->parked = NULL;
    return list;
}

void dd_lane_ext_init(dd_lane_ext_t *ext, dd_lane_conn_t *conn)
{
    ext->conn = conn;
    ext->parked = NULL;
    ext->reconnect = 0;
    ext->acts = NULL;
    ext->blocked = ext->blocked_tail = NULL;
}

void dd_lane_ext_release(dd_lane_ext_t *ext)
{
    dd_lane_ext_recall(ext);
    dd_lane_acts_destroy(ext->acts);
    ext->acts = NULL;
    dd_item_list_destroy(ext->parked, NULL);
    ext->parked = NULL;
}
