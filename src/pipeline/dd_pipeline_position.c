/*
 * Where each assigned partition starts, and the database's position kept
 * up with the watermarks (dd_position.h says why the database keeps one).
 *
 * On assignment the positions of every shard are read (bounded: a shard
 * that does not answer is checked later by its writer), each partition's
 * watermarks asked for, and the message each position was written with
 * read again, all partitions together. A position the partition still
 * holds the message of is used, whatever Kafka's committed offset says:
 * below it, the database went back in time and what lies between comes
 * again (the dedup table sorts it out as always); above it, the broker
 * missed a commit, and less is done twice. A position that is not the
 * topic's as it is now (dd_position_judge) is never used to skip anything:
 * the partition starts at its log start offset, loudly. No position at all
 * (a new group or partition, a table migrated just now) leaves Kafka's
 * offset to decide, so an upgrade reads nothing again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_kafka.h"
#include "dd_peek.h"
#include "dd_pipeline_int.h"
#include "dd_position.h"

/* How long an assignment waits for the shards' positions, and for the
 * messages they are checked by. */
#define DD_PIPELINE_POSITION_LOAD_MS 5000
/* How often the watermarks are handed to the position writers. */
#define DD_PIPELINE_POSITION_SYNC_MS 20

int dd_pipeline_position_start(dd_pipeline_t *pl, char *errstr, size_t errstr_size)
{
    int rc;

    if (!pl->keep_positions) return DD_OK;
    rc = dd_position_new(&pl->pos, pl->conf, errstr, errstr_size);
    if (!rc) rc = dd_position_start(pl->pos, errstr, errstr_size);
    return rc;
}

void dd_pipeline_position_sync(dd_pipeline_t *pl, int force)
{
    int64_t now;
    uint64_t errors;

    if (!pl->pos) return;
    now = dd_now_ms();
    if (!force && now - pl->pos_sync_ms < DD_PIPELINE_POSITION_SYNC_MS) return;
    pl->pos_sync_ms = now;
    dd_position_sync(pl->pos, pl->offs);
    if (!pl->pos_err[0]) dd_position_stopped(pl->pos, pl->pos_err, sizeof(pl->pos_err));
    errors = dd_position_errors(pl->pos);
    pthread_mutex_lock(&pl->mu);
    pl->stats.position_errors = errors;
    pthread_mutex_unlock(&pl->mu);
}

void dd_pipeline_position_flush(dd_pipeline_t *pl, int timeout_ms)
{
    if (!pl->pos) return;
    dd_pipeline_position_sync(pl, 1);
    if (timeout_ms > 0 && dd_position_flush(pl->pos, timeout_ms))
        dd_log(DD_LOG_WARN,
               "The consumer's positions could not all be written to the database "
               "within %d ms: Kafka's offsets are committed only up to them.",
               timeout_ms);
    dd_pipeline_position_sync(pl, 1);
}

void dd_pipeline_position_load(dd_pipeline_t *pl, int parts)
{
    if (!pl->pos || parts <= 0) return;
    dd_position_load(pl->pos, DD_PIPELINE_POSITION_LOAD_MS);
    pl->pos_deadline_ms = dd_now_ms() + DD_PIPELINE_POSITION_LOAD_MS;
}

void dd_pipeline_position_polled(dd_pipeline_t *pl, dd_ptrack_t *pt, const rd_kafka_message_t *rkm,
                                 int64_t now_ms)
{
    if (!pl->pos || !dd_ptrack_cand_due(pt, now_ms)) return;
    if (dd_peek_fingerprint(rkm, &pt->cand_fp)) return;
    pt->cand_offset = rkm->offset;
    pt->cand_ms = now_ms;
}

/* ---- looking at an assignment ---- */

/* A partition's watermarks, asking its leader. The assignment's queries
 * share one bound, so a broker that does not answer holds the rebalance
 * callback up for a few seconds in all; what was not asked for is unknown
 * (-1). */
