/*
 * The consumer's positions kept in the database (table dedupd_position).
 *
 * Kafka's committed offsets say how far a group has read; they know
 * nothing of the database. A database that goes back in time (a restore,
 * a failover to an asynchronous replica that had not received the last
 * transactions, one shard restored alone) loses the newest effects and
 * their dedup rows while Kafka's offsets stay where they were, and those
 * messages would never be read again. So dedupd also records, in the
 * database itself, per consumer group, topic and partition, the offset
 * below which every message's outcome is committed, written only after
 * those outcomes committed: a database that goes back takes its position
 * back with it, and the next assignment starts there.
 *
 * One thread and one connection per database shard write the positions
 * (an upsert of every partition that moved, at most once a second, in
 * every shard so that any one shard going back is seen); the consumer's
 * thread publishes its watermarks, reads the positions when partitions
 * are assigned (through the same threads, so a shard that does not answer
 * holds an assignment up for a bounded time only) and stores for Kafka no
 * offset past what every shard has recorded: Kafka's committed offset
 * never passes the database's, so a database behind Kafka is always a
 * database that went back.
 *
 * An offset means something only in the life of the topic it was read in
 * (dd_peek.h): each position is written with a check, the fingerprint of
 * a message below it that this group read, and is used to skip anything
 * only when the partition still holds that message (dd_position_judge).
 * The group is the row's key as a digest (group_key, SHA-256 of group_id),
 * so a group id of any length, and two that differ in trailing spaces,
 * each have rows of their own.
 */
#ifndef DD_POSITION_H
#define DD_POSITION_H

#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "dd_conf.h"
#include "dd_db.h"
#include "dd_offsets.h"
#include "dd_peek.h"

/* The table's DDL, run by `dedupd migrate` in every shard: creates it, or
 * brings a table of the first layout (keyed by group_id VARCHAR(255), no
 * check) to this one in a single ALTER TABLE. */
int dd_position_migrate(MYSQL *db, char *errstr, size_t errstr_size);

/* `dedupd run` and `check` at start, on one shard's connection: *exists
 * says whether the table is there (0 only when the server says it is
 * not); otherwise the runtime user's privileges on it are checked
 * (DD_ERR_FATAL naming the GRANT when one is missing), and it must be of
 * this layout (DD_ERR_FATAL saying to run `dedupd migrate` when not). */
int dd_position_check(dd_db_t *db, const dd_conf_t *conf, int *exists, char *errstr,
                      size_t errstr_size);

/* The message a position is checked by: offset -1 when none is recorded. */
typedef struct {
    int64_t offset;
    dd_peek_fp_t fp;
} dd_position_check_t;

/* For `dedupd stats`: the group's position of each (topics[i], parts[i])
 * in the database, the lowest over the shards, into out[i] (and its check
 * into checks[i] when checks is not NULL): DD_POSITION_NONE when no shard
 * has one, DD_POSITION_PARTIAL when some shards have one and others none.
 * *tables: the shards that have the table. Returns 0 or a negative
 * dd_err_t (errstr names the shard). */
#define DD_POSITION_NONE (-1)
#define DD_POSITION_PARTIAL (-2)
int dd_position_lowest(const dd_conf_t *conf, const char *const *topics, const int32_t *parts,
                       int cnt, int64_t *out, dd_position_check_t *checks, int *tables,
                       char *errstr, size_t errstr_size);

/* ---- whether a position is the topic's (dd_position_judge.c) ---- */

/* What is known of a partition when it is assigned. */
typedef struct {
    int64_t pos;               /* the database's position (the lowest of the shards) */
    dd_position_check_t check; /* the message it is checked by */
    int64_t committed;         /* Kafka's committed offset, -1 none */
    int64_t lo, hi;            /* the partition's watermarks, -1 unknown */
    const dd_peek_t *peek;     /* check.offset read again; NULL when it was not */
} dd_position_facts_t;

typedef enum {
    /* The position is this topic's (its check message is there), or
     * nothing readable lies below it: start from `use`. */
    DD_POSITION_OWN,
    /* Taken in another life of the topic (deleted and created again, or
     * truncated and refilled, or the database restored from before
     * that): start from the log start offset; the rows are rewritten. */
    DD_POSITION_FOREIGN,
    /* The partition ends below the position but still holds its check
     * message: Kafka lost the messages after it (an unclean leader
     * election). Start after the check message; the rows are rewritten. */
    DD_POSITION_DIVERGED,
    /* Cannot be told (the check message is gone or could not be read, or
     * none is recorded and Kafka has no committed offset): start from the
     * log start offset, rows left as they are. */
    DD_POSITION_UNCHECKED,
} dd_position_verdict_t;

