/*
 * Per-partition offset tracking: the contiguous watermark.
 *
 * Messages of one partition finish out of order (different lanes, dead
 * letters awaiting their ack). The offset stored for Kafka may only advance
 * to the lowest offset that is not yet finished, so a crash never skips a
 * message. Each tracker keeps a ring of in-flight offsets in poll order.
 *
 * Trackers live as long as the process; a revoke bumps the epoch so results
 * for messages polled under an older assignment are ignored.
 */
#ifndef DD_OFFSETS_H
#define DD_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "dd_peek.h"

/* How often a partition's polled message is fingerprinted (dd_ptrack_cand). */
#define DD_PTRACK_CAND_MS 500

typedef struct dd_ptrack_s {
    char *topic;
    int32_t partition;
    int assigned;
    uint32_t epoch;
    int64_t low_offset; /* low watermark when the worker started, -1 unknown */
    int64_t end_offset; /* high watermark when the worker started, -1 unknown */
    int64_t committed;  /* last offset confirmed committed, -1 none */
    int64_t stored;     /* last offset handed to rd_kafka_offsets_store, -1 none */
    int64_t next;       /* every offset below this one is finished; -1 unknown */
    int route;          /* its owner's: the topic's route, set when it is assigned */
    int held;           /* the consumer's: its messages waiting for the schema registry */
    /* The database's position (dd_position): offsets stored for Kafka never
     * pass limit, the position every database shard has recorded
     * (INT64_MAX: no limit, positions are not kept); pos_slot is its entry
     * there. Offsets below rewind_end were read again because the database
     * went back in time (-1: none). */
    int64_t limit;
    int pos_slot;
    int64_t rewind_end;
    /* A message the position can be checked by (dd_peek.h): the last one
     * taken (at most one every DD_PTRACK_CAND_MS), cand_offset (-1 none),
     * becomes the position's check once every offset up to it is
     * finished (dd_position_sync). */
    int64_t cand_offset;
    int64_t cand_ms;
    dd_peek_fp_t cand_fp;

    /* ring of in-flight offsets, indexed by sequence number */
    uint64_t head_seq, tail_seq;
    int64_t *offs;
    uint8_t *done;
    size_t cap;
} dd_ptrack_t;

typedef struct dd_offsets_s dd_offsets_t;

dd_offsets_t *dd_offsets_new(void);
void dd_offsets_destroy(dd_offsets_t *offs);

/* Finds the tracker of topic/partition, creating it when create is set.
 * Returns NULL when absent (or out of memory). */
dd_ptrack_t *dd_offsets_get(dd_offsets_t *offs, const char *topic, int32_t partition, int create);
size_t dd_offsets_count(const dd_offsets_t *offs);
dd_ptrack_t *dd_offsets_at(dd_offsets_t *offs, size_t i);

/* Starts a new assignment epoch: forgets in-flight offsets. next is the
 * committed offset the consumer resumes from (-1 unknown). */
void dd_ptrack_reset(dd_ptrack_t *pt, int assigned, int64_t next);
/* The offset that may be stored for Kafka now: next, but not past limit;
 * -1 none. */
int64_t dd_ptrack_storable(const dd_ptrack_t *pt);
/* 1 when a polled message at now_ms should be fingerprinted as the
 * partition's next check candidate. */
static inline int dd_ptrack_cand_due(const dd_ptrack_t *pt, int64_t now_ms)
{
    return pt->cand_offset < 0 && now_ms - pt->cand_ms >= DD_PTRACK_CAND_MS;
}
/* Records a polled offset. Returns its sequence number, or UINT64_MAX on
 * out-of-memory. Offsets must be added in increasing order. */
uint64_t dd_ptrack_add(dd_ptrack_t *pt, int64_t offset);
/* Marks seq finished and advances `next` past every finished head entry. */
void dd_ptrack_done(dd_ptrack_t *pt, uint64_t seq);
/* Number of polled offsets not yet finished. */
uint64_t dd_ptrack_inflight(const dd_ptrack_t *pt);
/* The offset after the last one polled in this epoch (next when none is in
 * flight); -1 unknown. */
int64_t dd_ptrack_polled_end(const dd_ptrack_t *pt);
/* 1 when everything below end_offset is finished (or there was nothing). */
int dd_ptrack_at_end(const dd_ptrack_t *pt);

#endif /* DD_OFFSETS_H */