static void dd_pipeline_position_marks(dd_pipeline_t *pl, const rd_kafka_topic_partition_t *p,
                                       int64_t *lo, int64_t *hi)
{
    int64_t left = pl->pos_deadline_ms - dd_now_ms();

    *lo = *hi = -1;
    if (left <= 0) return;
    if (rd_kafka_query_watermark_offsets(dd_source_rk(pl->src), p->topic, p->partition, lo, hi,
                                         (int)left))
        *lo = *hi = -1;
}

/* The facts of element i (peek: its read, when there was one). */
static void dd_pipeline_position_facts(const dd_pipeline_poschecks_t *pc, int i, int64_t k,
                                       dd_position_facts_t *f)
{
    const dd_pipeline_poscheck_t *c = &pc->parts[i];

    memset(f, 0, sizeof(*f));
    f->pos = c->found.min;
    f->check = c->found.check;
    f->committed = k;
    f->lo = c->lo;
    f->hi = c->hi;
    f->peek = c->peek >= 0 ? &pc->peeks[c->peek] : NULL;
}

/* Reads the check messages asked for, on a client made the first time. */
static void dd_pipeline_position_peek(dd_pipeline_t *pl, dd_pipeline_poschecks_t *pc)
{
    char err[512];

    if (!pc->peek_cnt) return;
    if (!pl->peek && dd_peek_new(&pl->peek, pl->conf, err, sizeof(err)))
        dd_log(DD_LOG_WARN, "Cannot create the client that checks the database's positions: %s",
               err);
    dd_peek_read(pl->peek, pc->peeks, pc->peek_cnt, DD_PIPELINE_POSITION_LOAD_MS);
}

void dd_pipeline_position_check(dd_pipeline_t *pl, const rd_kafka_topic_partition_list_t *parts,
                                dd_pipeline_poschecks_t *pc)
{
    memset(pc, 0, sizeof(*pc));
    if (!pl->pos || parts->cnt <= 0) return;
    pc->parts = calloc((size_t)parts->cnt, sizeof(*pc->parts));
    pc->peeks = calloc((size_t)parts->cnt, sizeof(*pc->peeks));
    if (!pc->parts || !pc->peeks) {
        /* nothing is read: every position with a check is left unchecked */
        dd_log(DD_LOG_ERROR, "Out of memory while checking the database's positions.");
        dd_pipeline_position_checked(pc);
        return;
    }
    for (int i = 0; i < parts->cnt; i++) {
        const rd_kafka_topic_partition_t *p = &parts->elems[i];
        dd_pipeline_poscheck_t *c = &pc->parts[i];
        dd_position_facts_t f;
        int64_t at;
        dd_position_found(pl->pos, p->topic, p->partition, &c->found);
        c->lo = c->hi = -1;
        c->peek = -1;
        if (!c->found.have) continue;
        dd_pipeline_position_marks(pl, p, &c->lo, &c->hi);
        dd_pipeline_position_facts(pc, i, -1, &f);
        if (c->found.missing || (at = dd_position_peek_offset(&f)) < 0) continue;
        c->peek = pc->peek_cnt++;
        pc->peeks[c->peek].topic = p->topic;
        pc->peeks[c->peek].partition = p->partition;
        pc->peeks[c->peek].offset = at;
    }
    dd_pipeline_position_peek(pl, pc);
}

void dd_pipeline_position_checked(dd_pipeline_poschecks_t *pc)
{
    free(pc->parts);
    free(pc->peeks);
    memset(pc, 0, sizeof(*pc));
}

/* ---- where a partition starts ---- */

typedef enum { DD_PIPELINE_REWIND, DD_PIPELINE_GAP, DD_PIPELINE_MISMATCH } dd_pipeline_count_t;

static void dd_pipeline_position_count(dd_pipeline_t *pl, dd_pipeline_count_t what,
                                       int64_t messages)
{
    pthread_mutex_lock(&pl->mu);
    if (what == DD_PIPELINE_GAP) {
        pl->stats.position_gaps++;
        pl->stats.position_gap_messages += (uint64_t)messages;
    } else if (what == DD_PIPELINE_MISMATCH) {
        pl->stats.position_mismatches++;
    } else {
        pl->stats.position_rewinds++;
    }
    pthread_mutex_unlock(&pl->mu);
}

