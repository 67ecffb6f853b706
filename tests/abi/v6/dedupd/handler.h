/*
 * dedupd handler ABI (its version: DEDUPD_HANDLER_ABI_VERSION, below).
 *
 * A handler is a shared object exporting one symbol, dedupd_handler_v1(),
 * which returns a static descriptor. dedupd calls handle() inside the open
 * claim transaction on `db`, so the business write commits or rolls back
 * together with the dedup record. This is the only public header of dedupd:
 * handlers built outside this repository compile against it alone
 * (`pkg-config --cflags dedupd`). docs/HANDLERS.md walks through writing,
 * building and testing one.
 *
 * The callbacks, in the order dedupd calls them:
 *
 *   init_host / init   once, at load, on the main thread; makes `state`
 *   migrate            `dedupd migrate` only, as the migration user
 *   conn_init          once per database connection dedupd opens for
 *                      handler work (each lane's, replay --apply's), and
 *                      again on the new connection after every reconnect
 *   handle(_conn), handle_batch(_conn)
 *                      per message / per batch, inside the transaction,
 *                      on that connection's lane thread
 *   conn_fini          before that connection is closed (reconnect or
 *                      shutdown)
 *   fini               once, after every connection is gone
 *
 * Return values:
 *  - init, init_host, migrate, conn_init: 0 on success; anything else is a
 *    failure, with the reason written to errstr (errstr_size bytes, NUL
 *    terminated). A failed init or migrate stops dedupd with that reason; a
 *    failed conn_init stops it at start, and after a reconnect is retried
 *    like a lost connection when the server's error on `db` says so
 *    (mysql_errno), else stops it;
 *  - handle, handle_conn: a dedupd_status. DEDUPD_OK: applied (res->response
 *    is kept); DEDUPD_RETRY: a transient problem, rolled back and tried
 *    again later with backoff (retry.*); DEDUPD_REJECT: this message can
 *    never be applied, rolled back, the key recorded as failed and the
 *    message dead-lettered with res->error as the reason;
 *  - handle_batch, handle_batch_conn: DEDUPD_OK (all applied) or anything
 *    else (declined: see below).
 *
 * Rules for handle() (and every variant):
 *  - never COMMIT, ROLLBACK, change autocommit or run a statement that
 *    commits implicitly (DDL) on `db`, not even followed by a new BEGIN;
 *    dedupd checks the server's in-transaction flag after each call, and
 *    before it commits that its own savepoint `dedupd_txn` (set when it
 *    opened the transaction; the name is reserved) still exists, which
 *    ending the transaction drops. Either is a handler bug: dedupd rolls
 *    the transaction back and stops, naming the handler;
 *  - write only through `db`: a write on another connection, or kept in
 *    memory, is not rolled back with the transaction and happens again
 *    when dedupd replays it (`dedupd handler-test` catches both);
 *  - it may be called from several threads at once, each with its own `db`
 *    (and conn_state); `state` is shared by all of them;
 *  - when a statement fails, return RETRY and leave the server's error on
 *    `db` (mysql_errno): send no other command first, and do not close a
 *    failed statement or free its result, since Connector/C then clears
 *    the connection's error. dedupd reads it after the call: a deadlock, a
 *    lock wait timeout or a lost connection rolls the whole batch back and
 *    replays it, like any database error, instead of counting as the
 *    handler's RETRY.
 *
 * handle_batch() (optional, since ABI version 2) is the same work for many
 * messages at once, so a handler can write them with a few multi-row
 * statements instead of a round trip per message:
 *  - msgs[0..n) are the messages this transaction owns (one per business
 *    key, in the order they were consumed); res[0..n) come zeroed;
 *  - DEDUPD_OK means every message was applied; res[i].response is message
 *    i's snapshot (malloc'd, or NULL);
 *  - any other status means "not as one batch": dedupd rolls the whole
 *    transaction back (claims included) and runs the same messages through
 *    handle(), one at a time, where each message gets its own RETRY or
 *    REJECT. So handle() defines the semantics and handle_batch() only has
 *    to be fast for the common case and give the same result on it; it may
 *    decline any batch it does not want to handle (bad payload, an unusual
 *    mix), with the reason in res[0].error for dedupd's debug log.
 *  The rules of handle() about the transaction apply.
 *
 * Since ABI version 3:
 *  - init_host(state, host, ...) replaces init(): when set, init is not
 *    called. `host` is dedupd's side of the ABI (logging through dedupd's
 *    logger, the handler's configuration, the instance's name), valid
 *    until fini returns;
 *  - conn_init/conn_fini give each connection its own state (prepared
 *    statements, caches), passed to handle_conn/handle_batch_conn. A
 *    handler that sets handle_conn is called through it instead of
 *    handle, and handle_batch_conn instead of handle_batch. conn_init runs
 *    outside any transaction (autocommit on, as dedupd left it) and must
 *    leave it so; conn_fini may find the connection already broken (it
 *    only has to free what conn_init made). Neither runs concurrently with
 *    another call on the same connection;
 *  - a message carries its Kafka headers (dedupd_msg.headers).
 *
 * External mode (since ABI version 4, mode = DEDUPD_MODE_EXTERNAL) is for
 * handlers whose effect lies outside the database (a payment provider, an
 * SMS gateway, another service), which no transaction can take in. dedupd
 * then runs, for each message, a protocol of three steps instead of
 * handle():
 *  - claim: the key's row is written as processing, in a short transaction
 *    of its own, with this worker as owner, a lease on the database's clock
 *    and a fencing token (msg->fence) larger than any earlier claim's;
 *  - act(): called outside any transaction and without a connection. It
 *    does the effect and must pass msg->biz_key and msg->fence downstream
 *    (the key as the idempotency key, the token so the downstream can
 *    refuse a call from an older claim that is still in flight: dedupd
 *    cannot interrupt a call once it is made). OK: done; RETRY: not done,
 *    try again later (same token); REJECT: not done and never will be;
 *  - finish: in one transaction, the optional finish() (local writes on
 *    `db`, the rules of handle() apply) and the row marked applied with
 *    the response, only if it still carries this claim's token. A claim
 *    that was taken over in between finishes nothing.
 * The lease is renewed while act() runs. A claim whose lease ran out may
 * be taken over by another consumer with a larger token; before it acts
 * again it asks reconcile() (optional) what the downstream knows of the
 * key: DONE (res->response: the snapshot to keep; the effect is not
 * repeated), NOT_DONE (act again) or UNKNOWN (ask again later). Without
 * reconcile() a takeover acts again: the effect is then at least once.
 * reconcile() is also what `dedupd reconcile` and the periodic scan ask
 * about rows whose message is gone; finish() then gets a message with
 * biz_key and fence only (payload and json NULL).
 *
 * Events out (since ABI version 6, host version 2): host->emit() writes an
 * event for a Kafka topic into the outbox table (dedupd_outbox) on the
 * handler's connection, inside dedupd's open transaction: it commits with
 * the business writes and the dedup record, or rolls back with them (a
 * replayed batch, a REJECT, a declined handle_batch), so an event exists
 * exactly when the write it tells of committed. dedupd's relay publishes
 * committed events to Kafka, each with the header dedupd.event_id; see
 * docs/HANDLERS.md, "Events out". Rules:
 *  - only from handle() and handle_batch() (every variant) of a handler in
 *    local mode, on the calling thread, with outbox.enabled on; elsewhere
 *    (init, conn_init, act, finish, reconcile, another thread) it fails;
 *  - msg is the message the event belongs to (in handle_batch one of
 *    msgs[]): the event's id is derived from its business key and the
 *    count of events emitted for it before in the same call, so the event
 *    of a replayed batch has the same id as in the attempt that rolled
 *    back, and host->event_id() tells it beforehand (to put it into the
 *    payload, for a consumer that cannot read headers);
 *  - the rows are written when the call returns OK, all of the call's
 *    events in one statement (a call that does not return OK writes none),
 *    so the handler does not find them in the table during the call;
 *  - it fails with errstr when the event is larger than the relay's
 *    producer can send (its message.max.bytes), the topic's name is not a
 *    Kafka topic name, or the call's events passed 1 MB and their insert
 *    failed (then the server's error is on db, as for a failed statement
 *    of the handler's own): return DEDUPD_RETRY (or REJECT for an event
 *    that can never fit). When the insert at the call's end fails, dedupd
 *    takes the call's OK for a RETRY (a handle_batch's as declined), the
 *    server's error on db: a deadlock there is replayed as any other.
 *
 * Compatibility: the symbol's name carries the layout's generation (v1);
 * within it, new fields are only ever appended to dedupd_handler,
 * dedupd_msg and dedupd_host, and DEDUPD_HANDLER_ABI_VERSION goes up with
 * each addition to the descriptor. dedupd loads descriptors from version 1
 * up to its own, and reads a field only when the descriptor's abi_version
 * says it has it (handle_batch: version >= 2; init_host, the connection
 * hooks and the _conn calls: >= 3; mode, act, finish and reconcile: >= 4;
 * version 6 adds no descriptor field, only the host's emit and event_id).
 * dedupd fills every dedupd_msg field for every handler (headers since 3,
 * fence since 4, shard since 5). A handler built for a newer version than dedupd's is
 * refused at load, as is one for an unknown generation. dedupd_result
 * never grows: handle_batch indexes an array of them.
 */
