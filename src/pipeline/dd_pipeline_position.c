/*
 * Where each assigned partition starts, and the database's position kept
 * up with the watermarks (dd_position.h says why the database keeps one).
 *
 * On assignment the positions of every shard are read (bounded: a shard
 * that does not answer is checked later by its writer) and each partition
 * starts at the lowest of them, whatever Kafka's committed offset says:
 * below it, the database went back in time and what lies between comes
 * again (the dedup table sorts it out as always); above it, the broker
 * missed a commit, and less is done twice. No position at all (a new
 * group or partition, a table migrated just now) leaves Kafka's offset to
 * decide, so an upgrade reads nothing again.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_pipeline_int.h"
#include "dd_position.h"

/* How long an assignment waits for the shards' positions. */
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

    if (!pl->pos) return;
    now = dd_now_ms();
    if (!force && now - pl->pos_sync_ms < DD_PIPELINE_POSITION_SYNC_MS) return;
    pl->pos_sync_ms = now;
    dd_position_sync(pl->pos, pl->offs);
    if (!pl->pos_err[0]) dd_position_went_back(pl->pos, pl->pos_err, sizeof(pl->pos_err));
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

/* The partition's watermarks, asking its leader: needed only when the
 * database's position db is not Kafka's k (past the end? below the log
 * start?). The assignment's queries share one bound, so a broker that
 * does not answer holds the rebalance callback up for a few seconds in
 * all; what was not asked for is unknown (-1). */
static void dd_pipeline_position_marks(dd_pipeline_t *pl, const dd_ptrack_t *pt, int64_t db,
                                       int64_t k, int64_t *lo, int64_t *hi)
{
    int64_t left = pl->pos_deadline_ms - dd_now_ms();

    *lo = *hi = -1;
    if (db == k || left <= 0) return;
    if (rd_kafka_query_watermark_offsets(dd_source_rk(pl->src), pt->topic, pt->partition, lo, hi,
                                         (int)left))
        *lo = *hi = -1;
}

static void dd_pipeline_position_count(dd_pipeline_t *pl, int gap, int64_t messages)
{
    pthread_mutex_lock(&pl->mu);
    if (gap) {
        pl->stats.position_gaps++;
        pl->stats.position_gap_messages += (uint64_t)messages;
    } else {
        pl->stats.position_rewinds++;
    }
    pthread_mutex_unlock(&pl->mu);
}

/* The database is behind Kafka's committed offset k: it went back. */
static void dd_pipeline_position_rewind(dd_pipeline_t *pl, dd_ptrack_t *pt,
                                        const dd_position_found_t *f, int64_t k, int64_t hi)
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
           pl->conf->kafka.group, pt->topic, (int)pt->partition, (long long)f->min, who,
           (long long)k, (long long)(k - f->min));
    dd_pipeline_position_count(pl, 0, 0);
    pt->rewind_end = hi > k ? hi : k;
}

/* The database's position db is below the log start offset lo. */
static void dd_pipeline_position_gap(dd_pipeline_t *pl, dd_ptrack_t *pt, int64_t db, int64_t lo)
{
    dd_log(DD_LOG_ERROR,
           "The database's position of group %s, %s [%d] is %lld, below the partition's log "
           "start offset %lld: Kafka no longer holds offsets %lld to %lld, so what the database "
           "lost of them cannot be read again (reconcile them from the source system; "
           "docs/OPERATIONS.md, \"After a restore or a failover\"). Starting at %lld.",
           pl->conf->kafka.group, pt->topic, (int)pt->partition, (long long)db, (long long)lo,
           (long long)db, (long long)(lo - 1), (long long)lo);
    dd_pipeline_position_count(pl, 1, lo - db);
}

/* Where partition p starts, given Kafka's committed offset k (-1 none):
 * the database's position when it has one. Sets p->offset when that is
 * not k, and a note for the "Assigned" line. */
int64_t dd_pipeline_position_assign(dd_pipeline_t *pl, dd_ptrack_t *pt,
                                    rd_kafka_topic_partition_t *p, int64_t k, char *note,
                                    size_t note_size)
{
    dd_position_found_t f;
    int64_t lo = -1, hi = -1, start, db;

    note[0] = '\0';
    if (!pl->pos) return k;
    dd_position_found(pl->pos, pt->topic, pt->partition, &f);
    if (f.unread)
        dd_log(DD_LOG_WARN,
               "%d database shard(s) did not tell the position of %s [%d] within %d ms: "
               "starting from the others'; each is compared when it answers.",
               f.unread, pt->topic, (int)pt->partition, DD_PIPELINE_POSITION_LOAD_MS);
    if (!f.have) {
        dd_position_track(pl->pos, pt->topic, pt->partition, -1);
        snprintf(note, note_size, ", no database position yet");
        return k;
    }
    db = f.min;
    dd_pipeline_position_marks(pl, pt, f.missing ? INT64_MIN : db, k, &lo, &hi);
    if (f.missing) {
        dd_log(DD_LOG_WARN,
               "%d database shard(s) hold no position of group %s, %s [%d] while others hold "
               "%lld: such a shard was restored from before it kept one (or was added): reading "
               "the partition again from its log start offset.",
               f.missing, pl->conf->kafka.group, pt->topic, (int)pt->partition, (long long)db);
        dd_pipeline_position_count(pl, 0, 0);
        pt->rewind_end = hi;
        db = lo >= 0 ? lo : 0;
    } else if (hi >= 0 && db > hi) {
        dd_log(DD_LOG_WARN,
               "The database's position of %s [%d] is %lld, past the partition's end %lld (the "
               "topic was created again?): starting from Kafka's committed offset.",
               pt->topic, (int)pt->partition, (long long)db, (long long)hi);
        dd_position_track(pl->pos, pt->topic, pt->partition, db);
        return k;
    } else if (k >= 0 && db < k) {
        dd_pipeline_position_rewind(pl, pt, &f, k, hi);
    }
    start = db;
    if (lo >= 0 && db < lo) {
        dd_pipeline_position_gap(pl, pt, db, lo);
        start = lo;
    }
    dd_position_track(pl->pos, pt->topic, pt->partition, f.min);
    if (start != k) p->offset = start;
    snprintf(note, note_size, ", database position %lld (starting at %lld)", (long long)f.min,
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
}
