/*
 * External mode's statements on the dedup table (include/dedupd/handler.h,
 * "External mode"; docs/GUARANTEES.md, "External effects").
 *
 * A handler in external mode does its effect outside the database, where
 * no transaction reaches. So the key is claimed first, in a short
 * transaction of its own, as a processing row with an owner, a lease and a
 * fencing token; the effect happens with no transaction open; and the row
 * is finished (applied or failed) only while it still carries that token.
 * A claim whose lease ran out may be taken over, with the token raised by
 * one, and the worker that lost it then finishes nothing. Every time comes
 * from the database's clock (NOW(6)): a lease is set, renewed and judged
 * expired by the server, never by a worker's clock, which may be skewed.
 *
 * These are the statements only; the lanes run the protocol per message
 * (dd_lane_ext.c), dd_lease renews the leases, dd_reconcile scans for
 * rows whose message is gone.
 */
#ifndef DD_EXTERNAL_H
#define DD_EXTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dd_buf.h"
#include "dd_conf.h"
#include "dd_db.h"
#include "dd_handler.h"

typedef struct {
    const char *table; /* validated identifier */
    const char *owner; /* "host:pid [role]", for the operator */
    int64_t lease_ms;  /* external.lease */
    int64_t ttl_s;     /* dedup.ttl: expire_at of a claimed row */
    int retry_failed;  /* dedup.retry_failed: a failed row may be claimed again */
} dd_external_opts_t;

/* The options of route's dedup table (its settings) with conf's
 * external.lease, for the instance named owner (kept by the caller). */
void dd_external_opts_init(dd_external_opts_t *opts, const dd_conf_t *conf,
                           const dd_conf_route_t *route, const char *owner);

typedef enum {
    DD_EXTERNAL_OWNED,    /* this claim holds the key (fence); taken_over: the row existed */
    DD_EXTERNAL_APPLIED,  /* applied already with the same request hash: a duplicate */
    DD_EXTERNAL_CONFLICT, /* recorded with another request hash */
    DD_EXTERNAL_FAILED,   /* failed, and dedup.retry_failed is off (row_error says why) */
    DD_EXTERNAL_BUSY,     /* processing under a claim whose lease has not run out */
} dd_external_result_t;

/* One claim: in, the message; out, what the row said. */
typedef struct {
    const char *key;
    size_t key_len;
    const unsigned char *hash; /* DD_HASH_LEN bytes */
    const char *topic;
    int32_t partition;
    int64_t offset;

    dd_external_result_t result;
    int64_t fence;       /* OWNED: this claim's token */
    int64_t prev_fence;  /* the row's token before (0: no row) */
    int prev_status;     /* the row's status before, when it existed */
    int taken_over;      /* OWNED, and the row existed (past its lease, or failed) */
    double lease_left_s; /* BUSY: how long its lease still runs, on the database's clock */
    char prev_owner[129];
    char row_error[256];
} dd_external_claim_t;

/* Claims c->key in a transaction of its own: inserts a processing row
 * (token 1), or takes over one whose lease ran out, or a failed one when
 * retry_failed is on and the request hash is the same (token + 1), with a
 * lease of opts->lease_ms from the database's NOW(6). Anything else is
 * reported, not changed. Returns 0 or the dd_err_t class of the database
 * error (rolled back). */
int dd_external_claim(dd_db_t *db, const dd_external_opts_t *opts, dd_external_claim_t *c,
                      dd_buf_t *sql, char *errstr, size_t errstr_size);

/* Locks the key's row (SELECT ... FOR UPDATE) in the transaction the caller
 * opened: *held = 1 when it is processing under fence, so nobody can take it
 * over before this transaction ends; 0 when it is not (taken over, or
 * finished). Returns 0 or the class of the database error. */
int dd_external_lock(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                     int64_t fence, int *held, dd_buf_t *sql, char *errstr, size_t errstr_size);

