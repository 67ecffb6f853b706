/*
 * Inside `dedupd replay` (see dd_replay.h), shared by its files only:
 *   dd_replay.c         the command: the run, then the report
 *   dd_replay_run.c     the run (redrive's too): set up, consume the range, free
 *   dd_replay_args.c    the command line: positions, times, partitions
 *   dd_replay_range.c   the Kafka side: its own consumer, the ranges
 *   dd_replay_sql.c     statements on its connections, the temporary tables
 *   dd_replay_judge.c   each batch against the dedup table, in temporary tables
 *   dd_replay_apply.c   --apply: missing keys through a lane group
 *   dd_replay_report.c  the JSON or CSV report and the summary
 *   dd_replay_redrive.c `dedupd redrive`, built on the run (rp->hooks)
 */
#ifndef DD_REPLAY_INT_H
#define DD_REPLAY_INT_H

#include <stdint.h>
#include <stdio.h>

#include <librdkafka/rdkafka.h>

#include "dd_buf.h"
#include "dd_cmd.h"
#include "dd_conf.h"
#include "dd_db.h"
#include "dd_handler.h"
#include "dd_hash.h"
#include "dd_item.h"
#include "dd_json.h"
#include "dd_key.h"
#include "dd_lanes.h"
#include "dd_progress.h"
#include "dd_registry.h"
#include "dd_replay.h"
#include "dd_routes.h"
#include "dd_schemafp.h"

#define DD_REPLAY_BATCH 500        /* messages judged per round of lookups */
#define DD_REPLAY_MAX_PENDING 2000 /* --apply: items handed to the lane, not yet back */
#define DD_REPLAY_TIMEOUT_MS 10000 /* metadata, watermarks, offsets_for_times */
#define DD_REPLAY_MAX_TOPICS 64

/* What replay says about a key (or, for bad and copy conflicts, a message).
 * Stored as numbers in the temporary tables. */
typedef enum {
    DD_RS_NONE = 0,
    DD_RS_APPLIED,     /* a row with the same hash, applied */
    DD_RS_MISSING,     /* no row */
    DD_RS_CONFLICT,    /* a row with another hash, or a copy unlike the first */
    DD_RS_FAILED,      /* a failed (rejected) row with the same hash */
    DD_RS_PROCESSING,  /* a row in state 0 (a lease holder is on it) */
    DD_RS_PENDING,     /* no row, and the live group has not consumed the message yet */
    DD_RS_WRONG_SHARD, /* no row in its shard, but one in another (shards not moved) */
    DD_RS_BAD,         /* no key can be derived */
    DD_RS_CNT
} dd_replay_status_t;

/* What --apply did with a key. */
typedef enum {
    DD_RA_NONE = 0,
    DD_RA_REPAIRED,        /* the handler ran and committed */
    DD_RA_ALREADY_APPLIED, /* the claim found it applied meanwhile (a live consumer) */
    DD_RA_FAILED,          /* conflict, rejected or retries exhausted */
    DD_RA_NOT_REPAIRED,    /* left alone: its row is in another shard (wrong_shard) */
    DD_RA_CNT
} dd_replay_apply_t;

/* What the command line asks for (the command's options, see dd_cmd.h). */
typedef struct {
    dd_replay_pos_t from, to;
    const char *topics[DD_REPLAY_MAX_TOPICS];
    int topic_cnt;
    int32_t *parts; /* --partitions, or NULL for all */
    int part_cnt;
    int apply, orphans, csv;
    int fail_on_findings; /* exit DD_EXIT_FINDINGS when the report has findings */
    int all_consumed;     /* --all-consumed: no key is pending, whatever the group did */
    const char *route;    /* --route: only this route's topics */
    const char *report;
    const char *summary; /* --summary FILE: the summary as JSON */
    int have_from;       /* --from was given */
    int64_t now_ms;      /* when the command started: what times back from now count from */
} dd_replay_args_t;

/* What `dedupd redrive` (dd_replay_redrive.c) asks for: replay over a
 * dead-letter topic, each dead letter judged by its source topic's route. */