#ifndef DEDUPD_HANDLER_H
#define DEDUPD_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <libconfig.h>
#include <mysql.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUPD_HANDLER_ABI_VERSION 6
#define DEDUPD_HANDLER_ABI_MIN 1 /* oldest descriptor layout dedupd still loads */
#define DEDUPD_HOST_VERSION 2    /* fields of dedupd_host this header knows */

/* Size of dedupd_result.error, and of the errstr buffers dedupd passes. */
#define DEDUPD_ERROR_SIZE 256

/* Size of the text of an event's id (host->event_id), NUL included. */
#define DEDUPD_EVENT_ID_SIZE 40

#if defined(__GNUC__)
#define DEDUPD_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DEDUPD_PRINTF(fmt, args)
#endif

typedef enum { DEDUPD_OK = 0, DEDUPD_RETRY = 1, DEDUPD_REJECT = 2 } dedupd_status;

/* How dedupd applies a message (dedupd_handler.mode, ABI version >= 4). */
typedef enum {
    DEDUPD_MODE_LOCAL = 0,   /* handle() in the claim transaction (the default) */
    DEDUPD_MODE_EXTERNAL = 1 /* claim, act() outside any transaction, finish */
} dedupd_mode;

/* What reconcile() found out about a key (ABI version >= 4). */
typedef enum {
    DEDUPD_DONE = 0,     /* the effect happened: keep res->response, do not act again */
    DEDUPD_NOT_DONE = 1, /* it did not happen: act again */
    DEDUPD_UNKNOWN = 2   /* the downstream cannot tell now: ask again later */
} dedupd_outcome;

