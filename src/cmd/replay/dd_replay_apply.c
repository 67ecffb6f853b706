/*
 * `dedupd replay --apply`: the keys replay finds missing (or failed, with
 * dedup.retry_failed) go through a lane group of one lane, the claim +
 * handler transaction of `dedupd run`, so a live consumer working on the
 * same keys at the same time cannot make anything happen twice. What the
 * lane decides is recorded in dd_replay_key for the report; dead-letter
 * verdicts are reported, never sent. A route whose handler is in external
 * mode is not run: its keys are reported only.
 */
#include "dd_replay_int.h"

#include <stdio.h>

#include "dd_common.h"
#include "dd_log.h"

int dd_replay_apply_external(const dd_replay_t *rp, int route)
{
    return dd_handler_mode(rp->routes->route[route].h) == DEDUPD_MODE_EXTERNAL;
}

int dd_replay_apply_start(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int local = 0, ext = -1, rc;

    /* The routes' handlers were loaded with the routes (dd_replay_setup).
     * One in external mode is not run: the report has no verdict for a key
     * in progress under a live claim. When every route read is in external
     * mode (--route naming one, or a configuration without a route in local
     * mode) there is nothing to apply: refused. Otherwise the keys of those
     * routes are reported, not repaired. */
    for (int r = 0; r < rp->routes->cnt; r++) {
        if (rp->only >= 0 && r != rp->only) continue;
        if (!dd_replay_apply_external(rp, r))
            local++;
        else if (ext < 0)
            ext = r;
    }
    if (ext >= 0 && !local) {
        const dd_route_t *rt = &rp->routes->route[ext];
        dd_errstr_set(errstr, errstr_size,
                      "replay --apply does not run handlers in external mode (%s%s%s): replay "
                      "without --apply reports the missing keys; produce their messages again "
                      "for dedupd run, and settle keys left processing with dedupd reconcile",
                      dd_handler_name(rt->h), rp->conf->has_routes ? ", route " : "",
                      rp->conf->has_routes ? rt->conf->name : "");
        return DD_ERR_CONFIG;
    }
    for (int r = 0; ext >= 0 && r < rp->routes->cnt; r++) {
        if ((rp->only >= 0 && r != rp->only) || !dd_replay_apply_external(rp, r)) continue;
        dd_log(DD_LOG_WARN,
               "Route %s: its handler %s is in external mode, which replay --apply does not run: "
               "its missing keys are reported, not repaired (produce their messages again for "
               "dedupd run; settle keys left processing with dedupd reconcile).",
               rp->routes->route[r].conf->name, dd_handler_name(rp->routes->route[r].h));
    }
    rc = dd_lanes_new(&rp->lanes, rp->conf, rp->routes, 1, "replay", errstr, errstr_size);
    if (!rc) rc = dd_lanes_start(rp->lanes, errstr, errstr_size);
    return rc;
}

/* Records the lane's verdicts in dd_replay_key: one statement for the
 * repaired keys, one per failure (they carry an error). */
static int dd_replay_apply_record(dd_replay_t *rp, dd_item_t *list, char *errstr,
                                  size_t errstr_size)
{
    int rc = DD_OK, any = 0;

    dd_buf_reset(&rp->sql);
    dd_buf_printf(&rp->sql, "UPDATE dd_replay_key SET outcome = %d WHERE (route, biz_key) IN (",
                  DD_RA_REPAIRED);
    for (dd_item_t *it = list; it; it = it->next) {
        if (it->outcome != DD_OUT_APPLIED) continue;
        dd_buf_printf(&rp->sql, "%s(%d,", any++ ? "," : "", it->route);
        dd_db_hex(&rp->sql, it->key, it->key_len);
        dd_buf_puts(&rp->sql, ")");
    }
    dd_buf_puts(&rp->sql, ")");
    if (any) rc = dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size);
    for (dd_item_t *it = list; !rc && it; it = it->next) {
        int failed = it->outcome != DD_OUT_APPLIED && it->outcome != DD_OUT_DUPLICATE;
        if (it->outcome == DD_OUT_APPLIED) continue;
        dd_buf_reset(&rp->sql);
        dd_buf_printf(&rp->sql, "UPDATE dd_replay_key SET outcome = %d, outcome_error = ",
                      failed ? DD_RA_FAILED : DD_RA_ALREADY_APPLIED);
        if (failed) {
            char why[600];
            snprintf(why, sizeof(why), "%s: %s", dd_reason2str(it->reason), it->error);
            dd_replay_put_text(rp, why);
        } else {
            dd_buf_puts(&rp->sql, "NULL");
        }
        dd_buf_printf(&rp->sql, " WHERE route = %d AND biz_key = ", it->route);
        dd_db_hex(&rp->sql, it->key, it->key_len);
        rc = dd_replay_exec(rp, rp->sql.p, rp->sql.len, errstr, errstr_size);
    }
    return rc;
}

