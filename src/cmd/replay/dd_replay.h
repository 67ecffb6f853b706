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

#endif /* DD_REPLAY_H */
