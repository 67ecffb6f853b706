/*
 * Lease renewal for external mode (see dd_external.h).
 *
 * While a handler's act() runs, its claim must stay alive, or another
 * consumer takes the key over and acts again. The lane cannot renew: it is
 * inside the handler's call. So the renewer, a thread per database shard
 * with its own connection to it, renews every registered claim of that
 * shard every third of external.lease, on the database's clock (UPDATE ...
 * SET lease_until = NOW(6) + lease WHERE biz_key = ? AND fence = ?), in
 * the claim's own dedup table: one renewer serves every route in external
 * mode. A claim is held while renewals keep finding it: one that finds
 * another token was taken over; one not renewed for a whole lease
 * (the database unreachable) may have been taken over. Either way the lane
 * must stop calling the handler for that key and must not finish it.
 *
 * "For a whole lease" is measured on this host's monotonic clock from the
 * moment the last successful renewal was *sent*: the server set the lease
 * after that moment, so it cannot have run out earlier. The wall clock
 * plays no part, so a skewed one changes nothing.
 *
 * Threads: the lanes register, query and release holds; the renewer's
 * threads renew them. Everything shared is under the renewer's mutex.
 */
#ifndef DD_LEASE_H
#define DD_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"
#include "dd_external.h"

typedef struct dd_lease_s dd_lease_t;
typedef struct dd_lease_hold_s dd_lease_hold_t;

/* The renewer of claims whose lease is conf's external.lease (conf must
 * outlive it). No connection, no thread yet. */
int dd_lease_new(dd_lease_t **leasep, const dd_conf_t *conf, char *errstr, size_t errstr_size);
/* Starts the threads (one per shard); each connects when it first has
 * something to renew. */
int dd_lease_start(dd_lease_t *lease, char *errstr, size_t errstr_size);
/* Joins the threads; holds stay registered (and are no longer renewed). */
void dd_lease_stop(dd_lease_t *lease);
/* Stops it if needed and frees it with every hold; NULL is fine. */
void dd_lease_destroy(dd_lease_t *lease);

/* Registers fence's claim on key[0..key_len) in opts's dedup table (opts
 * is borrowed and must outlive the hold; its lease_ms is the renewer's) in
 * database shard `shard` (an index of conf->shards), sent at t0_ms
 * (dd_now_ms() taken before the claim's statement). Returns the hold, or
 * NULL when out of memory. */
dd_lease_hold_t *dd_lease_hold(dd_lease_t *lease, const dd_external_opts_t *opts, int shard,
                               const char *key, size_t key_len, int64_t fence, int64_t t0_ms);
/* 1 while the claim is held (see above); a NULL hold is not. */
int dd_lease_held(dd_lease_t *lease, const dd_lease_hold_t *hold);
/* Why a hold is not held, for the log. */
const char *dd_lease_why(dd_lease_t *lease, const dd_lease_hold_t *hold);
/* Stops renewing it and frees it; NULL is fine. */
void dd_lease_release(dd_lease_t *lease, dd_lease_hold_t *hold);

#endif /* DD_LEASE_H */
