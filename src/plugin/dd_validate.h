/*
 * The validation `dedupd run` does before it starts, shared with `dedupd
 * check`, so that check passes exactly the configurations run accepts and
 * prints the warnings run logs, in the same words. dd_conf_load() checks
 * each setting; this checks what needs the other modules: the key and hash
 * specifications compiled, the handler loaded and initialised, the ttl
 * against the redelivery window, and the warnings the load kept.
 */
#ifndef DD_VALIDATE_H
#define DD_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "dd_conf.h"
#include "dd_handler.h"

typedef enum { DD_VALIDATE_OK = 0, DD_VALIDATE_WARN, DD_VALIDATE_FAIL } dd_validate_level_t;

/* One finding: what was checked ("key template", "ttl", ...) and what was
 * found (for FAIL, the error run stops with). */
typedef void(dd_validate_report_fn)(void *opaque, dd_validate_level_t level, const char *what,
                                    const char *text);

/* Runs every check, for every route, reporting each finding, and goes on
 * after a failure so that check can show them all. With routes, what a
 * finding is about starts with "route NAME: ". On success hs[0..route_cnt)
 * are the routes' handlers, each its own instance, loaded in the routes'
 * order (init called; the caller destroys them, dd_routes_destroy_handlers)
 * and the result is 0. Otherwise every hs[i] is NULL, the result is the
 * class of the first failure and errstr holds its text. */
int dd_validate_conf(const dd_conf_t *conf, dd_handler_t **hs, dd_validate_report_fn *report,
                     void *opaque, char *errstr, size_t errstr_size);

/* The idempotency window in seconds implied by the configuration: how long
 * a message may be redelivered after it was first seen. dedup.ttl should
 * be at least twice this (run and check warn otherwise). */
int64_t dd_validate_window_s(const dd_conf_t *conf);

#endif /* DD_VALIDATE_H */