/* The database is behind Kafka's committed offset k: it went back. */
static void dd_pipeline_position_rewind(dd_pipeline_t *pl, dd_ptrack_t *pt,
                                        const dd_position_found_t *f, int64_t db, int64_t k,
                                        int64_t hi)
{
    char who[340] = "";

    if (pl->conf->shard_cnt > 1) {
        char name[320];
        snprintf(who, sizeof(who), " (lowest in %s)",
                 dd_conf_shard_name(pl->conf, f->min_shard, name, sizeof(name)));
    }
    dd_log(DD_LOG_WARN,
           "The database's position of group %s, %s [%d] is %lld%s, behind Kafka's committed "
           "offset %lld: the database went back in time (restored from a backup, or failed over "
           "to a replica that had not received the last transactions). Reading the %lld "
           "message(s) in between again: the dedup table applies what the database lost and "
           "skips the rest as duplicates.",
           pl->conf->kafka.group, pt->topic, (int)pt->partition, (long long)db, who, (long long)k,
           (long long)(k - db));
    dd_pipeline_position_count(pl, DD_PIPELINE_REWIND, 0);
    pt->rewind_end = hi > k ? hi : k;
}

/* The database's position db is below the log start offset lo. */
static void dd_pipeline_position_gap(dd_pipeline_t *pl, dd_ptrack_t *pt, int64_t db, int64_t lo)
{
    dd_log(DD_LOG_ERROR,
           "The database's position of group %s, %s [%d] is %lld, below the partition's log "
           "start offset %lld: Kafka no longer holds offsets %lld to %lld, so what the database "
           "lost of them cannot be read again (reconcile them from the source system; "
           "docs/OPERATIONS.md, \"After a restore or a failover\"), unless they were deleted "
           "on purpose (DeleteRecords, a topic created again) before dedupd read them. "
           "Starting at %lld.",
           pl->conf->kafka.group, pt->topic, (int)pt->partition, (long long)db, (long long)lo,
           (long long)db, (long long)(lo - 1), (long long)lo);
    dd_pipeline_position_count(pl, DD_PIPELINE_GAP, lo - db);
}

/* The position is not used (j: FOREIGN, DIVERGED or UNCHECKED): said
 * loudly, counted, and the partition starts where nothing is missed. */
static int64_t dd_pipeline_position_unused(dd_pipeline_t *pl, dd_ptrack_t *pt,
                                           rd_kafka_topic_partition_t *p,
                                           const dd_position_found_t *f,
                                           const dd_position_judgement_t *j, int64_t hi, char *note,
                                           size_t note_size)
{
    static const char *const what[] = {
        [DD_POSITION_FOREIGN] = "it was taken in another life of the topic (the topic deleted and "
                                "created again, or truncated and refilled, or the database "
                                "restored from before that), so it is not used",
        [DD_POSITION_DIVERGED] = "so it is used only up to that message",
        [DD_POSITION_UNCHECKED] = "so it is not used to skip anything",
    };
    char start[48] = "the partition's log start offset";

    if (j->start >= 0 && j->verdict != DD_POSITION_DIVERGED)
        snprintf(start, sizeof(start), "the log start offset %lld", (long long)j->start);
    else if (j->start >= 0)
        snprintf(start, sizeof(start), "offset %lld", (long long)j->start);
    dd_log(j->verdict == DD_POSITION_UNCHECKED ? DD_LOG_WARN : DD_LOG_ERROR,
           "The database's position of group %s, %s [%d] is %lld, %s: %s. Starting at %s, where "
           "nothing is missed: the dedup table skips what was applied already%s.",
           pl->conf->kafka.group, pt->topic, (int)pt->partition, (long long)f->min, j->why,
           what[j->verdict], start, j->reset ? "; the position is written anew" : "");
    dd_pipeline_position_count(pl, DD_PIPELINE_MISMATCH, 0);
    pt->rewind_end = hi; /* external mode asks reconcile() before acting again */
    if (j->reset)
        dd_position_reset(pl->pos, pt->topic, pt->partition, j->start,
                          j->keep.offset >= 0 ? &j->keep : NULL);
    else
        dd_position_track(pl->pos, pt->topic, pt->partition, f->min, NULL);
    p->offset = j->start;
    snprintf(note, note_size, ", database position %lld not used (starting at %s)",
             (long long)f->min, start);
    return j->start >= 0 ? j->start : -1;
}

