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
 *   dd_replay_letter.c  redrive: a dead letter's headers and filters judged
 *   dd_replay_drive.c   redrive: each letter, checkpoints, commits, recovery
 *   dd_replay_entries.c redrive: an entry per letter, its report and summary
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
    char group[256];            /* --group, or <kafka.group>.redrive */
    int have_from;              /* --from: start there, not where the group is */
    dd_redrive_filter_t filter; /* --reason, --since, --until, --key, --source-* */
    double rate;                /* --rate: dead letters per second, 0: no limit */
    int dry_run, retry_failed;
} dd_redrive_args_t;

/* What became of a dead letter: its entry's outcome in redrive's report. */
typedef enum {
    DD_RO_APPLIED = 0,  /* the handler ran and committed */
    DD_RO_DUPLICATE,    /* its key was applied already, with its hash: nothing ran */
    DD_RO_COPY,         /* a later copy of a letter of its key read before it */
    DD_RO_CONFLICT,     /* its key's row, or an earlier letter of it, has another hash */
    DD_RO_APPLY_FAILED, /* run, and not applied: rejected, a conflict at the claim, ... */
    DD_RO_LEFT,         /* not run: a failed row without retry_failed, a lease, ... */
    DD_RO_TO_APPLY,     /* --dry-run: it would run */
    DD_RO_BAD,          /* its payload gives no key (bad_json, key_missing, ...) */
    DD_RO_REFUSED,      /* forged or not whole: never run */
    DD_RO_FILTERED,     /* left out by a filter */
    DD_RO_NOT_DONE,     /* read, and stopped before its outcome was known */
    DD_RO_CNT
} dd_redrive_outcome_t;

/* One entry of redrive's report: a letter's, formatted (JSON or CSV). */
typedef struct {
    int32_t partition; /* its position in the dead-letter topic */
    int64_t offset;
    char *text;
    size_t len;
} dd_redrive_entry_t;

/* dd_replay_entries.c's: the entries since the last checkpoint (in
 * memory, sorted when written), those before it (spilled to a temporary
 * file until the report is written), and the count of each outcome. */
typedef struct {
    dd_redrive_entry_t *v;
    size_t n, cap;
    size_t sorted; /* v[0..sorted) is sorted (after a rewind): the letters read again skip them */
    FILE *spill;
    int any;   /* an entry was spilled: the next one is preceded by a comma (JSON) */
    int nomem; /* an entry could not be kept */
    uint64_t cnt[DD_RO_CNT];
} dd_redrive_entries_t;

/* dd_replay_drive.c's: where each partition stands, the source topics'
 * partition counts, the pace and the recovery after database errors. */
typedef struct {
    dd_redrive_entries_t ent;
    /* per partition (rp->parts' order): every letter before ck has its
     * entry; hold is the first letter a filter left out (or that a --from
     * after the group skipped), open the first one left without an
     * outcome (INT64_MAX: none); start is the group's offset at start */
    int64_t *ck, *hold, *open, *start;
    /* every topic of the cluster and its partition count, sorted by name,
     * read again (at most every DD_REDRIVE_MD_MS) when a letter names one
     * it does not have */
    struct dd_redrive_topic {
        char *name;
        int cnt;
    } * tp;
    int tp_cnt;
    int64_t md_ms;               /* when it was read, 0: never */
    int64_t next_us, flushed_ms; /* the rate's next slot; the last checkpoint */
    int db_tries;                /* recoveries since the last checkpoint */
    int64_t lane_db_since;       /* since when the lane waits for the database, 0: it does not */
    char error[1024];            /* why it stopped before the end */
} dd_redrive_run_t;

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
    uint64_t tombstones_skipped; /* null values, kafka.tombstones = "skip" */
} dd_replay_sum_t;

/* A distinct key of the current batch (a key of one route: the same key
 * in two routes is two keys, of two tables). */
typedef struct {
    dd_item_t *first; /* its first message in this batch */
    int seen;         /* already met earlier in the range */
    unsigned char first_hash[DD_HASH_LEN];
    int32_t first_part; /* seen: where its first message in the range is */
    int64_t first_off;
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
    /* A message parsed into the batch: 1 takes it out again (the item is
     * then freed). */
    int (*parsed)(dd_replay_t *rp, dd_item_t *item);
    /* A batch judged and recorded (its u keys in rp->uk), before its keys
     * to apply go to the lane. */
    void (*judged)(dd_replay_t *rp, size_t u);
    /* An item back from the lane with its outcome (done), or that the lane
     * never ran (done 0), before it is freed. */
    void (*finished)(dd_replay_t *rp, dd_item_t *item, int done);
} dd_replay_hooks_t;

