/*
 * MariaDB/MySQL connections for dedupd.
 *
 * Auto-reconnect stays off: a silent reconnect would continue outside the
 * open transaction. On a lost connection the caller rolls back its batch,
 * calls dd_db_reconnect() and replays the whole batch. CLIENT_FOUND_ROWS is
 * never set, so affected-row counts keep their documented meaning.
 * CLIENT_MULTI_STATEMENTS is on so a handler can send its statements in one
 * round trip; every value dedupd puts in a statement is escaped or hex.
 */
#ifndef DD_DB_H
#define DD_DB_H

#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "dd_buf.h"
#include "dd_conf.h"

typedef struct dd_db_s dd_db_t;

/* Connects (READ COMMITTED, utf8mb4, autocommit on; transactions are
 * explicit). Returns 0 or a negative dd_err_t (RETRIABLE when the server
 * cannot be reached, FATAL for access denied / unknown database). */
int dd_db_new(dd_db_t **dbp, const dd_conf_t *conf, char *errstr, size_t errstr_size);
/* The same for shard `shard` of conf->shards (dd_db_new is shard 0). With
 * several shards, connection errors start "shard N (HOST:PORT): ". */
int dd_db_new_shard(dd_db_t **dbp, const dd_conf_t *conf, int shard, char *errstr,
                    size_t errstr_size);
/* dd_db_new_shard with another read timeout than mysql.read_timeout, kept
 * across reconnects: read_timeout_s seconds (the readiness prober's pings),
 * or DD_DB_NO_READ_TIMEOUT (dedupd migrate, whose ALTER TABLE may take
 * long; its lock waits are the server's too). */
#define DD_DB_NO_READ_TIMEOUT (-1)
int dd_db_new_shard_timeout(dd_db_t **dbp, const dd_conf_t *conf, int shard, int read_timeout_s,
                            char *errstr, size_t errstr_size);
/* The shard the connection is to, and its settings. */
int dd_db_shard(const dd_db_t *db);
const dd_conf_mysql_t *dd_db_settings(const dd_db_t *db);
/* 1 when the server is a Galera node that aborted a local transaction for
 * a conflicting replicated write (wsrep_local_bf_aborts grew) since the
 * last call on this connection (or its connect). 0 on other servers. */
int dd_db_cluster_aborted(dd_db_t *db);
/* Drops the connection and opens a new one with the same settings. */
int dd_db_reconnect(dd_db_t *db, char *errstr, size_t errstr_size);
void dd_db_destroy(dd_db_t *db);
/* From another thread: cuts the connection (what its thread waits for
 * fails at once, as a lost connection) and refuses new ones; for a stop
 * that must not wait for a server that does not answer. A connect in
 * progress still ends by its own timeouts. */
void dd_db_abort(dd_db_t *db);

MYSQL *dd_db_mysql(dd_db_t *db);
/* 1 when the connected server has INSERT ... RETURNING (MariaDB >= 10.5). */
int dd_db_has_returning(const dd_db_t *db);

/* 1 when the server executes a prepared statement for an array of
 * parameter rows in one go (MariaDB >= 10.2, STMT_ATTR_ARRAY_SIZE). */
int dd_db_has_bulk(const dd_db_t *db);

/* The longest statement (text, or one bulk execution) the server takes:
 * its max_allowed_packet, read at every (re)connect, less a margin for the
 * protocol. Statements whose size depends on the messages are split to
 * stay within it. */
size_t dd_db_max_statement(const dd_db_t *db);

/* Requires room for a statement of `bytes` now and after every reconnect;
 * `what` names the setting that needs it ("handler.max_response_bytes
 * (65536)"). Returns 0, or DD_ERR_FATAL with an error naming both values:
 * the server's max_allowed_packet is too small for this configuration. */
int dd_db_require_statement(dd_db_t *db, size_t bytes, const char *what, char *errstr,
                            size_t errstr_size);

/* Statements prepared once per connection. */
typedef enum {
    DD_STMT_CLAIM_NEW, /* dd_claim: the deferred claims' rows, one slot per table from here */
    DD_STMT_SLOTS = DD_STMT_CLAIM_NEW + DD_CONF_ROUTE_MAX
} dd_stmt_slot_t;

/* The slot's statement on this connection, or NULL until dd_db_prepare()
 * (a reconnect drops them all). */
MYSQL_STMT *dd_db_stmt(dd_db_t *db, dd_stmt_slot_t slot);

/* Prepares sql into the slot. Returns 0 or the dd_err_t class of the error
 * (written to errstr). */
int dd_db_prepare(dd_db_t *db, dd_stmt_slot_t slot, const char *sql, size_t len, MYSQL_STMT **stmtp,
                  char *errstr, size_t errstr_size);

/* Maps a MySQL/MariaDB error number to a dd_err_t class. */
int dd_db_classify(unsigned int err);

/* Runs one statement and discards any result. On error returns the class
 * of the error and writes "errno: message" to errstr. */
int dd_db_exec(dd_db_t *db, const char *sql, size_t len, char *errstr, size_t errstr_size);
/* Same for a NUL-terminated statement on a raw connection. */
int dd_db_exec_raw(MYSQL *mysql, const char *sql, char *errstr, size_t errstr_size);

/* Runs a query of one row whose first column is a count (SELECT COUNT(*)
 * ...) into *n (0 without a row). Returns 0, or the class of the error
 * with "errno: message" in errstr. */
int dd_db_count(MYSQL *mysql, const char *sql, uint64_t *n, char *errstr, size_t errstr_size);

/* Appends X'hex' (a binary-safe literal; '' for no bytes). */
void dd_db_hex(dd_buf_t *b, const void *data, size_t n);
/* Appends 'escaped text' using the connection's character set. */
void dd_db_quote(dd_buf_t *b, MYSQL *mysql, const char *s, size_t n);

#endif /* DD_DB_H */
