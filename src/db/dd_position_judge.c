/*
 * Whether a position the database holds is the topic's as it is now (see
 * dd_position.h). One rule covers a topic deleted and created again, one
 * truncated with DeleteRecords, and a database restored from before
 * either: a position is used to skip anything only when nothing readable
 * lies below it, or when the partition still holds the message the
 * position was written with (its check). Anything else starts where
 * nothing can be missed, the log start offset, and the claim skips what
 * was applied already. `dedupd run` acts on the judgement and `dedupd
 * stats` shows it, so both say the same.
 */
#include "dd_position.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"

int64_t dd_position_peek_offset(const dd_position_facts_t *f)
{
    int64_t at = f->check.offset;

    if (at < 0 || at >= f->pos || (f->lo >= 0 && f->pos <= f->lo)) return -1;
    if ((f->lo >= 0 && at < f->lo) || (f->hi >= 0 && at >= f->hi)) return -1;
    return at;
}

/* Where to start when the position is not used. */
static int64_t dd_position_log_start(const dd_position_facts_t *f)
{
    return f->lo >= 0 ? f->lo : RD_KAFKA_OFFSET_BEGINNING;
}

static void dd_position_verdict(dd_position_judgement_t *j, dd_position_verdict_t v, int64_t start,
                                int reset)
{
    j->verdict = v;
    j->start = start;
    j->reset = reset;
}

/* What the check's message was found to be, for the messages. */
static void dd_position_found_text(const dd_position_facts_t *f, char *out, size_t out_size)
{
    const dd_peek_t *p = f->peek;

    if (!p)
        snprintf(out, out_size, "it was not read");
    else if (p->status == DD_PEEK_READ)
        dd_peek_fp_text(&p->fp, out, out_size);
    else if (p->status == DD_PEEK_ABSENT && p->found >= 0)
        snprintf(out, out_size, "no message there (the next is at %lld)", (long long)p->found);
    else if (p->status == DD_PEEK_ABSENT)
        snprintf(out, out_size, "the partition ends before it");
    else
        snprintf(out, out_size, "it could not be read: %s", p->why);
}

/* The position is past the partition's end. */
static void dd_position_judge_past_end(const dd_position_facts_t *f, dd_position_judgement_t *j,
                                       const char *expected)
{
    char found[300];

    if (f->peek && f->peek->status == DD_PEEK_READ &&
        dd_peek_fp_equal(&f->peek->fp, &f->check.fp)) {
        dd_position_verdict(j, DD_POSITION_DIVERGED, f->check.offset + 1, 1);
        j->keep = f->check;
        snprintf(j->why, sizeof(j->why),
                 "past the partition's end %lld, yet the partition still holds the message at "
                 "%lld it was written with (%s): Kafka lost the messages after it (an unclean "
                 "leader election?)",
                 (long long)f->hi, (long long)f->check.offset, expected);
        return;
    }
    dd_position_verdict(j, DD_POSITION_FOREIGN, dd_position_log_start(f), f->lo >= 0);
    if (f->check.offset < 0) {
        snprintf(j->why, sizeof(j->why), "past the partition's end %lld", (long long)f->hi);
        return;
    }
    dd_position_found_text(f, found, sizeof(found));
    snprintf(j->why, sizeof(j->why),
             "past the partition's end %lld; it was written after the message at %lld (%s), "
             "and there the partition holds %s",
             (long long)f->hi, (long long)f->check.offset, expected,
             f->check.offset >= f->hi ? "nothing" : found);
}

/* A check to compare: the message at its offset was read again, or not. */
static void dd_position_judge_peek(const dd_position_facts_t *f, dd_position_judgement_t *j,
                                   const char *expected)
{
    const dd_peek_t *p = f->peek;
    char found[300];

    dd_position_found_text(f, found, sizeof(found));
    if (p && p->status == DD_PEEK_READ && dd_peek_fp_equal(&p->fp, &f->check.fp)) {
        j->verdict = DD_POSITION_OWN;
        j->use = f->pos;
        snprintf(j->why, sizeof(j->why), "checked by the message at %lld",
                 (long long)f->check.offset);
        return;
    }
    if ((p && p->status == DD_PEEK_READ) || (p && p->status == DD_PEEK_ABSENT && p->found < 0)) {
        dd_position_verdict(j, DD_POSITION_FOREIGN, dd_position_log_start(f), f->lo >= 0);
        snprintf(j->why, sizeof(j->why),
                 "written after the message at %lld (%s), but there the partition holds %s",
                 (long long)f->check.offset, expected, found);
        return;
    }
    dd_position_verdict(j, DD_POSITION_UNCHECKED, dd_position_log_start(f), 0);
    snprintf(j->why, sizeof(j->why),
             "written after the message at %lld (%s), and there the partition holds %s "
             "(compacted away, or another life of the topic): it cannot be checked",
             (long long)f->check.offset, expected, found);
}

void dd_position_judge(const dd_position_facts_t *f, dd_position_judgement_t *j)
{
    char expected[200] = "";

    memset(j, 0, sizeof(*j));
    j->keep.offset = -1;
    j->verdict = DD_POSITION_OWN;
    j->use = f->pos;
    if (f->check.offset >= 0) dd_peek_fp_text(&f->check.fp, expected, sizeof(expected));
    if (f->lo >= 0 && f->pos <= f->lo) {
        snprintf(j->why, sizeof(j->why), "nothing readable lies below it");
    } else if (f->hi >= 0 && f->pos > f->hi) {
        dd_position_judge_past_end(f, j, expected);
    } else if (f->check.offset < 0 && f->committed >= 0) {
        j->use = f->committed < f->pos ? f->committed : f->pos;
        snprintf(j->why, sizeof(j->why),
                 "it records no message to check it by (written by an older dedupd): used no "
                 "further than Kafka's committed offset");
    } else if (f->check.offset < 0) {
        dd_position_verdict(j, DD_POSITION_UNCHECKED, dd_position_log_start(f), 0);
        snprintf(j->why, sizeof(j->why),
                 "it records no message to check it by (written by an older dedupd), and Kafka "
                 "has no committed offset for the group there to vouch for it");
    } else if (f->lo >= 0 && f->check.offset < f->lo) {
        dd_position_verdict(j, DD_POSITION_UNCHECKED, f->lo, 0);
        snprintf(j->why, sizeof(j->why),
                 "written after the message at %lld (%s), which is below the log start offset "
                 "%lld now (deleted by retention or DeleteRecords): it cannot be checked",
                 (long long)f->check.offset, expected, (long long)f->lo);
    } else {
        dd_position_judge_peek(f, j, expected);
    }
}