/* Levels of host->log, as in dedupd's log.level. */
typedef enum {
    DEDUPD_LOG_ERROR = 0,
    DEDUPD_LOG_WARN = 1,
    DEDUPD_LOG_INFO = 2,
    DEDUPD_LOG_DEBUG = 3
} dedupd_log_level;

/* One Kafka header of a message (since ABI 3). */
typedef struct dedupd_header {
    const char *name;  /* NUL-terminated */
    const void *value; /* value_len bytes, not NUL-terminated; NULL for a null value */
    size_t value_len;
} dedupd_header;

/* A message, read-only, valid during the call that receives it. */
typedef struct dedupd_msg {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms;
    const void *key; /* Kafka key, may be NULL */
    size_t key_len;
    const void *payload;
    size_t payload_len;
    /* parsed payload (cJSON: numbers are doubles, strings end at a NUL; the
     * payload text has the exact values), built only for strict JSON */
    const cJSON *json;
    /* derived business key: NUL-terminated, escaped, no control bytes
     * (docs/KEYS.md) */
    const char *biz_key;
    /* ---- since ABI 3 (dedupd fills them for every handler) ---- */
    const dedupd_header *headers; /* header_cnt Kafka headers, in order; NULL when none */
    size_t header_cnt;
    /* ---- since ABI 4 ---- */
    /* external mode: the fencing token of this message's claim, larger than
     * that of every earlier claim of the key; pass it downstream with
     * biz_key. 0 in local mode. */
    int64_t fence;
    /* ---- since ABI 5 ---- */
    /* the database shard of the message (mysql.shards: the index of the
     * element, from 0; 0 with one database): the shard the handler's
     * connection is to, where its rows and its dedup row live */
    int shard;
} dedupd_msg;

typedef struct dedupd_result {
    char *response;                /* malloc'd JSON text kept as the response snapshot, or NULL;
                                    * over handler.max_response_bytes: rejects (external: dropped) */
    char error[DEDUPD_ERROR_SIZE]; /* why, on RETRY/REJECT (or why a batch was declined) */
} dedupd_result;

