/*
 * The compensation scan of external mode (docs/GUARANTEES.md, "External
 * effects").
 *
 * A processing row whose claimer died is taken over when its message comes
 * again. When it never comes (the topic's retention dropped it, the group
 * was reset past it), the row stays processing for good, and the effect may
 * or may not have happened. The scan finds such rows (processing, lease
 * over for at least external.scan_after), takes each over with a new
 * token, asks the handler's reconcile() what the downstream knows, and
 * settles the row: DONE -> applied (finish() runs, with a message that has
 * no payload); NOT_DONE -> failed, "not done, message gone: needs manual
 * action" (there is no payload to act with); UNKNOWN -> left processing,
 * its lease ended, for the next scan. It also counts the rows past their
 * lease for the gauges dedupd_processing_stuck and
 * dedupd_processing_oldest_seconds.
 *
 * Each route whose handler is in external mode has its own dedup table:
 * the scan covers each of them with that route's handler's reconcile(),
 * and counts the gauges per route.
 *
 * `dedupd reconcile` runs one scan and prints it (dd_cmd_reconcile;
 * without --apply it only asks and writes nothing; --route NAME scans one
 * route); `dedupd run` runs it every external.scan_interval on a thread
 * with its own connection.
 */
#ifndef DD_RECONCILE_H
#define DD_RECONCILE_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"
#include "dd_db.h"
#include "dd_handler.h"

typedef struct dd_reconcile_s dd_reconcile_t;

/* Receives the gauges of route (an index of conf->routes) after every
 * scan of its table (on the scan's thread). */
typedef void dd_reconcile_publish_fn(void *opaque, int route, int64_t stuck, double oldest_s);

/* 1 when some route's handler of hs (one per route of conf, in order) is
 * in external mode: there is something to scan. */
int dd_reconcile_needed(const dd_conf_t *conf, dd_handler_t *const *hs);

/* The periodic scan of `dedupd run` over every route of conf whose handler
 * of hs (one per route, in order; the array is copied, the handlers are
 * borrowed) is in external mode; conf and the handlers must outlive it.
 * publish may be NULL. */
int dd_reconcile_new(dd_reconcile_t **scanp, const dd_conf_t *conf, dd_handler_t *const *hs,
                     dd_reconcile_publish_fn *publish, void *opaque, char *errstr,
                     size_t errstr_size);
/* Starts the thread; with external.scan_interval 0 it logs that the scan
 * is off and starts nothing. */
int dd_reconcile_start(dd_reconcile_t *scan, char *errstr, size_t errstr_size);
/* Ends a scan under way after its current row and joins the thread. */
void dd_reconcile_stop(dd_reconcile_t *scan);
/* Stops it if needed and frees it; NULL is fine. */
void dd_reconcile_destroy(dd_reconcile_t *scan);

/* What `dedupd run` checks at start for a handler in external mode: the
 * route's dedup table has the fence column (schema version 2; DD_ERR_CONFIG saying
 * to run `dedupd migrate` when not), and *index whether it has the index
 * of processing rows the scan reads. */
int dd_reconcile_check_table(dd_db_t *db, const dd_conf_route_t *route, int *index, char *errstr,
                             size_t errstr_size);

#endif /* DD_RECONCILE_H */
