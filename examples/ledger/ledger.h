/*
 * The ledger example's own header, shared by its three files:
 *   ledger.c       the business: payments, their rules, the tables, handle()
 *   ledger_bulk.c  handle_batch(): the same rows for a whole batch, fast
 *   ledger_sql.c   round trips, literals and results both paths share
 * Read ledger.c first: it is what the ledger does; the rest is how it does
 * it quickly.
 */
#ifndef LEDGER_H
#define LEDGER_H

#include <dedupd/handler.h>

#include <stdatomic.h>
#include <stddef.h>

#define LEDGER_PREFIX_MAX 32
#define LEDGER_ID_MAX 64       /* VARCHAR(64) columns, checked in bytes */
#define LEDGER_STATUS_MAX 16   /* VARCHAR(16) */
#define LEDGER_AMOUNT_MAX 1e12 /* above this, doubles stop telling cents apart */
#define LEDGER_SQL_MAX 2048

#define LEDGER_TOPIC_MAX 249

typedef struct ledger_state {
    char prefix[LEDGER_PREFIX_MAX + 1];
    const dedupd_host *host;               /* for host->emit */
    char emit_topic[LEDGER_TOPIC_MAX + 1]; /* "": no events */
    atomic_int autoinc_mode;               /* -1 until read (see ledger_bulk.c) */
} ledger_state;

/* A validated callback. Strings point into the cJSON payload. */
typedef struct ledger_payment {
    const char *merchant_id, *order_no, *txn_id, *currency, *status;
    long long amount_cents;
} ledger_payment;

/* The order upsert's and the balance's clauses, the same on both paths. A
 * new order row goes straight to the target state; an existing one moves
 * only from UNPAID ("create as UNPAID, then move out of UNPAID" in one
 * statement). ODKU assigns left to right, so status must be tested last. */
#define LEDGER_BALANCE_ODKU                                                                        \
    " ON DUPLICATE KEY UPDATE balance_cents = balance_cents + VALUES(balance_cents),"              \
    " entries = entries + VALUES(entries)"
#define LEDGER_ORDER_ODKU                                                                          \
    " ON DUPLICATE KEY UPDATE"                                                                     \
    " txn_id = IF(status = 'UNPAID', VALUES(txn_id), txn_id),"                                     \
    " amount_cents = IF(status = 'UNPAID', VALUES(amount_cents), amount_cents),"                   \
    " status = IF(status = 'UNPAID', VALUES(status), status)"

/* ---- ledger.c ---- */

/* Validates a callback's payload into p; -1 with the reason in err. */
int ledger_parse(const cJSON *json, ledger_payment *p, char *err, size_t errlen);
/* With handler.config.emit_topic, the event payment.booked of a booked
 * payment, emitted in the transaction (host->emit); DEDUPD_OK or what to
 * return, with res->error set. */
dedupd_status ledger_emit_booked(const ledger_state *st, MYSQL *db, const dedupd_msg *msg,
                                 const ledger_payment *p, unsigned long long ledger_id,
                                 dedupd_result *res);
/* The response snapshot: the same text on the single and the batch path. */
char *ledger_response(unsigned long long ledger_id, const char *order_status);

/* ---- ledger_sql.c ---- */

/* One statement of a round trip. text is NUL-terminated. */
typedef struct ledger_sql {
    const char *text;
    int want_rows;                          /* a SELECT: keep its result in rows */
    MYSQL_RES *rows;                        /* filled in by ledger_run */
    unsigned long long affected, insert_id; /* filled in by ledger_run */
    long long updated; /* "Duplicates:" of mysql_info(), or -1 when not given */
} ledger_sql;

/* Runs q[0..n) in order, in one round trip when the connection allows
 * multi-statements; 0, or -1 with the server's error on db (mysql_errno)
 * unless it is 0 (out of memory, or an unexpected result). */
int ledger_run(MYSQL *db, ledger_sql *q, int n);
void ledger_free_rows(ledger_sql *q, int n);
/* Single-quoted, escaped literal of s (at most LEDGER_ID_MAX bytes). */
void ledger_quote(MYSQL *db, const char *s, char out[2 * LEDGER_ID_MAX + 3]);
/* X'..' literal of a business key: its bytes, whatever the charset. */
void ledger_hex(const char *s, char *out);
/* 1 when the connection has the client capability flag. */
int ledger_conn_has(MYSQL *db, unsigned long flag);
/* "Duplicates: N" of a multi-row INSERT's info text, or -1. */
long long ledger_info_updated(const char *info);
/* RETRY with the server's error (or "out of memory") in res->error. */
dedupd_status ledger_db_fail(MYSQL *db, dedupd_result *res);

/* ---- ledger_bulk.c ---- */

/* The per-connection state: the statements the bulk path keeps prepared. */
typedef struct ledger_conn ledger_conn;
int ledger_conn_init(void *state, MYSQL *db, void **conn_state, char *errstr, size_t errstr_size);
void ledger_conn_fini(void *state, MYSQL *db, void *conn_state);
dedupd_status ledger_handle_batch(void *state, void *conn_state, MYSQL *db,
                                  const dedupd_msg *const *msgs, size_t n, dedupd_result *res);

#endif /* LEDGER_H */
