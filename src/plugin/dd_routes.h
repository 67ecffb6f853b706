/*
 * The routes at run time: for each route of the configuration (dd_conf.h),
 * what applying its messages needs: the business key template, the lane
 * key template, the request hash specification and the handler instance.
 * `dedupd run`, `replay` and `handler-test` build one set and share it
 * between the consumer's thread, which parses, keys, hashes and routes a
 * message by its route's, and the lanes, which run each message through
 * its route's handler and claim it in its route's dedup table.
 *
 * A message's route is found by its topic (dd_conf_route_find); an item
 * carries it as an index into the set, the configuration's order.
 *
 * After dd_routes_new() the set is read-only: any thread may read it.
 */
#ifndef DD_ROUTES_H
#define DD_ROUTES_H

#include <stddef.h>

#include "dd_conf.h"
#include "dd_handler.h"
#include "dd_hash.h"
#include "dd_key.h"
#include "dd_shard.h"

typedef struct dd_route_s {
    int idx;                     /* in conf->routes, and in the set */
    const dd_conf_route_t *conf; /* its settings */
    dd_key_tmpl_t *tmpl;         /* the business key */
    dd_key_tmpl_t *lane_tmpl;    /* the lane key, or NULL: the business key */
    dd_key_tmpl_t *shard_tmpl;   /* the shard key, or NULL: the business key */
    dd_shard_map_t *shard_map;   /* shard_by map's ranges, else NULL */
    int shard_cnt;               /* conf->shard_cnt */
    dd_hash_spec_t *hspec;       /* the request hash */
    dd_handler_t *h;             /* borrowed; NULL when none was given (report-only replay) */
} dd_route_t;

typedef struct dd_routes_s {
    dd_route_t route[DD_CONF_ROUTE_MAX];
    int cnt;
} dd_routes_t;

/* Compiles every route of conf (which must outlive the set). handlers:
 * one per route, in conf->routes' order, borrowed (they must outlive the
 * set), or NULL for none. Returns 0 or a dd_err_t with errstr naming the
 * route. */
int dd_routes_new(dd_routes_t **routesp, const dd_conf_t *conf, dd_handler_t *const *handlers,
                  char *errstr, size_t errstr_size);
/* The database shard (an index of conf->shards) of a message of route rt
 * whose payload is doc and business key key[0..key_len): its shard key
 * (dedup.shard_key rendered from doc, or the business key) picked by
 * dedup.shard_by (dd_shard.h). With one shard, 0. -1 when the message has
 * no shard: *reason is then DD_REASON_SHARD_KEY_INVALID or
 * DD_REASON_SHARD_UNMAPPED, and why[] says it for the dead letter. */
int dd_routes_shard(const dd_route_t *rt, const dd_json_doc_t *doc, const char *key, size_t key_len,
                    int *reason, char *why, size_t why_size);
/* Frees the set (not the handlers). NULL is fine. */
void dd_routes_destroy(dd_routes_t *routes);

/* Loads, checks and initialises the handler of every route of conf into
 * hs[0..conf->route_cnt), in order: each route gets its own instance (its
 * own init, state and fini), also when two routes name the same file.
 * On failure the ones loaded are destroyed, hs is all NULL and errstr
 * names the route when the configuration has several. */
int dd_routes_load_handlers(const dd_conf_t *conf, dd_handler_t **hs, char *errstr,
                            size_t errstr_size);
/* Destroys hs[0..n) (fini, dlclose) and sets them NULL. */
void dd_routes_destroy_handlers(dd_handler_t **hs, int n);

#endif /* DD_ROUTES_H */
