/*
 * Whether a partition still holds the messages a position was taken on.
 *
 * An offset names a message only within one life of a topic: a topic
 * deleted and created again starts at offset 0 with other messages, a
 * topic truncated (DeleteRecords) no longer holds the messages below its
 * new log start, and a database restored from a backup may hold a
 * position taken before either. librdkafka 2.0.2 does not expose Kafka's
 * topic ids, so a message is recognised by its fingerprint: its timestamp
 * and a SHA-256 of its key and value. The consumer takes the fingerprint
 * of a message it polled (dd_peek_fingerprint), the database's position is
 * written with it, and when the partition is assigned again the message at
 * that offset is read once more (dd_peek_read, on a client of its own that
 * joins no group) and compared (dd_position.h says what follows).
 */
#ifndef DD_PEEK_H
#define DD_PEEK_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "dd_conf.h"

#define DD_PEEK_DIGEST_LEN 32

/* A message's fingerprint. The digest is SHA-256 over the key's length as
 * 8 bytes big-endian (all ones for a null key), the key, then the value's
 * length and the value the same way: positions recorded by one dedupd are
 * checked by the next, so this never changes. */
typedef struct {
    int64_t timestamp; /* the message's (CreateTime or LogAppendTime), -1 none */
    unsigned char digest[DD_PEEK_DIGEST_LEN];
} dd_peek_fp_t;

/* Returns 0 or a negative dd_err_t (out of memory). */
int dd_peek_fingerprint(const rd_kafka_message_t *rkm, dd_peek_fp_t *fp);
/* The same from the parts of a message, for tests. */
int dd_peek_fingerprint_of(int64_t timestamp, const void *key, size_t key_len, const void *value,
                           size_t value_len, dd_peek_fp_t *fp);
int dd_peek_fp_equal(const dd_peek_fp_t *a, const dd_peek_fp_t *b);
/* "timestamp T, digest 0123456789abcdef..." (the digest's first 8 bytes). */
void dd_peek_fp_text(const dd_peek_fp_t *fp, char *out, size_t out_size);

typedef enum {
    DD_PEEK_UNREAD = 0, /* no answer in time, or an error: see why */
    DD_PEEK_READ,       /* the message at the offset is there: fp */
    DD_PEEK_ABSENT,     /* the partition holds no message at the offset */
} dd_peek_status_t;

/* One message asked for, and what was found. */
typedef struct {
    const char *topic; /* borrowed */
    int32_t partition;
    int64_t offset;
    dd_peek_status_t status;
    int64_t found;   /* ABSENT: the offset of the next message there, -1 none */
    dd_peek_fp_t fp; /* READ */
    char why[200];   /* UNREAD */
} dd_peek_t;

/* The client that reads them: the user's kafka.properties, no group to
 * join, no commits, an offset out of range reported rather than reset.
 * The caller destroys it with rd_kafka_destroy(). */
int dd_peek_new(rd_kafka_t **rkp, const dd_conf_t *conf, char *errstr, size_t errstr_size);

/* Reads the message at each reqs[i].offset, all at once, for timeout_ms
 * at most; fills each one's status. rk may be NULL (every one UNREAD, with
 * why). */
void dd_peek_read(rd_kafka_t *rk, dd_peek_t *reqs, int cnt, int timeout_ms);

#endif /* DD_PEEK_H */
