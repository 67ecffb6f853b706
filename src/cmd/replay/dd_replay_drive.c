/*
 * `dedupd redrive`'s part of the run (dd_replay_run.c): what becomes of
 * each dead letter read, and the loop that reads them.
 *
 * A letter is judged on its own first (dd_replay_letter.c): refused when
 * its headers are missing or malformed, when the route of its source topic
 * would never have written it to this topic, when its source partition
 * does not exist, when its payload is not whole; then left out by the
 * filters, or paced and parsed into replay's batch, where --key is judged
 * on the key rendered from the payload. Every letter read gets one entry
 * in the report (dd_replay_entries.c), once its fate is final.
 *
 * Checkpoints, at most a second apart: the batch judged, the lane's
 * outcomes waited for, the entries written out, the group committed. A
 * partition's commit never passes a letter a filter left out, nor the
 * letters a --from after the group's position skipped: a later redrive
 * reads them. A database error on replay's own connections is recovered
 * from as `dedupd run` recovers a batch: the lane's outcomes are waited
 * for, the connections opened again, and the letters since the last
 * checkpoint read again, those that have their entry skipped (what was
 * applied before the error the claim finds applied). After
 * DD_REDRIVE_DB_TRIES recoveries without a checkpoint between them, or an
 * error no reconnect mends, redrive gives up: each letter read without an
 * outcome is reported not_done, and the report is written all the same.
 */
#include "dd_replay_int.h"

#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"

#define DD_REDRIVE_TICK_MS 1000      /* a checkpoint at most this far from the last */
#define DD_REDRIVE_TICK_ENTRIES 4096 /* ... or once this many entries wait */
#define DD_REDRIVE_TICK_LANE 1000    /* ... or once this many letters wait for the lane */
#define DD_REDRIVE_DB_TRIES 8        /* recoveries in a row before it gives up */
#define DD_REDRIVE_MD_MS 10000       /* the cluster's topics read again at most this often */

/* ---- one letter ---- */

static size_t dd_redrive_part_idx(const dd_replay_t *rp, const rd_kafka_message_t *rkm)
{
    dd_replay_part_t *pt =
        dd_replay_part_find((dd_replay_t *)rp, rd_kafka_topic_name(rkm->rkt), rkm->partition);

    return (size_t)(pt - rp->parts);
}

/* An entry without a key: a letter refused, filtered or not done (route:
 * -1 when not known). */
static void dd_redrive_note(dd_replay_t *rp, const rd_kafka_message_t *rkm,
                            const dd_redrive_letter_t *l, int route, dd_redrive_outcome_t outcome,
                            const char *reason, const char *detail)
{
    dd_redrive_note_t n = {.rkm = rkm,
                           .l = l,
                           .outcome = outcome,
                           .reason = reason,
                           .detail = detail,
                           .route = route,
                           .shard = -1};
    int64_t *edge = outcome == DD_RO_FILTERED   ? rp->rs->hold
                    : outcome == DD_RO_NOT_DONE ? rp->rs->open
                                                : NULL;
    size_t i = dd_redrive_part_idx(rp, rkm);

    if (edge && rkm->offset < edge[i]) edge[i] = rkm->offset;
    dd_redrive_entry_add(rp, &n);
}

static int dd_redrive_topic_cmp(const void *a, const void *b)
{
    return strcmp(((const struct dd_redrive_topic *)a)->name,
                  ((const struct dd_redrive_topic *)b)->name);
}

static void dd_redrive_topics_free(dd_redrive_run_t *rs)
{
    for (int i = 0; i < rs->tp_cnt; i++)
        free(rs->tp[i].name);
    free(rs->tp);
    rs->tp = NULL;
    rs->tp_cnt = 0;
}

