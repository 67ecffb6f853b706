/*
 * The consumer loop: poll -> parse/key -> lanes (claim + handler in one
 * transaction per batch) -> offsets, with dead letters for what cannot be
 * applied.
 *
 * Threads: the main thread polls Kafka, finds each message's route by its
 * topic (its key, hash, handler and dead-letter topic), parses it, sends it
 * by a hash of its lane key to one of `workers` lanes (so one key is always
 * on one lane), sends dead letters and stores offsets. Each lane owns one
 * database connection and runs batches. Finished messages come back to the
 * main thread, which advances each partition's contiguous watermark.
 */
#ifndef DD_PIPELINE_H
#define DD_PIPELINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"
#include "dd_handler.h"
#include "dd_stats.h"

typedef struct dd_pipeline_s dd_pipeline_t;

/* hs: the handler of each route of conf, in conf->routes' order
 * (dd_routes_load_handlers); they stay the caller's and must outlive the
 * pipeline. */
int dd_pipeline_new(dd_pipeline_t **plp, const dd_conf_t *conf, dd_handler_t *const *hs,
                    char *errstr, size_t errstr_size);

/* Runs until *stop is set (then shuts down cleanly within
 * shutdown_timeout) or, with exit_at_end, until every assigned partition is
 * applied and committed up to its end offset at start. Returns 0 or a
 * negative dd_err_t (fatal: exit non-zero; a topic assigned that matches
 * two routes is one). */
int dd_pipeline_run(dd_pipeline_t *pl, int exit_at_end, const atomic_int *stop, char *errstr,
                    size_t errstr_size);

/* A consistent copy of the counters and gauges (any thread). */
void dd_pipeline_stats(dd_pipeline_t *pl, dd_stats_t *out);

/* The database keeps the consumer's positions (table dedupd_position, in
 * every shard): partitions start from them, they are written as the
 * watermarks move, and Kafka's offsets never pass them. Before
 * dd_pipeline_run(). */
void dd_pipeline_keep_positions(dd_pipeline_t *pl, int keep);

/* mysql.shard_check = auto: the wrong-shard check runs until the
 * dd_now_us() until_us. Called before dd_pipeline_run. */
void dd_pipeline_set_shard_check_until(dd_pipeline_t *pl, int64_t until_us);

/* Sets the gauges of stuck processing rows of route's dedup table (an
 * index of conf->routes; external mode), which the compensation scan
 * counts (any thread). */
void dd_pipeline_set_processing(dd_pipeline_t *pl, int route, int64_t stuck, double oldest_s);
/* Sets the outbox relay's status (when the relay runs beside the
 * pipeline), for /metrics and /readyz. */
void dd_pipeline_set_outbox(dd_pipeline_t *pl, const dd_outbox_stats_t *st);

/* Copies the consumer lag of the assigned partitions (refreshed by the main
 * loop every few seconds) into out; returns how many there are, which may
 * exceed max (any thread). */
size_t dd_pipeline_lag(dd_pipeline_t *pl, dd_lag_t *out, size_t max);

void dd_pipeline_destroy(dd_pipeline_t *pl);

#endif /* DD_PIPELINE_H */
