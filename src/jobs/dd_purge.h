/*
 * Retention of the dedup tables: expired rows (expire_at in the past) are
 * deleted in small transactions with pauses, never rows in state 0
 * (processing), from every route's table in every shard. A background
 * thread does it every purge.interval inside `dedupd run`; `dedupd purge`
 * runs one pass (dd_cmd_purge), over every route's table or one route's.
 */
#ifndef DD_PURGE_H
#define DD_PURGE_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"

typedef struct dd_purge_s dd_purge_t;

/* The background purge of `dedupd run` (conf must outlive it). Its thread
 * opens its own database connection when it first runs. */
int dd_purge_new(dd_purge_t **purgep, const dd_conf_t *conf, char *errstr, size_t errstr_size);
/* Starts the thread; with purge.interval 0 it logs that the purge is off
 * and starts nothing. */
int dd_purge_start(dd_purge_t *purge, char *errstr, size_t errstr_size);
/* Ends a pass under way after its current statement and joins the thread. */
void dd_purge_stop(dd_purge_t *purge);
/* Stops it if needed and frees it; NULL is fine. */
void dd_purge_destroy(dd_purge_t *purge);

#endif /* DD_PURGE_H */