typedef struct {
    dd_position_verdict_t verdict;
    /* OWN: where to start: the position; for a row that records no check
     * (written by an older dedupd), Kafka's committed offset when lower */
    int64_t use;
    /* otherwise: where to start: the log start offset (or
     * RD_KAFKA_OFFSET_BEGINNING when it is unknown), or the check's offset
     * + 1 (DIVERGED) */
    int64_t start;
    int reset;                /* rewrite the rows to start (dd_position_reset) */
    dd_position_check_t keep; /* the check the rewritten rows keep (offset -1: none) */
    char why[600];            /* what was expected and what was found; a note for OWN */
} dd_position_judgement_t;

/* The offset to read again (dd_peek_read) before judging f, or -1. */
int64_t dd_position_peek_offset(const dd_position_facts_t *f);
void dd_position_judge(const dd_position_facts_t *f, dd_position_judgement_t *j);

typedef struct dd_position_s dd_position_t;

/* What the shards record for one partition (dd_position_found). */
typedef struct {
    int64_t min;               /* the lowest position among the shards that have one; -1 none */
    int min_shard;             /* the shard holding it */
    dd_position_check_t check; /* that row's check */
    int have;                  /* shards that hold a position */
    int missing;               /* shards that answered and hold none */
    int unread;                /* shards that did not answer in time */
} dd_position_found_t;

int dd_position_new(dd_position_t **posp, const dd_conf_t *conf, char *errstr, size_t errstr_size);
int dd_position_start(dd_position_t *pos, char *errstr, size_t errstr_size);
/* Writes what is pending (up to timeout_ms), then stops the threads. */
void dd_position_stop(dd_position_t *pos, int timeout_ms);
void dd_position_destroy(dd_position_t *pos);

/* Consumer's thread. Reads every position of the group from every shard,
 * waiting up to timeout_ms; what a shard did not answer counts as unread
 * in dd_position_found(). */
void dd_position_load(dd_position_t *pos, int timeout_ms);
void dd_position_found(dd_position_t *pos, const char *topic, int32_t partition,
                       dd_position_found_t *out);
/* The partition is assigned: what each shard was found to hold (the last
 * load) is what it must never go below while it is assigned; a shard that
 * was not read must not hold less than floor (-1: nothing known). check:
 * the message the position found is checked by, written again with it
 * until a newer one is taken (NULL: none). */
void dd_position_track(dd_position_t *pos, const char *topic, int32_t partition, int64_t floor,
                       const dd_position_check_t *check);
/* The partition is assigned at start, and the positions the shards hold
 * are not its (dd_position_judge: FOREIGN, DIVERGED): every shard's row is
 * rewritten to start with keep as its check (NULL: none), not raised
 * (GREATEST) from what it holds; no offset is stored for Kafka before. */
void dd_position_reset(dd_position_t *pos, const char *topic, int32_t partition, int64_t start,
                       const dd_position_check_t *keep);
/* The partition was revoked: it is no longer written or watched. */
void dd_position_untrack(dd_position_t *pos, const char *topic, int32_t partition);
/* Publishes the watermark of every assigned tracker of offs (and the check
 * message the tracker took, once the watermark passed it) and sets each
 * one's limit to what every shard has recorded. */
void dd_position_sync(dd_position_t *pos, dd_offsets_t *offs);
/* Has every published watermark written now, waiting up to timeout_ms.
 * Returns 0, or DD_ERR_RETRIABLE when a shard did not answer in time. */
int dd_position_flush(dd_position_t *pos, int timeout_ms);
/* 1 when the positions can no longer be kept, with errstr saying why: a
 * shard was found to hold less than it held before while its partitions
 * were assigned (the database went back under the running process), or a
 * statement on the table failed with an error no retry fixes (logged at
 * error when it happened). */
int dd_position_stopped(dd_position_t *pos, char *errstr, size_t errstr_size);
/* Statements on the table that failed (reads and writes, retried or not). */
uint64_t dd_position_errors(dd_position_t *pos);

#endif /* DD_POSITION_H */
