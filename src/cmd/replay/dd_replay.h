/*
 * `dedupd replay`: reads a range of a topic with assign() (no group, no
 * commits) and compares each message's business key and request hash with
 * the dedup table, to reconcile the database against the topic; with
 * --apply, runs missing keys through the normal claim + handler transaction.
 * The command is dd_cmd_replay (dd_cmd.h).
 */
#ifndef DD_REPLAY_H
#define DD_REPLAY_H

#include <stdint.h>
#include <stddef.h>

#include <librdkafka/rdkafka.h>

#include "dd_conf.h"

/* ---- argument parsing, exposed for tests/unit/test_replay.c ---- */

typedef enum {
    DD_REPLAY_POS_EARLIEST = 0, /* the low watermark */
    DD_REPLAY_POS_LATEST,       /* the high watermark when replay starts */
    DD_REPLAY_POS_OFFSET,       /* value: an offset, applied per partition */
    DD_REPLAY_POS_TIME,         /* value: milliseconds since the epoch (UTC) */
} dd_replay_pos_kind_t;

typedef struct {
    dd_replay_pos_kind_t kind;
    int64_t value;
} dd_replay_pos_t;

/* "earliest", "latest", an offset ("1200"), an ISO-8601 time with a zone
 * ("2026-11-29T10:00:00Z", "2026-11-29T18:00:00.250+08:00") or a duration
 * back from now_ms ("-2h", "-30m", "-90s", "-1d"). */
int dd_replay_pos_parse(const char *s, int64_t now_ms, dd_replay_pos_t *pos, char *errstr,
                        size_t errstr_size);

/* Refuses a range [from, to) that is empty or inverted whatever the topic
 * holds: two offsets or two times with to <= from, --from latest, --to
 * earliest. Ranges mixing kinds are resolved per partition later. Returns
 * 0 or DD_ERR_ARG with errstr. */
int dd_replay_range_check(const dd_replay_pos_t *from, const dd_replay_pos_t *to, char *errstr,
                          size_t errstr_size);

/* "0,2,5-7" -> sorted distinct partitions (malloc'd *partsp, *cntp). */
int dd_replay_partitions_parse(const char *s, int32_t **partsp, int *cntp, char *errstr,
                               size_t errstr_size);

/* ---- a dead letter's headers, judged before `dedupd redrive` runs it
 * (dd_replay_letter.c), exposed for tests/unit/test_redrive.c ---- */

#define DD_REDRIVE_TOPIC_MAX 249 /* Kafka's longest topic name */

/* Which headers of a dd_redrive_letter_t were read. */
#define DD_LETTER_TOPIC 0x1
#define DD_LETTER_PARTITION 0x2
#define DD_LETTER_OFFSET 0x4
#define DD_LETTER_REASON 0x8

/* What a dead letter's dedupd.* headers say (dd_dlq.h writes them). */
typedef struct {
    unsigned have;                        /* DD_LETTER_* of the fields read */
    char topic[DD_REDRIVE_TOPIC_MAX + 1]; /* dedupd.topic: its source topic */
    int32_t partition;                    /* dedupd.partition */
    int64_t offset;                       /* dedupd.offset */
    int reason;                           /* dedupd.reason, a dd_reason_t */
    int truncated;                        /* dedupd.truncated is there */
} dd_redrive_letter_t;

/* A whole decimal number, digits only (no sign, no space), at most max.
 * Returns 0 and *out, or -1. */
int dd_redrive_number_parse(const char *s, size_t len, int64_t max, int64_t *out);

/* Reads the dedupd.* headers of a dead letter (hdrs may be NULL). Each of
 * dedupd.topic, .partition, .offset and .reason must be there exactly once
 * and well formed. Returns NULL, or the code of the refusal
 * ("not_a_dead_letter": no dedupd.topic at all; "bad_header") with why;
 * l holds what was read either way. */
const char *dd_redrive_letter_read(const rd_kafka_headers_t *hdrs, dd_redrive_letter_t *l,
                                   char *why, size_t why_size);

/* The route that runs letter l read from the dead-letter topic dlq: the
 * route of its source topic, when that route's dead letters from that
 * topic go to dlq. Else -1, with the code of the refusal in *code
 * ("unknown_source", "source_is_dlq", "wrong_dlq") and why. */
int dd_redrive_letter_route(const dd_conf_t *conf, const char *dlq, const dd_redrive_letter_t *l,
                            const char **code, char *why, size_t why_size);

/* The filters of `dedupd redrive` (all must hold). */
typedef struct {
    unsigned reasons;           /* --reason: a bit per dd_reason_t; 0: any */
    int64_t since_ms, until_ms; /* the letter's timestamp; -1: no bound */
    const char *src_topic;      /* --source-topic, or NULL */
    int32_t src_part;           /* --source-partition, or -1 */
    int64_t src_lo, src_hi;     /* --source-offsets [lo, hi], or -1 */
    const char *key_glob;       /* --key: on the key rendered from the payload */
} dd_redrive_filter_t;

/* NULL when letter l with timestamp ts passes every filter of f but --key;
 * else the option that leaves it out ("--reason"), with why. */
const char *dd_redrive_filter_letter(const dd_redrive_filter_t *f, const dd_redrive_letter_t *l,
                                     int64_t ts, char *why, size_t why_size);

/* 1 when the business key key[0..len) matches glob (fnmatch(3)); a key
 * holding a NUL byte never does (fnmatch would see a part of it). */
int dd_redrive_key_match(const char *glob, const char *key, size_t len);

#endif /* DD_REPLAY_H */
