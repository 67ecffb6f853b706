/*
 * The outbox table: where a handler's host->emit() writes an event inside
 * dedupd's transaction, and what the relay (dd_relay) reads, publishes and
 * deletes. One table, dedupd_outbox, in every database shard, created by
 * `dedupd migrate` when outbox.enabled is on.
 *
 * An event's order is its id (AUTO_INCREMENT, given at the insert); its
 * identity is event_id, a hash of the database's event namespace, the
 * dedup table, the business key of the message it belongs to and the
 * count of events emitted for that message before it in the same handler
 * call: the same in every attempt of a replayed batch, and never changed
 * once committed, so it is the id a consumer deduplicates by (header
 * dedupd.event_id). The namespace is random, made by `dedupd migrate` and
 * recorded in the table's comment, so two deployments (two databases, on
 * one server or two) that share a dedup table's name and key template
 * still give their events different ids.
 */
#ifndef DD_OUTBOX_H
#define DD_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "dd_buf.h"
#include "dd_conf.h"
#include "dedupd/handler.h"

#define DD_OUTBOX_TABLE "dedupd_outbox"
/* Hex digits of an event id (128 bits). */
#define DD_OUTBOX_ID_LEN 32
/* The header every relayed event carries, with its event_id. */
#define DD_OUTBOX_ID_HEADER "dedupd.event_id"
/* What a record costs beyond its key, value and headers within the
 * producer's message.max.bytes (framing, the record batch header, the id
 * header), with room to spare. */
#define DD_OUTBOX_RESERVE 512
/* states of a row */
#define DD_OUTBOX_PENDING 0
#define DD_OUTBOX_PARKED 1

/* One event as emitted. */
typedef struct {
    const char *topic;
    const void *key; /* NULL: no key */
    size_t key_len;
    const void *value; /* NULL: a null value */
    size_t value_len;
    const dedupd_header *headers;
    size_t header_cnt;
    char event_id[DD_OUTBOX_ID_LEN + 1];
} dd_outbox_event_t;

/* Hex digits of an event namespace (128 bits), and the tag before them in
 * the table's comment. */
#define DD_OUTBOX_NS_LEN 32
#define DD_OUTBOX_NS_TAG "dedupd event_namespace="

/* Creates dedupd_outbox if it does not exist, and records the event
 * namespace ns (NULL: a random one) when it records none. 0 or the class
 * of the database error (errstr). */
int dd_outbox_migrate(MYSQL *db, const char *ns, char *errstr, size_t errstr_size);

/* The event namespace db's outbox records, into ns. 0; DD_ERR_CONFIG when
 * the table cannot be seen or records none (errstr: run migrate); or the
 * class of the database error. */
int dd_outbox_namespace(MYSQL *db, char ns[DD_OUTBOX_NS_LEN + 1], char *errstr, size_t errstr_size);

/* The id of the n-th event (from 0) emitted for business key biz_key of
 * dedup table scope, in the database of event namespace ns:
 * DD_OUTBOX_ID_LEN hex digits into out. */
void dd_outbox_event_id(const char *ns, const char *scope, const char *biz_key, unsigned n,
                        char out[DD_OUTBOX_ID_LEN + 1]);

/* 1 when topic is a Kafka topic name: 1 to 249 of [A-Za-z0-9._-], not
 * "." or "..". */
int dd_outbox_topic_valid(const char *topic);

/* The bytes the event costs within message.max.bytes: key, value, headers
 * (names, values) and DD_OUTBOX_RESERVE. */
size_t dd_outbox_event_size(const dd_outbox_event_t *ev);

/* The message.max.bytes of a producer built from conf's kafka.properties:
 * the largest event the relay can send. 0 or DD_ERR_FATAL (errstr). */
int dd_outbox_max_bytes(const dd_conf_t *conf, size_t *max, char *errstr, size_t errstr_size);

/* Appends ev as row number row (from 0: the first writes the INSERT's
 * head) of the multi-row INSERT stmt. 0, or -1 out of memory. */
int dd_outbox_append(dd_buf_t *stmt, size_t row, const dd_outbox_event_t *ev, char *errstr,
                     size_t errstr_size);
/* Runs the INSERT built by dd_outbox_append on db (the open transaction).
 * 0, or -1 with errstr, the server's error left on db when it has one. */
int dd_outbox_insert(MYSQL *db, const dd_buf_t *stmt, char *errstr, size_t errstr_size);

/* What one shard's outbox holds. */
typedef struct {
    int64_t pending; /* events waiting to be published */
    int64_t parked;  /* events refused for good */
    double oldest_s; /* how long the oldest pending event has waited; 0: none */
} dd_outbox_count_t;

/* Counts db's outbox (three index lookups). 0 or the class of the
 * database error (errstr). */
int dd_outbox_count(MYSQL *db, dd_outbox_count_t *out, char *errstr, size_t errstr_size);

/* The headers' encoding in the row: per header a 4-byte big-endian name
 * length, the name, a 4-byte value length (0xffffffff: a null value), the
 * value. */
void dd_outbox_headers_encode(dd_buf_t *b, const dedupd_header *h, size_t n);
/* Calls fn for every header of an encoded blob; -1 when it is malformed. */
int dd_outbox_headers_each(const void *blob, size_t len,
                           void (*fn)(void *arg, const char *name, size_t name_len,
                                      const void *value, size_t value_len),
                           void *arg);

#endif /* DD_OUTBOX_H */
