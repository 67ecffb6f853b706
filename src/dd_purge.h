/*
 * Retention of the dedup table: expired rows (expire_at in the past) are
 * deleted in small transactions with pauses, never rows in state 0
 * (processing). A background thread does it every purge.interval inside
 * `dedupd run`; `dedupd purge` runs one pass; `dedupd stats` shows the table
 * at a glance.
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

/* `dedupd purge -c FILE` and `dedupd stats -c FILE`; argv[0] is the
 * command name. Return the exit code. */
int dd_purge_main(int argc, char **argv);
int dd_stats_main(int argc, char **argv);

#endif /* DD_PURGE_H */