typedef struct {
    dd_replay_args_t base;      /* first: replay's files read it */
    const char *dlq;            /* --from-dlq */
    char group[300];            /* --group, or <kafka.group>.redrive */
    int have_from;              /* --from: start there, not where the group is */
    unsigned reasons;           /* --reason: a bit per dd_reason_t; 0: any */
    int64_t since_ms, until_ms; /* the dead letter's timestamp; -1: no bound */
    const char *key_glob;       /* --key: fnmatch(3) on the business key */
    const char *src_topic;      /* --source-topic */
    int32_t src_part;           /* --source-partition, or -1 */
    int64_t src_lo, src_hi;     /* --source-offsets [lo, hi], or -1 */
    double rate;                /* --rate: dead letters per second, 0: no limit */
    int dry_run, retry_failed;
    int64_t next_us, flushed_ms; /* the rate's next slot; the last progress commit */
} dd_redrive_args_t;

/* One partition's range [start, end), fixed when replay starts. */
typedef struct {
    const char *topic;
    int32_t partition;
    int route;         /* the topic's, an index of conf->routes */
    int64_t low, high; /* watermarks at start */
    int64_t start, end;
    int64_t pos; /* next offset to read */
    int done;
    /* The live group's committed offset when replay started (-1 none): a
     * message at or past it may simply not be consumed yet. */
    int64_t group_committed;
    /* TIME bounds, checked on each message's timestamp as well: brokers (and
     * the mock cluster) that cannot look offsets up by time answer -1. */
    int64_t from_ts, to_ts; /* -1: none */
} dd_replay_part_t;

typedef struct {
    uint64_t messages, keys;
    uint64_t status[DD_RS_CNT]; /* keys by status; [DD_RS_BAD] counts messages */
    uint64_t bad[DD_REASON_CNT];
    uint64_t copy_conflicts; /* later copies whose hash differs from the first */
    uint64_t apply[DD_RA_CNT];
    uint64_t orphans;
    uint64_t filtered, unredrivable; /* redrive: left out by a filter; payload not whole */
    uint64_t tombstones_skipped;     /* null values, kafka.tombstones = "skip" */
} dd_replay_sum_t;

/* A distinct key of the current batch (a key of one route: the same key
 * in two routes is two keys, of two tables). */
typedef struct {
    dd_item_t *first; /* its first message in this batch */
    int seen;         /* already met earlier in the range */
    unsigned char first_hash[DD_HASH_LEN];
    int has_row, row_status;
    int row_shard; /* without a row in its shard: another shard holding one, or -1 */
    unsigned char row_hash[DD_HASH_LEN];
    char row_error[256];
} dd_replay_ukey_t;

typedef struct dd_replay dd_replay_t;

/* Where a command built on the run (redrive) plugs into it. */
typedef struct {
    /* Where each partition starts, once the ranges and the group's
     * offsets are known. */
    void (*resume)(dd_replay_t *rp);
    /* Each message of the range, in place of dd_replay_message. */
    int (*message)(dd_replay_t *rp, rd_kafka_message_t *rkm, char *errstr, size_t errstr_size);
    /* After each poll (final 0). */
    int (*tick)(dd_replay_t *rp, int final, char *errstr, size_t errstr_size);
} dd_replay_hooks_t;

struct dd_replay {
    dd_replay_args_t *args;
    dd_redrive_args_t *rd;          /* redrive's (args is its base), or NULL: replay */
    const dd_replay_hooks_t *hooks; /* redrive's, or NULL: replay */
    const dd_conf_t *conf;
    int only;            /* --route's index, or -1: every route */
    dd_routes_t *routes; /* each route's key and hash (and with --apply its handler) */
    char **topics;       /* the topics read: --topic's, or the routes' (patterns resolved) */
    int topic_cnt;
    dd_json_doc_t *doc;      /* the message being parsed */
    dd_registry_t *registry; /* the writer schemas of avro routes, or NULL */
    dd_schemafp_t schemafp;  /* how it checks their fingerprints */
    rd_kafka_t *rk;
    dd_db_t *db; /* shard 0's: the temporary tables, and shard 0's lookups */
    /* Each shard's connection for its lookups, and with --orphans its
     * anti-join (sdb[0] is db, not owned twice). */
    dd_db_t *sdb[DD_CONF_SHARD_MAX];
    dd_buf_t sql;

    dd_replay_part_t *parts;
    int part_cnt, parts_left;
    int64_t total, progress; /* offsets in the range / passed so far */

    dd_item_t *batch[DD_REPLAY_BATCH];
    dd_item_t *sorted[DD_REPLAY_BATCH];
    dd_replay_ukey_t uk[DD_REPLAY_BATCH];
    size_t ukidx[DD_REPLAY_BATCH];
    size_t n;