/* Writes the outcome of fence's claim: status (DD_ROW_APPLIED or
 * DD_ROW_FAILED), response and error (either may be NULL), only WHERE
 * biz_key = key AND fence = fence AND status = processing. *held = 0 when
 * no row matched: the claim was taken over, the newer owner's row stays as
 * it is. In the caller's transaction, or on its own. Returns 0 or the class
 * of the database error. */
int dd_external_finish(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                       int64_t fence, int status, const char *response, const char *error,
                       int *held, dd_buf_t *sql, char *errstr, size_t errstr_size);

/* The finish of an applied key with the handler's finish(): in one
 * transaction on db, the row is locked first (only while it carries
 * msg->fence, so nobody takes it over before COMMIT), finish() runs with
 * res (act()'s result, which it may change), and the row is marked applied
 * with res->response. *held = 0: the claim was lost, nothing was called or
 * written. *st: finish()'s answer; anything but OK rolled everything back
 * (why in res->error). Returns 0 or a dd_err_t class: DD_ERR_FATAL when the
 * handler ended the transaction (a handler bug, errstr names it). */
int dd_external_finish_txn(dd_db_t *db, const dd_external_opts_t *opts, dd_handler_t *h,
                           const dedupd_msg *msg, dedupd_result *res, int *held, dedupd_status *st,
                           dd_buf_t *sql, char *errstr, size_t errstr_size);

/* Renews fence's lease to opts->lease_ms from the database's NOW(6);
 * *held as for dd_external_finish(). */
int dd_external_renew(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                      int64_t fence, int *held, dd_buf_t *sql, char *errstr, size_t errstr_size);

/* Ends fence's lease now (lease_until = NOW(6)), the row left processing,
 * so the next claim or scan takes it over without waiting; *held as for
 * dd_external_finish(). */
int dd_external_expire(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                       int64_t fence, int *held, dd_buf_t *sql, char *errstr, size_t errstr_size);

/* What the key's row holds now (for the log of a lost claim): its token,
 * status and owner; *fence = -1 when there is no row. */
int dd_external_peek(dd_db_t *db, const dd_external_opts_t *opts, const char *key, size_t key_len,
                     int64_t *fence, int *status, char *owner, size_t owner_size, dd_buf_t *sql,
                     char *errstr, size_t errstr_size);

/* A processing row whose lease ran out (the compensation scan). */
typedef struct {
    char key[256]; /* NUL-terminated: keys hold no NUL (docs/KEYS.md) */
    size_t key_len;
    int64_t fence;
    double past_s; /* how long ago its lease ran out, on the database's clock */
    char owner[129];
    char topic[250];
    int32_t partition;
    int64_t offset;
} dd_external_row_t;

/* How many processing rows are past their lease, and how long ago the
 * oldest lease ran out (0 when none). */
int dd_external_stuck_count(dd_db_t *db, const dd_external_opts_t *opts, int64_t *count,
                            double *oldest_s, char *errstr, size_t errstr_size);

/* Up to max processing rows whose lease ran out at least after_ms ago,
 * oldest first, into rows[0..*n). */
int dd_external_stuck(dd_db_t *db, const dd_external_opts_t *opts, int64_t after_ms,
                      dd_external_row_t *rows, size_t max, size_t *n, dd_buf_t *sql, char *errstr,
                      size_t errstr_size);

/* Takes a stuck row over for the scan: token + 1, this owner, a new lease,
 * only if it still carries fence and its lease ran out at least after_ms
 * ago. *taken = 1 with the new token in *new_fence, else 0 (someone else
 * took it meanwhile). */
int dd_external_takeover(dd_db_t *db, const dd_external_opts_t *opts, const char *key,
                         size_t key_len, int64_t fence, int64_t after_ms, int *taken,
                         int64_t *new_fence, dd_buf_t *sql, char *errstr, size_t errstr_size);

#endif /* DD_EXTERNAL_H */
