/*
 * The outbox relay: publishes the events handlers emitted (dd_outbox) to
 * Kafka and deletes each once the broker acknowledged it. A thread per
 * database shard, each with its own connection and its own idempotent
 * producer (enable.idempotence, acks=all), so a shard that is down holds
 * back only its own events. It runs inside `dedupd run` (outbox.relay) or
 * apart, as `dedupd relay` (dd_cmd_relay).
 *
 * Order: a shard's events are read in id order, one batch in flight at a
 * time, each partitioned by its key; the idempotent producer keeps a
 * partition's records in the order they were produced through its
 * retries, and no send ever times out (message.timeout.ms = 0), so a
 * later event of a key never lands before an earlier one that is still
 * being tried. Several relays at once: per shard the one holding the
 * server's named lock (GET_LOCK, named by a digest of the database's name)
 * publishes, the others wait for it; a relay that loses its connection
 * loses the lock with it.
 *
 * Failures: a topic whose events fail for a reason that may pass (it does
 * not exist yet, the broker refused it for now) is paused, its events
 * left in the table, and tried again after a pause that doubles up to
 * outbox.retry_max, while the other topics' events go on; the cluster's
 * metadata says why (the topic does not exist, no broker answers). An event Kafka
 * refuses for good (too large, not authorized, an invalid record) is
 * parked: state 1 with the error, counted, never sent again by itself.
 */
#ifndef DD_RELAY_H
#define DD_RELAY_H

#include <stddef.h>

#include "dd_conf.h"
#include "dd_stats.h"

typedef struct dd_relay_s dd_relay_t;

/* Called by the relay's threads with the status of all shards, about once
 * a second (a copy; may be called from any of them). */
typedef void dd_relay_status_fn(void *opaque, const dd_outbox_stats_t *st);

/* A relay of every shard of conf (which must outlive it); status may be
 * NULL. */
int dd_relay_new(dd_relay_t **relayp, const dd_conf_t *conf, dd_relay_status_fn *status,
                 void *opaque, char *errstr, size_t errstr_size);
/* Starts the threads (each connects, and retries connecting, itself). */
int dd_relay_start(dd_relay_t *relay, char *errstr, size_t errstr_size);
/* The status of all shards now. */
void dd_relay_stats(dd_relay_t *relay, dd_outbox_stats_t *out);
/* Ends the threads after their current round: events in flight whose
 * acknowledgement has not come stay in the table, to be sent again. */
void dd_relay_stop(dd_relay_t *relay);
/* Stops it if needed and frees it; NULL is fine. */
void dd_relay_destroy(dd_relay_t *relay);

#endif /* DD_RELAY_H */
