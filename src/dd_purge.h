/*
 * Retention of the dedup table: expired rows (expire_at in the past) are
 * deleted in small transactions with pauses, never rows in state 0
 * (processing). A background thread does it every purge.interval inside
 * `dedupd run`; `dedupd purge` runs one pass (dd_cmd_purge).
 */
#ifndef DD_PURGE_H
#define DD_PURGE_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"

typedef struct dd_purge_s dd_purge_t;

/* Background purge for `dedupd run`; does nothing when purge.interval is 0.
 * Opens its own database connection. */
int dd_purge_start(dd_purge_t **purgep, const dd_conf_t *conf, char *errstr, size_t errstr_size);
void dd_purge_stop(dd_purge_t *purge); /* safe with NULL */

#endif /* DD_PURGE_H */
