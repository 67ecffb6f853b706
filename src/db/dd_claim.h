/*
 * The claim: one multi-row INSERT ... ON DUPLICATE KEY UPDATE per batch.
 *
 * New rows are tagged with the batch's claim token; rows that already exist
 * are left alone (a no-op update that still locks them), except failed rows
 * with the same request hash when retry_failed is on, and expired leases,
 * which take the token over. Reading back which keys carry the token tells
 * the batch what it owns: affected-row counts are per statement and cannot
 * say which rows were inserted. On MariaDB 10.5+ the claim's own RETURNING
 * clause gives those rows; elsewhere a SELECT by key reads them back.
 *
 * Deferred claims (DD_CLAIM_DEFER): a key the pre-check finds absent is not
 * inserted up front. The batch owns it at once, the handler runs, and the
 * finish inserts the key's finished row with a plain INSERT, still in the
 * same transaction: one row write instead of an insert and an update. The
 * unique key makes this exactly as safe as claiming first. A consumer that
 * inserts the key meanwhile holds its row lock until it commits; our insert
 * waits, then fails as a duplicate (DD_CLAIM_RACED). The caller rolls
 * everything back, business writes included, and replays the batch with
 * the locking claim, which then finds the other consumer's row.
 *
 * Claims must be passed sorted by key so every worker locks rows in the same
 * order (no deadlocks between workers over the same keys). A batch that
 * holds keys of several dedup tables (several routes) claims table by table,
 * in one order too: claims carry their table's group, and sort by group,
 * then key.
 */
#ifndef DD_CLAIM_H
#define DD_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"
#include "dd_db.h"
#include "dd_hash.h"

#define DD_CLAIM_TOKEN_LEN 16

/* What dd_claim_finish (and dd_external's claim, inside) meets besides 0
 * and a dd_err_t class: a deferred key was inserted by another transaction
 * meanwhile. The caller rolls back and replays with the locking claim. */
#define DD_CLAIM_RACED (-8)

enum { DD_ROW_PROCESSING = 0, DD_ROW_APPLIED = 1, DD_ROW_FAILED = 2 };

typedef struct dd_claim_s {
    /* in: the first copy of the key in the batch */
    int group; /* its table: claims of one group go to one dd_claim_acquire() */
    const char *key;
    size_t key_len;
    const unsigned char *hash; /* DD_HASH_LEN bytes */
    const char *topic;
    int32_t partition;
    int64_t offset;

    /* out of dd_claim_acquire */
    int mine;       /* this batch holds the key: run the handler */
    int deferred;   /* mine, and no row yet: the finish inserts it */
    int row_status; /* status of the row that was found, when not mine */
    unsigned char row_hash[DD_HASH_LEN];
    char row_error[256];

    /* in and out of dd_claim_row_times */
    int want_times;       /* in: read the row's times */
    char row_created[32]; /* out: created_at and updated_at, "" unknown */
    char row_updated[32];

    /* in for dd_claim_finish (mine only) */
    int result_status;    /* DD_ROW_APPLIED or DD_ROW_FAILED */
    const char *response; /* JSON text or NULL */
    const char *error;    /* or NULL */
} dd_claim_t;

typedef struct {
    const char *table; /* validated identifier */
    int64_t ttl_s;
    int retry_failed;
    const char *owner;   /* "host:pid", for the operator */
    int lease_s;         /* how long a processing row blocks others */
    int defer;           /* dedup.defer_claim: DD_CLAIM_DEFER unless replaying a race */
    size_t max_response; /* handler.max_response_bytes: no response is longer */
    int stmt_slot;       /* its prepared statements' slot on a connection: one per table */
} dd_claim_opts_t;

/* The options a route's settings give, for the instance named owner (kept
 * by the caller); slot: the route's, so each table has its own prepared
 * statement on a connection (below DD_CONF_ROUTE_MAX). */
void dd_claim_opts_init(dd_claim_opts_t *opts, const dd_conf_route_t *route, const char *owner,
                        int slot);

/* dd_claim_acquire flags */
#define DD_CLAIM_PRECHECK 1 /* read the keys first, settle the applied ones */
#define DD_CLAIM_DEFER 2    /* implies PRECHECK: absent keys are claimed by the finish */
#define DD_CLAIM_BLIND 4    /* test fault: the pre-check finds nothing (races every key) */

/* Makes sure the server takes the largest statement a claim may need:
 * one finished row with a response of opts->max_response bytes (checked
 * now and after every reconnect). Statements with many rows are split by
 * size to fit (dd_db_max_statement). Returns 0 or DD_ERR_FATAL with an
 * error naming handler.max_response_bytes and max_allowed_packet. */
int dd_claim_require(dd_db_t *db, const dd_claim_opts_t *opts, char *errstr, size_t errstr_size);

/* Sorts claims by group, then key (binary order, as the VARBINARY primary
 * key); claims of one group and key keep their array order. */
void dd_claim_sort(dd_claim_t **claims, size_t n);
int dd_claim_cmp(const dd_claim_t *a, const dd_claim_t *b);

/* Inserts or locks every key and fills the out fields. Must run inside an
 * open transaction. Returns 0 or the dd_err_t class of the database error.
 *
 * DD_CLAIM_PRECHECK: first read the keys without locking and settle the
 * ones already applied (a duplicate or a conflict either way), claiming
 * only the rest. That costs a statement and saves the claim's insert
 * attempt on every applied key. DD_CLAIM_DEFER: the keys the read did not
 * find are owned without a statement (deferred, see above). scratch: room
 * for n pointers, for either flag. */
int dd_claim_acquire(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                     const unsigned char token[DD_CLAIM_TOKEN_LEN], int flags, dd_claim_t **scratch,
                     dd_buf_t *sql, char *errstr, size_t errstr_size);

/* Reads created_at and updated_at of the rows of the claims with
 * want_times set (the rows a message conflicted with: a log line names
 * them), one statement for all, in the open transaction. Costs nothing
 * when none is wanted. Returns 0 or the dd_err_t class of the database
 * error. */
int dd_claim_row_times(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                       dd_buf_t *sql, char *errstr, size_t errstr_size);

/* Scratch for the finish's bulk insert, reused across batches. */
typedef struct dd_claim_rows_s dd_claim_rows_t;
dd_claim_rows_t *dd_claim_rows_new(void);
void dd_claim_rows_destroy(dd_claim_rows_t *rows);

/* Writes the outcome (status, response snapshot, error) of the keys this
 * batch owns: updates the claimed rows, inserts the deferred ones (as one
 * bulk execution where the server has it). Same transaction. Returns 0,
 * DD_CLAIM_RACED (a deferred key was inserted by another transaction since
 * the pre-check: roll back and replay without DD_CLAIM_DEFER) or the
 * dd_err_t class of the database error. */
int dd_claim_finish(dd_db_t *db, const dd_claim_opts_t *opts, dd_claim_t **claims, size_t n,
                    dd_buf_t *sql, dd_claim_rows_t *rows, char *errstr, size_t errstr_size);

#endif /* DD_CLAIM_H */