    /* --apply */
    dd_handler_t *hs[DD_CONF_ROUTE_MAX]; /* every route's */
    dd_lanes_t *lanes;                   /* one lane */
    int64_t pending;

    dd_replay_sum_t sum;
    dd_progress_t progress_line;
};

/* dd_replay_run.c: set up (rp->args, rp->rd, rp->hooks and rp->conf set),
 * consume the range, free. */
int dd_replay_setup(dd_replay_t *rp, char *errstr, size_t errstr_size);
int dd_replay_consume(dd_replay_t *rp, char *errstr, size_t errstr_size);
void dd_replay_destroy(dd_replay_t *rp);

/* dd_replay_args.c: the command's options (see dd_cmd.h); opts is a
 * dd_replay_args_t. set and check return 0 or 2 (usage error, printed). */
extern const dd_cmd_opt_t dd_replay_args_opts[];
void dd_replay_args_init(void *opts);
int dd_replay_args_set(void *opts, int id, char *arg);
int dd_replay_args_check(void *opts, int argc, char **argv);

/* dd_replay_range.c */
int dd_replay_kafka_new(dd_replay_t *rp, char *errstr, size_t errstr_size);
/* Where the live group (kafka.group) has committed each partition. */
int dd_replay_group_offsets(dd_replay_t *rp, char *errstr, size_t errstr_size);
/* The partitions to read, then their ranges, then assigned. */
int dd_replay_partitions(dd_replay_t *rp, char *errstr, size_t errstr_size);
int dd_replay_ranges(dd_replay_t *rp, char *errstr, size_t errstr_size);
int dd_replay_assign(dd_replay_t *rp, char *errstr, size_t errstr_size);
dd_replay_part_t *dd_replay_part_find(dd_replay_t *rp, const char *topic, int32_t partition);
void dd_replay_advance(dd_replay_t *rp, dd_replay_part_t *pt, int64_t next);
int dd_replay_in_time(dd_replay_t *rp, dd_replay_part_t *pt, rd_kafka_message_t *rkm);

/* dd_replay_sql.c */
int dd_replay_exec(dd_replay_t *rp, const char *sql, size_t len, char *errstr, size_t errstr_size);
/* Runs rp->sql; use: stream the rows (mysql_use_result) rather than store
 * them. NULL with errstr on failure. */
MYSQL_RES *dd_replay_query(dd_replay_t *rp, int use, char *errstr, size_t errstr_size);
/* The same on shard's connection (sdb[shard]); errors name the shard. */
MYSQL_RES *dd_replay_shard_query(dd_replay_t *rp, int shard, int use, char *errstr,
                                 size_t errstr_size);
/* Appends s quoted (at most 1024 bytes), or NULL when s is NULL or empty. */
void dd_replay_put_text(dd_replay_t *rp, const char *s);
int dd_replay_temp_tables(dd_replay_t *rp, char *errstr, size_t errstr_size);

/* dd_replay_judge.c */
/* Parses one message of partition pt into the batch; judges the batch when
 * it is full. */
int dd_replay_message(dd_replay_t *rp, int route, rd_kafka_message_t *rkm, char *errstr,
                      size_t errstr_size);
/* Judges what the batch holds. */
int dd_replay_flush(dd_replay_t *rp, char *errstr, size_t errstr_size);

/* dd_replay_apply.c */
/* 1 when route's handler is in external mode (--apply leaves its keys). */
int dd_replay_apply_external(const dd_replay_t *rp, int route);
int dd_replay_apply_start(dd_replay_t *rp, char *errstr, size_t errstr_size);
int dd_replay_apply_push(dd_replay_t *rp, dd_item_t *item, char *errstr, size_t errstr_size);
int dd_replay_apply_drain(dd_replay_t *rp, int wait_ms, char *errstr, size_t errstr_size);
int dd_replay_apply_finish(dd_replay_t *rp, char *errstr, size_t errstr_size);

/* dd_replay_report.c */
int dd_replay_report(dd_replay_t *rp, int complete, char *errstr, size_t errstr_size);
void dd_replay_print_summary(dd_replay_t *rp, int complete);
/* Findings of the report: keys missing or failed and not repaired,
 * conflicting keys and copies (what --fail-on-findings exits 3 for). */
uint64_t dd_replay_findings(const dd_replay_t *rp);

#endif /* DD_REPLAY_INT_H */