struct dd_replay {
    dd_replay_args_t *args;
    dd_redrive_args_t *rd;          /* redrive's (args is its base), or NULL: replay */
    dd_redrive_run_t *rs;           /* redrive's, or NULL: replay */
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
/* One message polled: to its hook or dd_replay_message when it is in the
 * range, else freed. */
int dd_replay_take(dd_replay_t *rp, rd_kafka_message_t *rkm, char *errstr, size_t errstr_size);
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
/* Reads each partition i again from to[i] (when before its position), on
 * a new consumer. */
int dd_replay_reread(dd_replay_t *rp, const int64_t *to, char *errstr, size_t errstr_size);
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
/* 1 when the last statement of one of replay's connections failed with an
 * error worth a reconnect (a lost connection, a deadlock, ...). */
int dd_replay_db_retriable(dd_replay_t *rp);
/* Every connection opened again, and the temporary tables made anew (a
 * new session has none). */
int dd_replay_reconnect(dd_replay_t *rp, char *errstr, size_t errstr_size);

/* dd_replay_judge.c */
/* Parses one message of partition pt into the batch; judges the batch when
 * it is full. */
int dd_replay_message(dd_replay_t *rp, int route, rd_kafka_message_t *rkm, char *errstr,
                      size_t errstr_size);
/* Judges what the batch holds. */
int dd_replay_flush(dd_replay_t *rp, char *errstr, size_t errstr_size);
/* The verdict on key k met for the first time (reason: its code or NULL). */
dd_replay_status_t dd_replay_verdict(dd_replay_t *rp, const dd_replay_ukey_t *k,
                                     const char **reason);
/* 1 when --apply hands key k, of verdict st, to the lane. */
int dd_replay_to_apply(const dd_replay_t *rp, const dd_replay_ukey_t *k, dd_replay_status_t st);

/* dd_replay_apply.c */
/* 1 when route's handler is in external mode (--apply leaves its keys). */
int dd_replay_apply_external(const dd_replay_t *rp, int route);
int dd_replay_apply_start(dd_replay_t *rp, char *errstr, size_t errstr_size);
int dd_replay_apply_push(dd_replay_t *rp, dd_item_t *item, char *errstr, size_t errstr_size);
int dd_replay_apply_drain(dd_replay_t *rp, int wait_ms, char *errstr, size_t errstr_size);
int dd_replay_apply_finish(dd_replay_t *rp, char *errstr, size_t errstr_size);
/* Stops the lane at once (the transaction under way ends, a backoff ends
 * at once): what it finished is drained, what it never ran handed to the
 * finished hook and freed. */
void dd_replay_apply_abandon(dd_replay_t *rp);

/* dd_replay_report.c */
/* "name":"text", or "name":null,"name_hex":"..." (null alone: no key);
 * first: no comma before it. */
void dd_replay_json_key(FILE *out, const char *name, const char *key, size_t len, int first);
/* One CSV field (RFC 4180 quoting) and its separator (last: a newline). */
void dd_replay_csv_field(FILE *out, const char *v, size_t n, int last);
/* Two CSV columns: the key as text, or (not printable UTF-8) in hex. */
void dd_replay_csv_key(FILE *out, const char *key, size_t len);
/* The CSV header line: columns, then route (with routes) and shard (with
 * shards). */
void dd_replay_csv_head(const dd_replay_t *rp, FILE *out, const char *columns);
/* A range of the report's "ranges", its closing brace left to the caller:
 * topic, partition, from, to, read_to. */
void dd_replay_json_range(FILE *out, const dd_replay_part_t *pt, int first);
int dd_replay_report(dd_replay_t *rp, int complete, char *errstr, size_t errstr_size);
void dd_replay_print_summary(dd_replay_t *rp, int complete);
/* Findings of the report: keys missing or failed and not repaired,
 * conflicting keys and copies (what --fail-on-findings exits 3 for). */
uint64_t dd_replay_findings(const dd_replay_t *rp);

/* dd_replay_drive.c: redrive's part of the run (its hooks: dd_redrive_hooks) */
extern const dd_replay_hooks_t dd_redrive_hooks;
/* Reads the range: each letter judged, applied or reported, checkpoints
 * (entries written, the group committed) at most a second apart, and a
 * database error recovered from by reading the letters since the last
 * checkpoint again. Returns 0 at the end of the range, or the error that
 * stopped it (rp->rs->error says why). */
int dd_redrive_consume(dd_replay_t *rp, char *errstr, size_t errstr_size);
/* After dd_redrive_consume: the letters left without an outcome reported
 * not_done, the lane stopped (at once when it gave up), the last commit. */
int dd_redrive_finish(dd_replay_t *rp, char *errstr, size_t errstr_size);
void dd_redrive_run_release(dd_redrive_run_t *rs);

/* dd_replay_entries.c */
/* A letter's entry. rkm: the letter; l: its headers as read (NULL: read
 * them here); outcome and reason (a code), detail (NULL: none), route,
 * shard (-1: none), key (NULL: none), hash and stored hash (NULL: none). */
typedef struct {
    const rd_kafka_message_t *rkm;
    const dd_redrive_letter_t *l;
    dd_redrive_outcome_t outcome;
    const char *reason, *detail;
    int route, shard;
    const char *key;
    size_t key_len;
    const unsigned char *hash, *stored_hash;
} dd_redrive_note_t;
void dd_redrive_entry_add(dd_replay_t *rp, const dd_redrive_note_t *note);
/* 1 when the letter at partition/offset has an entry among those sorted
 * (v[0..sorted)). */
int dd_redrive_entry_has(const dd_redrive_entries_t *ent, int32_t partition, int64_t offset);
/* Sorts the entries since the last checkpoint (and marks them sorted). */
void dd_redrive_entries_sort(dd_redrive_entries_t *ent);
/* Sorts the entries since the last checkpoint and spills them. */
int dd_redrive_entries_spill(dd_replay_t *rp, char *errstr, size_t errstr_size);
void dd_redrive_entries_release(dd_redrive_entries_t *ent);
/* Letters that need a look: --fail-on-findings exits 3 for them. */
uint64_t dd_redrive_findings(const dd_replay_t *rp);
/* The report (to --report FILE, already opened as out, or stdout) and
 * --summary FILE; complete: the range was read to its end. */
int dd_redrive_report(dd_replay_t *rp, FILE *out, int complete, char *errstr, size_t errstr_size);
void dd_redrive_print_summary(dd_replay_t *rp, int complete);

#endif /* DD_REPLAY_INT_H */
