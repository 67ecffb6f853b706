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
 */
#ifndef DD_POSITION_H
#define DD_POSITION_H

#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "dd_conf.h"
#include "dd_db.h"
#include "dd_offsets.h"

/* The table's DDL, run by `dedupd migrate` in every shard. */
int dd_position_migrate(MYSQL *db, char *errstr, size_t errstr_size);

/* `dedupd run` and `check` at start, on one shard's connection: *exists
 * says whether the table is there (0 only when the server says it is
 * not); otherwise the runtime user's privileges on it are checked
 * (DD_ERR_FATAL naming the GRANT when one is missing). */
int dd_position_check(dd_db_t *db, const dd_conf_t *conf, int *exists, char *errstr,
                      size_t errstr_size);

/* For `dedupd stats`: the group's position of each (topics[i], parts[i])
 * in the database, the lowest over the shards, into out[i]:
 * DD_POSITION_NONE when no shard has one, DD_POSITION_PARTIAL when some
 * shards have one and others none. *tables: the shards that have the
 * table. Returns 0 or a negative dd_err_t (errstr names the shard). */
#define DD_POSITION_NONE (-1)
#define DD_POSITION_PARTIAL (-2)
int dd_position_lowest(const dd_conf_t *conf, const char *const *topics, const int32_t *parts,
                       int cnt, int64_t *out, int *tables, char *errstr, size_t errstr_size);

typedef struct dd_position_s dd_position_t;

/* What the shards record for one partition (dd_position_found). */
typedef struct {
    int64_t min;   /* the lowest position among the shards that have one; -1 none */
    int min_shard; /* the shard holding it */
    int have;      /* shards that hold a position */
    int missing;   /* shards that answered and hold none */
    int unread;    /* shards that did not answer in time */
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
/* The partition is assigned, starting at `start`: what each shard was
 * found to hold (the last load) is what it must never go below while it
 * is assigned; a shard that was not read must not hold less than floor
 * (-1: nothing known). */
void dd_position_track(dd_position_t *pos, const char *topic, int32_t partition, int64_t floor);
/* The partition was revoked: it is no longer written or watched. */
void dd_position_untrack(dd_position_t *pos, const char *topic, int32_t partition);
/* Publishes the watermark of every assigned tracker of offs and sets each
 * one's limit to what every shard has recorded. */
void dd_position_sync(dd_position_t *pos, dd_offsets_t *offs);
/* Has every published watermark written now, waiting up to timeout_ms.
 * Returns 0, or DD_ERR_RETRIABLE when a shard did not answer in time. */
int dd_position_flush(dd_position_t *pos, int timeout_ms);
/* 1 when a shard was found to hold less than it held before while its
 * partitions were assigned (the database went back under the running
 * process), with errstr saying where. */
int dd_position_went_back(dd_position_t *pos, char *errstr, size_t errstr_size);

#endif /* DD_POSITION_H */