/* Every topic of the cluster and its partition count, into rs->tp. */
static int dd_redrive_topics_read(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;

    for (int attempt = 0; attempt < 5; attempt++) {
        /* all topics: naming one would create it on a cluster that does so */
        if (!(err = rd_kafka_metadata(rp->rk, 1, NULL, &md, DD_REPLAY_TIMEOUT_MS))) break;
        dd_sleep_ms(500, &dd_stop_requested);
    }
    if (err) {
        dd_errstr_set(errstr, errstr_size, "cannot read the cluster's metadata: %s",
                      rd_kafka_err2str(err));
        return DD_ERR_FATAL;
    }
    dd_redrive_topics_free(rs);
    rs->tp = calloc((size_t)md->topic_cnt + 1, sizeof(*rs->tp));
    for (int i = 0; rs->tp && i < md->topic_cnt; i++) {
        if (md->topics[i].err || !(rs->tp[rs->tp_cnt].name = strdup(md->topics[i].topic))) continue;
        rs->tp[rs->tp_cnt++].cnt = md->topics[i].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    if (!rs->tp) return DD_ERR_NOMEM;
    qsort(rs->tp, (size_t)rs->tp_cnt, sizeof(*rs->tp), dd_redrive_topic_cmp);
    rs->md_ms = dd_now_ms();
    return DD_OK;
}

/* The partition count of topic, -1 when the cluster has no such topic. */
static int dd_redrive_source_parts(dd_replay_t *rp, const char *topic, int *cnt, char *errstr,
                                   size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    struct dd_redrive_topic key = {.name = (char *)topic}, *hit;
    int rc;

    for (int round = 0;; round++) {
        hit = rs->tp_cnt
                  ? bsearch(&key, rs->tp, (size_t)rs->tp_cnt, sizeof(*rs->tp), dd_redrive_topic_cmp)
                  : NULL;
        if (hit || round > 0 || (rs->md_ms && dd_now_ms() - rs->md_ms < DD_REDRIVE_MD_MS)) break;
        if ((rc = dd_redrive_topics_read(rp, errstr, errstr_size))) return rc;
    }
    *cnt = hit ? hit->cnt : -1;
    return DD_OK;
}

/* Why the letter is refused (its code, why in why), or NULL and its route.
 * A Kafka error is returned in *rc. */
static const char *dd_redrive_refusal(dd_replay_t *rp, rd_kafka_message_t *rkm,
                                      dd_redrive_letter_t *l, int *route, char *why,
                                      size_t why_size, int *rc, char *errstr, size_t errstr_size)
{
    rd_kafka_headers_t *hdrs = NULL;
    const char *code;
    int cnt = 0;

    rd_kafka_message_headers(rkm, &hdrs);
    if ((code = dd_redrive_letter_read(hdrs, l, why, why_size))) return code;
    *route = dd_redrive_letter_route(rp->conf, rp->rd->dlq, l, &code, why, why_size);
    if (*route < 0) return code;
    if ((*rc = dd_redrive_source_parts(rp, l->topic, &cnt, errstr, errstr_size))) return NULL;
    if (l->partition >= cnt) {
        if (cnt < 0)
            dd_errstr_set(why, why_size, "its source topic %s does not exist in the cluster",
                          l->topic);
        else
            dd_errstr_set(why, why_size, "its source topic %s has %d partition(s): no partition %d",
                          l->topic, cnt, (int)l->partition);
        return "no_partition";
    }
    if (l->truncated) {
        dd_errstr_set(why, why_size, "its payload was cut to fit the dead-letter topic");
        return "truncated";
    }
    if (!rkm->payload) {
        dd_errstr_set(why, why_size, "it has no payload (sent bare, or a tombstone)");
        return "no_payload";
    }
    return NULL;
}

/* Waits for the rate's next slot. */
static void dd_redrive_pace(dd_redrive_run_t *rs, double rate)
{
    int64_t now = dd_now_us(), gap;

    if (rate <= 0) return;
    gap = (int64_t)(1e6 / rate);
    if (rs->next_us > now) {
        dd_sleep_ms((rs->next_us - now + 999) / 1000, &dd_stop_requested);
        now = rs->next_us;
    }
    rs->next_us = now + gap;
}

/* One dead letter of the range: refused, filtered, or paced and parsed
 * into the batch. */
static int dd_redrive_message(dd_replay_t *rp, rd_kafka_message_t *rkm, char *errstr,
                              size_t errstr_size)
{
    dd_redrive_letter_t l;
    const char *code, *filter;
    char why[600] = "";
    int route = -1, rc = DD_OK;

    if (dd_redrive_entry_has(&rp->rs->ent, rkm->partition, rkm->offset)) {
        rd_kafka_message_destroy(rkm); /* read again after a reconnect: it has its entry */
        return DD_OK;
    }
    code = dd_redrive_refusal(rp, rkm, &l, &route, why, sizeof(why), &rc, errstr, errstr_size);
    if (rc) {
        dd_redrive_note(rp, rkm, &l, route, DD_RO_NOT_DONE, "stopped",
                        "redrive stopped before it was judged");
        rd_kafka_message_destroy(rkm);
        return rc;
    }
    if (code) {
        dd_log_msg(DD_LOG_WARN, rd_kafka_topic_name(rkm->rkt), rkm->partition, rkm->offset, NULL,
                   "Dead letter refused (%s): %s.", code, why);
        dd_redrive_note(rp, rkm, &l, route, DD_RO_REFUSED, code, why);
    } else if ((filter = dd_redrive_filter_letter(&rp->rd->filter, &l,
                                                  rd_kafka_message_timestamp(rkm, NULL), why,
                                                  sizeof(why)))) {
        dd_redrive_note(rp, rkm, &l, route, DD_RO_FILTERED, filter, why);
    } else {
        dd_redrive_pace(rp->rs, rp->rd->rate);
        return dd_replay_message(rp, route, rkm, errstr, errstr_size);
    }
    rd_kafka_message_destroy(rkm);
    return DD_OK;
}

/* ---- the hooks: a letter parsed, judged, back from the lane ---- */

/* An entry about an item: its route, shard, key and hash. */
static dd_redrive_note_t dd_redrive_item_note(const dd_replay_t *rp, const dd_item_t *it,
                                              dd_redrive_outcome_t outcome, const char *reason,
                                              const char *detail)
{
    int keyed = it->key_len > 0; /* a bad letter may have none */

    return (dd_redrive_note_t){.rkm = it->rkm,
                               .outcome = outcome,
                               .reason = reason,
                               .detail = detail,
                               .route = it->route,
                               .shard = keyed && rp->conf->shard_cnt > 1 ? it->shard : -1,
                               .key = keyed ? it->key : NULL,
                               .key_len = it->key_len,
                               .hash = it->hashed ? it->hash : NULL};
}

/* --key, judged on the key rendered from the payload: 1 leaves it out. */
static int dd_redrive_parsed(dd_replay_t *rp, dd_item_t *it)
{
    const char *glob = rp->rd->filter.key_glob;
    dd_redrive_note_t n;
    size_t i;

    if (!glob || (it->outcome != DD_OUT_DLQ && dd_redrive_key_match(glob, it->key, it->key_len)))
        return 0;
    n = dd_redrive_item_note(rp, it, DD_RO_FILTERED, "--key",
                             it->outcome == DD_OUT_DLQ
                                 ? "its payload gives no business key to match --key"
                                 : "its business key (rendered from its payload) does not "
                                   "match --key");
    i = dd_redrive_part_idx(rp, it->rkm);
    if (it->rkm->offset < rp->rs->hold[i]) rp->rs->hold[i] = it->rkm->offset;
    dd_redrive_entry_add(rp, &n);
    return 1;
}

/* The entry of the first letter of key k, judged st, that does not go to
 * the lane. */
static void dd_redrive_verdict_note(dd_replay_t *rp, const dd_replay_ukey_t *k,
                                    dd_replay_status_t st, const char *reason)
{
    const dd_item_t *it = k->first;
    int dry = !rp->args->apply;
    char detail[600];
    dd_redrive_note_t n = dd_redrive_item_note(rp, it, DD_RO_LEFT, reason, detail);

    detail[0] = '\0';
    if (st == DD_RS_APPLIED) {
        n.outcome = DD_RO_DUPLICATE;
        n.reason = "applied_before";
        snprintf(detail, sizeof(detail), "its key was applied before, with its request hash");
    } else if (st == DD_RS_CONFLICT) {
        n.outcome = DD_RO_CONFLICT;
        n.stored_hash = k->row_hash;
        snprintf(detail, sizeof(detail), "its key's row has another request hash");
    } else if (dry && (st == DD_RS_MISSING ||
                       (st == DD_RS_FAILED && rp->conf->routes[it->route].dedup.retry_failed))) {
        n.outcome = DD_RO_TO_APPLY;
        snprintf(detail, sizeof(detail), "--dry-run: it would run");
    } else if (st == DD_RS_FAILED) {
        snprintf(detail, sizeof(detail),
                 "its key's row is failed (%.400s) and dedup.retry_failed is false: "
                 "--retry-failed runs it",
                 k->row_error);
    } else if (st == DD_RS_MISSING) {
        n.reason = "external_mode";
        snprintf(detail, sizeof(detail),
                 "its route's handler is in external mode, which redrive "
                 "does not run");
    } else if (st == DD_RS_WRONG_SHARD) {
        snprintf(detail, sizeof(detail),
                 "its key has a row in shard %d: move its rows to the "
                 "shard its route names",
                 k->row_shard);
    } else {
        snprintf(detail, sizeof(detail), "its key is in progress under another claim");
    }
    dd_redrive_entry_add(rp, &n);
}

/* The entries of a batch just judged, but those of the letters going to
 * the lane (theirs come back with them). */
static void dd_redrive_judged(dd_replay_t *rp, size_t u)
{
    (void)u;
    for (size_t i = 0; i < rp->n; i++) {
        const dd_item_t *it = rp->batch[i];
        const dd_replay_ukey_t *k;
        const char *reason;
        char detail[200];
        dd_redrive_note_t n;
        dd_replay_status_t st;
        if (it->outcome == DD_OUT_DLQ) {
            n = dd_redrive_item_note(rp, it, DD_RO_BAD, dd_reason2str(it->reason), it->error);
            dd_redrive_entry_add(rp, &n);
            continue;
        }
        k = &rp->uk[rp->ukidx[i]];
        if (k->seen || k->first != it) {
            int same = !memcmp(it->hash, k->first_hash, DD_HASH_LEN);
            snprintf(detail, sizeof(detail),
                     "a later copy of the letter at partition %d offset %lld",
                     (int)(k->seen ? k->first_part : k->first->rkm->partition),
                     (long long)(k->seen ? k->first_off : k->first->rkm->offset));
            n = dd_redrive_item_note(rp, it, same ? DD_RO_COPY : DD_RO_CONFLICT,
                                     same ? "later_copy" : "copy_differs", detail);
            n.stored_hash = same ? NULL : k->first_hash;
            dd_redrive_entry_add(rp, &n);
            continue;
        }
        st = dd_replay_verdict(rp, k, &reason);
        if (!dd_replay_to_apply(rp, k, st)) dd_redrive_verdict_note(rp, k, st, reason);
    }
}

/* A letter back from the lane (done), or one it never ran. */
static void dd_redrive_finished(dd_replay_t *rp, dd_item_t *it, int done)
{
    dd_redrive_note_t n = dd_redrive_item_note(rp, it, DD_RO_APPLIED, NULL, NULL);
    size_t i = dd_redrive_part_idx(rp, it->rkm);

    if (!done) {
        n.outcome = DD_RO_NOT_DONE;
        n.reason = "stopped";
        n.detail = "redrive stopped before it ran";
        if (it->rkm->offset < rp->rs->open[i]) rp->rs->open[i] = it->rkm->offset;
    } else if (it->outcome == DD_OUT_DUPLICATE) {
        n.outcome = DD_RO_DUPLICATE;
        n.reason = "applied_meanwhile";
        n.detail = "the claim found its key applied (by a live consumer, or before a reconnect)";
    } else if (it->outcome != DD_OUT_APPLIED) {
        n.outcome = DD_RO_APPLY_FAILED;
        n.reason = dd_reason2str(it->reason);
        n.detail = it->error;
    }
    dd_redrive_entry_add(rp, &n);
}

/* Where redrive starts each partition: --from, or where its group is. A
 * --from after the group's position holds its commits there: the letters
 * between them are not read. */
static void dd_redrive_resume(dd_replay_t *rp)
{
    dd_redrive_run_t *rs = rp->rs;

    rp->total = 0;
    rp->parts_left = 0;
    rs->ck = calloc((size_t)rp->part_cnt + 1, sizeof(*rs->ck));
    rs->hold = calloc((size_t)rp->part_cnt + 1, sizeof(*rs->hold));
    rs->open = calloc((size_t)rp->part_cnt + 1, sizeof(*rs->open));
    rs->start = calloc((size_t)rp->part_cnt + 1, sizeof(*rs->start));
    for (int i = 0; rs->ck && rs->hold && rs->open && rs->start && i < rp->part_cnt; i++) {
        dd_replay_part_t *pt = &rp->parts[i];
        int64_t base = pt->group_committed >= 0 ? pt->group_committed : pt->low;
        if (!rp->rd->have_from && pt->group_committed > pt->start)
            pt->start = pt->group_committed < pt->end ? pt->group_committed : pt->end;
        pt->pos = rs->ck[i] = pt->start;
        rs->hold[i] = pt->start > base ? base : INT64_MAX;
        rs->open[i] = INT64_MAX;
        rs->start[i] = pt->group_committed;
        pt->done = pt->start >= pt->end;
        rp->parts_left += !pt->done;
        rp->total += pt->end - pt->start;
        dd_log(DD_LOG_INFO, "Redriving %s [%d] offsets %lld to %lld (group %s at %lld).", pt->topic,
               (int)pt->partition, (long long)pt->start, (long long)pt->end, rp->rd->group,
               (long long)pt->group_committed);
    }
}

const dd_replay_hooks_t dd_redrive_hooks = {
    .resume = dd_redrive_resume,
    .message = dd_redrive_message,
    .parsed = dd_redrive_parsed,
    .judged = dd_redrive_judged,
    .finished = dd_redrive_finished,
};

/* ---- checkpoints ---- */

/* Commits each partition's position for the redrive group, short of the
 * first letter a filter left out or left without an outcome. */
static int dd_redrive_commit(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(rp->part_cnt);
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    const dd_redrive_run_t *rs = rp->rs;

    for (int i = 0; i < rp->part_cnt; i++) {
        int64_t to = rp->parts[i].pos;
        to = rs->hold[i] < to ? rs->hold[i] : to;
        to = rs->open[i] < to ? rs->open[i] : to;
        if (to > rp->parts[i].group_committed)
            rd_kafka_topic_partition_list_add(list, rp->parts[i].topic, rp->parts[i].partition)
                ->offset = to;
    }
    if (list->cnt) err = rd_kafka_commit(rp->rk, list, 0);
    for (int i = 0; !err && i < list->cnt; i++) {
        dd_replay_part_t *pt =
            dd_replay_part_find(rp, list->elems[i].topic, list->elems[i].partition);
        if (pt) pt->group_committed = list->elems[i].offset;
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (err)
        dd_errstr_set(errstr, errstr_size, "committing the progress of group %s: %s", rp->rd->group,
                      rd_kafka_err2str(err));
    return err ? DD_ERR_FATAL : DD_OK;
}

/* How long the lane may wait for the database before redrive gives up:
 * as long as its own DD_REDRIVE_DB_TRIES reconnects would take. */
static int64_t dd_redrive_db_budget_ms(const dd_conf_t *conf)
{
    int64_t ms = conf->retry.backoff_initial_ms, sum = 0;

    for (int i = 0; i < DD_REDRIVE_DB_TRIES; i++, ms *= 2)
        sum += ms < conf->retry.backoff_max_ms ? ms : conf->retry.backoff_max_ms;
    return sum;
}

/* Waits until the lane has given back every letter (or a stop request):
 * an error once it has waited for the database longer than the budget. */
static int dd_redrive_wait_lane(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    int rc = DD_OK;

    while (!rc && rp->pending > 0 && !atomic_load(&dd_stop_requested)) {
        rc = dd_replay_apply_drain(rp, 100, errstr, errstr_size);
        if (rc || !dd_lanes_waiting_db(rp->lanes)) {
            rs->lane_db_since = 0;
            continue;
        }
        if (!rs->lane_db_since) rs->lane_db_since = dd_now_ms();
        if (dd_now_ms() - rs->lane_db_since > dd_redrive_db_budget_ms(rp->conf)) {
            dd_errstr_set(errstr, errstr_size,
                          "the lane has waited for the database for %lld ms: giving up",
                          (long long)(dd_now_ms() - rs->lane_db_since));
            rc = DD_ERR_FATAL;
        }
    }
    return rc;
}

/* The batch judged, the lane's outcomes waited for, the entries written
 * out, the group committed. */
static int dd_redrive_checkpoint(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    int rc = dd_replay_flush(rp, errstr, errstr_size);

    if (!rc) rc = dd_redrive_wait_lane(rp, errstr, errstr_size);
    if (rc || rp->pending > 0) return rc; /* stopped: dd_redrive_finish ends it */
    if ((rc = dd_redrive_entries_spill(rp, errstr, errstr_size))) return rc;
    for (int i = 0; i < rp->part_cnt; i++)
        rs->ck[i] = rp->parts[i].pos;
    rs->db_tries = 0;
    rs->flushed_ms = dd_now_ms();
    return rp->rd->dry_run ? DD_OK : dd_redrive_commit(rp, errstr, errstr_size);
}

static int dd_redrive_due(const dd_replay_t *rp)
{
    return dd_now_ms() - rp->rs->flushed_ms >= DD_REDRIVE_TICK_MS ||
           rp->rs->ent.n >= DD_REDRIVE_TICK_ENTRIES ||
           rp->pending + (int64_t)rp->n >= DD_REDRIVE_TICK_LANE;
}

/* ---- recovery from a database error ---- */

/* Reconnects, backing off; 0, or the error that ends the redrive. */
static int dd_redrive_reconnect(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    int64_t ms = rp->conf->retry.backoff_initial_ms;
    char why[1024];
    int rc;

    for (;;) {
        snprintf(why, sizeof(why), "%s", errstr);
        if (++rs->db_tries > DD_REDRIVE_DB_TRIES) {
            dd_errstr_set(errstr, errstr_size, "gave up after %d reconnects in a row: %s",
                          DD_REDRIVE_DB_TRIES, why);
            return DD_ERR_FATAL;
        }
        dd_log(DD_LOG_WARN,
               "dedupd redrive: database error (%s): reconnecting, then reading the letters since "
               "the last checkpoint again (attempt %d of %d).",
               why, rs->db_tries, DD_REDRIVE_DB_TRIES);
        for (int i = 1; i < rs->db_tries && ms < rp->conf->retry.backoff_max_ms; i++)
            ms *= 2;
        if (dd_sleep_ms(ms < rp->conf->retry.backoff_max_ms ? ms : rp->conf->retry.backoff_max_ms,
                        &dd_stop_requested))
            return DD_ERR_FATAL;
        rc = dd_replay_reconnect(rp, errstr, errstr_size);
        if (rc != DD_ERR_RETRIABLE) return rc;
    }
}

/* After an error: a database error on replay's connections is recovered
 * from (0: the letters since the last checkpoint are read again); any
 * other error is returned. */
static int dd_redrive_recover(dd_replay_t *rp, int rc, char *errstr, size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    char why[1024];

    if (!dd_replay_db_retriable(rp) || atomic_load(&dd_stop_requested)) return rc;
    snprintf(why, sizeof(why), "%s", errstr);
    if ((rc = dd_redrive_wait_lane(rp, errstr, errstr_size))) return rc;
    snprintf(errstr, errstr_size, "%s", why);
    if (rp->pending > 0) return DD_ERR_FATAL; /* stopped while waiting */
    if ((rc = dd_redrive_reconnect(rp, errstr, errstr_size))) return rc;
    for (size_t i = 0; i < rp->n; i++) /* not judged: no entry, read again */
        dd_item_destroy(rp->batch[i], NULL);
    rp->n = 0;
    dd_redrive_entries_sort(&rs->ent);
    rc = dd_replay_reread(rp, rs->ck, errstr, errstr_size);
    rs->flushed_ms = dd_now_ms();
    if (!rc) dd_log(DD_LOG_INFO, "dedupd redrive: reconnected to the database.");
    return rc;
}

/* ---- the loop ---- */

int dd_redrive_consume(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    int rc = rs->ck && rs->hold && rs->open && rs->start ? DD_OK : DD_ERR_NOMEM;

    if (rc) dd_errstr_set(errstr, errstr_size, "out of memory");
    dd_progress_init(&rp->progress_line, "redrive");
    rs->flushed_ms = dd_now_ms();
    while (!rc && !atomic_load(&dd_stop_requested)) {
        if (rp->parts_left == 0) {
            rc = dd_redrive_checkpoint(rp, errstr, errstr_size);
            if (!rc && rp->parts_left == 0) break; /* the end (or a rewind: read on) */
        } else {
            rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rp->rk, 100);
            if (rkm) rc = dd_replay_take(rp, rkm, errstr, errstr_size);
            if (!rc && rp->lanes) rc = dd_replay_apply_drain(rp, 0, errstr, errstr_size);
            if (!rc && dd_redrive_due(rp)) rc = dd_redrive_checkpoint(rp, errstr, errstr_size);
        }
        if (rc) rc = dd_redrive_recover(rp, rc, errstr, errstr_size);
        dd_progress_show(&rp->progress_line, rp->progress, rp->total);
    }
    dd_progress_end(&rp->progress_line);
    if (rc) snprintf(rs->error, sizeof(rs->error), "%s", errstr);
    return rc;
}

int dd_redrive_finish(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    dd_redrive_run_t *rs = rp->rs;
    int rc = DD_OK;

    for (size_t i = 0; i < rp->n; i++) { /* read, not judged */
        dd_redrive_note(rp, rp->batch[i]->rkm, NULL, rp->batch[i]->route, DD_RO_NOT_DONE, "stopped",
                        "redrive stopped before it was judged");
        dd_item_destroy(rp->batch[i], NULL);
    }
    rp->n = 0;
    if (rs->error[0])
        dd_replay_apply_abandon(rp); /* gave up: the lane may be waiting for the database */
    else
        rc = dd_replay_apply_finish(rp, errstr, errstr_size);
    if (rc) snprintf(rs->error, sizeof(rs->error), "%s", errstr);
    if (!rc) rc = dd_redrive_entries_spill(rp, errstr, errstr_size);
    if (!rp->rd->dry_run && rs->ck && rs->hold && rs->open && rp->rk) {
        char err[512];
        if (dd_redrive_commit(rp, err, sizeof(err))) {
            dd_log(DD_LOG_ERROR, "dedupd redrive: %s", err);
            if (!rs->error[0]) snprintf(rs->error, sizeof(rs->error), "%s", err);
            rc = rc ? rc : DD_ERR_FATAL;
        }
    }
    return rc;
}

void dd_redrive_run_release(dd_redrive_run_t *rs)
{
    if (!rs) return;
    dd_redrive_entries_release(&rs->ent);
    dd_redrive_topics_free(rs);
    free(rs->ck);
    free(rs->hold);
    free(rs->open);
    free(rs->start);
}