/* dedupd's side of the ABI, handed to init_host (since ABI 3). Read a field
 * only when version says it exists: fields are appended, and a newer dedupd
 * may give a larger version than this header's DEDUPD_HOST_VERSION. */
typedef struct dedupd_host dedupd_host;
struct dedupd_host {
    int version; /* DEDUPD_HOST_VERSION of the dedupd running the handler */
    /* This dedupd process, "hostname:pid": the owner it writes in the dedup
     * table's rows. */
    const char *instance;
    /* handler.config of the configuration (libconfig group), or NULL. */
    const config_setting_t *config;
    /* A line in dedupd's log, in its format (log.format) and only when
     * log.level lets level through. During handle() the line carries the
     * message's topic, partition, offset and business key, as dedupd's own
     * lines about a message do. Any thread, any time until fini returns. */
    void (*log)(const dedupd_host *host, dedupd_log_level level, const char *fmt, ...)
        DEDUPD_PRINTF(3, 4);
    /* ---- version >= 2 (ABI 6) ---- */
    /* An event for topic (key may be NULL: no key; headers[0..header_cnt)
     * may be NULL when 0) into the outbox, in the open transaction on db:
     * see "Events out" above. Returns 0, or -1 with the reason in errstr. */
    int (*emit)(const dedupd_host *host, MYSQL *db, const dedupd_msg *msg, const char *topic,
                const void *key, size_t key_len, const void *value, size_t value_len,
                const dedupd_header *headers, size_t header_cnt, char *errstr, size_t errstr_size);
    /* The id the next emit for msg in this call will give its event (the
     * header dedupd.event_id), as text into out (DEDUPD_EVENT_ID_SIZE
     * bytes). Returns 0, or -1 when called where emit cannot be. */
    int (*event_id)(const dedupd_host *host, const dedupd_msg *msg, char *out, size_t out_size);
};

typedef struct dedupd_handler {
    int abi_version; /* DEDUPD_HANDLER_ABI_VERSION */
    const char *name;
    /* optional; makes *state (NULL if left alone). conf: handler.config */
    int (*init)(void **state, const config_setting_t *conf, char *errstr, size_t errstr_size);
    /* optional; creates or alters the handler's tables (dedupd migrate) */
    int (*migrate)(void *state, MYSQL *db, char *errstr, size_t errstr_size);
    /* required unless handle_conn is set */
    dedupd_status (*handle)(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res);
    void (*fini)(void *state); /* optional */
    /* ---- abi_version >= 2 ---- */
    dedupd_status (*handle_batch)(void *state, MYSQL *db, const dedupd_msg *const *msgs, size_t n,
                                  dedupd_result *res); /* optional */
    /* ---- abi_version >= 3 ---- */
    /* optional; called instead of init when set */
    int (*init_host)(void **state, const dedupd_host *host, char *errstr, size_t errstr_size);
    /* optional; makes *conn_state (NULL if left alone) for connection db */
    int (*conn_init)(void *state, MYSQL *db, void **conn_state, char *errstr, size_t errstr_size);
    /* optional; frees conn_state before db is closed */
    void (*conn_fini)(void *state, MYSQL *db, void *conn_state);
    /* optional; called instead of handle when set */
    dedupd_status (*handle_conn)(void *state, void *conn_state, MYSQL *db, const dedupd_msg *msg,
                                 dedupd_result *res);
    /* optional; called instead of handle_batch when set */
    dedupd_status (*handle_batch_conn)(void *state, void *conn_state, MYSQL *db,
                                       const dedupd_msg *const *msgs, size_t n, dedupd_result *res);
    /* ---- abi_version >= 4 ---- */
    int mode; /* dedupd_mode; DEDUPD_MODE_EXTERNAL needs act, handle is then unused */
    /* external mode: the effect, outside any transaction (required) */
    dedupd_status (*act)(void *state, const dedupd_msg *msg, dedupd_result *res);
    /* external mode: local writes on db inside the transaction that marks the
     * key applied; res holds act()'s result and may be changed (optional) */
    dedupd_status (*finish)(void *state, MYSQL *db, const dedupd_msg *msg, dedupd_result *res);
    /* external mode: what the downstream knows of biz_key, asked with the
     * token of the claim that took the key over (optional) */
    dedupd_outcome (*reconcile)(void *state, const char *biz_key, int64_t fence,
                                dedupd_result *res);
} dedupd_handler;

/* The one exported symbol. */
const dedupd_handler *dedupd_handler_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* DEDUPD_HANDLER_H */