/* Some shards hold a position and others none: such a shard was restored
 * from before it kept one, or added, and what it lost cannot be located. */
static int64_t dd_pipeline_position_missing(dd_pipeline_t *pl, dd_ptrack_t *pt,
                                            const dd_position_found_t *f, int64_t lo, int64_t hi)
{
    dd_log(DD_LOG_WARN,
           "%d database shard(s) hold no position of group %s, %s [%d] while others hold "
           "%lld: such a shard was restored from before it kept one (or was added): reading "
           "the partition again from its log start offset.",
           f->missing, pl->conf->kafka.group, pt->topic, (int)pt->partition, (long long)f->min);
    dd_pipeline_position_count(pl, DD_PIPELINE_REWIND, 0);
    pt->rewind_end = hi;
    return lo >= 0 ? lo : 0;
}

int64_t dd_pipeline_position_assign(dd_pipeline_t *pl, dd_ptrack_t *pt,
                                    rd_kafka_topic_partition_t *p, int64_t k,
                                    const dd_pipeline_poschecks_t *pc, int i, char *note,
                                    size_t note_size)
{
    dd_pipeline_poscheck_t none = {.lo = -1, .hi = -1, .peek = -1};
    const dd_pipeline_poscheck_t *c = pc->parts ? &pc->parts[i] : &none;
    const dd_position_found_t *f = &c->found;
    dd_position_judgement_t j;
    dd_position_facts_t facts;
    int64_t start, db;

    note[0] = '\0';
    if (!pl->pos) return k;
    if (!pc->parts) dd_position_found(pl->pos, pt->topic, pt->partition, &none.found);
    if (f->unread)
        dd_log(DD_LOG_WARN,
               "%d database shard(s) did not tell the position of %s [%d] within %d ms: "
               "starting from the others'; each is compared when it answers.",
               f->unread, pt->topic, (int)pt->partition, DD_PIPELINE_POSITION_LOAD_MS);
    if (!f->have) {
        dd_position_track(pl->pos, pt->topic, pt->partition, -1, NULL);
        snprintf(note, note_size, ", no database position yet");
        return k;
    }
    if (f->missing) {
        db = dd_pipeline_position_missing(pl, pt, f, c->lo, c->hi);
    } else {
        if (pc->parts)
            dd_pipeline_position_facts(pc, i, k, &facts);
        else
            facts = (dd_position_facts_t){f->min, f->check, k, -1, -1, NULL};
        dd_position_judge(&facts, &j);
        if (j.verdict != DD_POSITION_OWN)
            return dd_pipeline_position_unused(pl, pt, p, f, &j, c->hi, note, note_size);
        db = j.use;
        if (k >= 0 && db < k) dd_pipeline_position_rewind(pl, pt, f, db, k, c->hi);
    }
    start = db;
    if (c->lo >= 0 && db < c->lo) {
        dd_pipeline_position_gap(pl, pt, db, c->lo);
        start = c->lo;
    }
    dd_position_track(pl->pos, pt->topic, pt->partition, f->min,
                      f->check.offset >= 0 ? &f->check : NULL);
    if (start != k) p->offset = start;
    snprintf(note, note_size, ", database position %lld (starting at %lld)", (long long)f->min,
             (long long)start);
    return start;
}

void dd_pipeline_position_revoke(dd_pipeline_t *pl, const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; pl->pos && i < parts->cnt; i++)
        dd_position_untrack(pl->pos, parts->elems[i].topic, parts->elems[i].partition);
}

void dd_pipeline_position_stop(dd_pipeline_t *pl)
{
    dd_position_destroy(pl->pos);
    pl->pos = NULL;
    if (pl->peek) dd_kafka_destroy_within(pl->peek, 0, 2000);
    pl->peek = NULL;
}