/* Takes what the lane finished (waiting up to wait_ms), records and frees
 * it. Dead-letter verdicts are reported, never sent. */
int dd_replay_apply_drain(dd_replay_t *rp, int wait_ms, char *errstr, size_t errstr_size)
{
    dd_item_t *list, *next;
    int rc;

    list = dd_lanes_take_done(rp->lanes, wait_ms);
    /* redrive reports each letter through its hook, not from dd_replay_key */
    rc = rp->rd ? DD_OK : dd_replay_apply_record(rp, list, errstr, errstr_size);
    for (; list; list = next) {
        next = list->next;
        rp->sum.apply[list->outcome == DD_OUT_APPLIED     ? DD_RA_REPAIRED
                      : list->outcome == DD_OUT_DUPLICATE ? DD_RA_ALREADY_APPLIED
                                                          : DD_RA_FAILED]++;
        if (list->outcome == DD_OUT_DLQ)
            dd_log_msg(DD_LOG_WARN, rd_kafka_topic_name(list->rkm->rkt), list->rkm->partition,
                       list->rkm->offset, list->key, "Not repaired (%s): %s",
                       dd_reason2str(list->reason), list->error);
        if (rp->hooks) rp->hooks->finished(rp, list, 1);
        rp->pending--;
        dd_item_destroy(list, NULL);
    }
    if (!rc && dd_lanes_failed(rp->lanes, errstr, errstr_size)) rc = DD_ERR_FATAL;
    return rc;
}

int dd_replay_apply_push(dd_replay_t *rp, dd_item_t *item, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    item->next = NULL;
    rp->pending++;
    dd_lanes_push(rp->lanes, item->key, item->key_len, item);
    while (!rc && rp->pending >= DD_REPLAY_MAX_PENDING)
        rc = dd_replay_apply_drain(rp, 100, errstr, errstr_size);
    return rc;
}

/* What the lane never ran, handed back by dd_lanes_stop: freed. */
static void dd_replay_apply_leftover(dd_replay_t *rp, dd_item_t *leftover)
{
    for (dd_item_t *next; leftover; leftover = next) {
        next = leftover->next;
        if (rp->hooks) rp->hooks->finished(rp, leftover, 0);
        rp->pending--;
        dd_item_destroy(leftover, NULL);
    }
}

void dd_replay_apply_abandon(dd_replay_t *rp)
{
    dd_item_t *leftover = NULL;
    char err[512];

    if (!rp->lanes || dd_lanes_stopped(rp->lanes)) return;
    dd_lanes_stop(rp->lanes, &leftover);
    (void)dd_replay_apply_drain(rp, 0, err, sizeof(err)); /* outcomes known, if not recorded */
    dd_replay_apply_leftover(rp, leftover);
}

/* Lets the lane finish its queue, then joins it. */
int dd_replay_apply_finish(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_item_t *leftover = NULL;
    int rc = DD_OK;

    if (!rp->lanes || dd_lanes_stopped(rp->lanes)) return DD_OK;
    dd_lanes_finish(rp->lanes);
    /* After SIGINT/SIGTERM only the transaction under way is finished. */
    while (!rc && rp->pending > 0 && !atomic_load(&dd_stop_requested))
        rc = dd_replay_apply_drain(rp, 100, errstr, errstr_size);
    dd_lanes_stop(rp->lanes, &leftover);
    if (!rc) rc = dd_replay_apply_drain(rp, 0, errstr, errstr_size); /* the last transaction */
    dd_replay_apply_leftover(rp, leftover);
    return rc;
}
