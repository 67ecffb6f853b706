/*
 * The routes at run time (see dd_routes.h): each route's templates, hash
 * specification and handler, built once from the configuration.
 */
#include "dd_routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_stats.h"

_Static_assert(DD_CONF_ROUTE_MAX <= DD_STATS_ROUTE_MAX, "every route needs its counters");
_Static_assert(DD_CONF_SHARD_MAX <= DD_STATS_SHARD_MAX, "every shard needs its counters");

/* "route NAME: " before a message, when the configuration has routes (a
 * configuration without them says what it always said). */
static void dd_routes_prefix(const dd_conf_t *conf, int r, const char *msg, char *errstr,
                             size_t errstr_size)
{
    if (conf->has_routes)
        dd_errstr_set(errstr, errstr_size, "route %s: %s", conf->routes[r].name, msg);
    else
        dd_errstr_set(errstr, errstr_size, "%s", msg);
}

static int dd_routes_compile(dd_route_t *rt, char *errstr, size_t errstr_size)
{
    const dd_conf_dedup_t *d = &rt->conf->dedup;
    int rc = dd_key_tmpl_new(&rt->tmpl, d->key, errstr, errstr_size);

    if (!rc && d->lane_key) rc = dd_key_tmpl_new(&rt->lane_tmpl, d->lane_key, errstr, errstr_size);
    if (!rc) rc = dd_hash_spec_new(&rt->hspec, d->hash, d->hash_cnt, errstr, errstr_size);
    if (!rc && rt->shard_cnt > 1 && d->shard_key)
        rc = dd_key_tmpl_new(&rt->shard_tmpl, d->shard_key, errstr, errstr_size);
    if (!rc && rt->shard_cnt > 1 && d->shard_by == DD_SHARD_MAP)
        rc = dd_shard_map_load(&rt->shard_map, d->shard_map, rt->shard_cnt, errstr, errstr_size);
    /* The recorded layout was compared with the map the configuration read. */
    if (!rc && rt->shard_map && strcmp(rt->shard_map->digest, d->shard_map_digest) != 0) {
        dd_errstr_set(errstr, errstr_size,
                      "%s changed after the configuration was loaded: load it again", d->shard_map);
        rc = DD_ERR_CONFIG;
    }
    return rc;
}

int dd_routes_new(dd_routes_t **routesp, const dd_conf_t *conf, dd_handler_t *const *handlers,
                  char *errstr, size_t errstr_size)
{
    dd_routes_t *routes = calloc(1, sizeof(*routes));
    char err[512];
    int rc = DD_OK;

    *routesp = NULL;
    if (!routes) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        dd_route_t *rt = &routes->route[r];
        rt->idx = r;
        rt->conf = &conf->routes[r];
        rt->h = handlers ? handlers[r] : NULL;
        rt->shard_cnt = conf->shard_cnt;
        routes->cnt = r + 1;
        if ((rc = dd_routes_compile(rt, err, sizeof(err))))
            dd_routes_prefix(conf, r, err, errstr, errstr_size);
    }
    if (rc) {
        dd_routes_destroy(routes);
        return rc;
    }
    *routesp = routes;
    return DD_OK;
}

void dd_routes_destroy(dd_routes_t *routes)
{
    if (!routes) return;
    for (int r = 0; r < routes->cnt; r++) {
        dd_key_tmpl_destroy(routes->route[r].tmpl);
        dd_key_tmpl_destroy(routes->route[r].lane_tmpl);
        dd_key_tmpl_destroy(routes->route[r].shard_tmpl);
        dd_shard_map_destroy(routes->route[r].shard_map);
        dd_hash_spec_destroy(routes->route[r].hspec);
    }
    free(routes);
}

int dd_routes_shard(const dd_route_t *rt, const dd_json_doc_t *doc, const char *key, size_t key_len,
                    int *reason, char *why, size_t why_size)
{
    char shard_key[DD_KEY_MAX + 1], kwhy[64];
    const char *sk = key, *which = NULL;
    size_t sk_len = key_len;
    int shard;

    if (rt->shard_cnt <= 1) return 0;
    if (rt->shard_tmpl) {
        /* its fields are the business key's (checked at load), which rendered */
        if (dd_key_render(rt->shard_tmpl, doc, shard_key, &sk_len, kwhy, sizeof(kwhy)) !=
            DD_KEY_OK) {
            *reason = DD_REASON_SHARD_KEY_INVALID;
            dd_errstr_set(why, why_size, "the shard key cannot be rendered: %s", kwhy);
            return -1;
        }
        sk = shard_key;
    }
    if ((shard = dd_shard_pick(rt->conf->dedup.shard_by, rt->shard_map, rt->shard_cnt, sk, sk_len,
                               &which)) >= 0)
        return shard;
    *reason = strcmp(which, DD_SHARD_REASON_UNMAPPED) == 0 ? DD_REASON_SHARD_UNMAPPED
                                                           : DD_REASON_SHARD_KEY_INVALID;
    if (*reason == DD_REASON_SHARD_UNMAPPED)
        dd_errstr_set(why, why_size, "shard key %.*s is in no range of %s", (int)sk_len, sk,
                      rt->conf->dedup.shard_map);
    else
        dd_errstr_set(why, why_size, "shard key %.*s is not a non-negative decimal integer%s",
                      (int)(sk_len > 200 ? 200 : sk_len), sk,
                      rt->conf->dedup.shard_by == DD_SHARD_MAP ? " up to 18446744073709551615"
                                                               : "");
    return -1;
}

int dd_routes_load_handlers(const dd_conf_t *conf, dd_handler_t **hs, char *errstr,
                            size_t errstr_size)
{
    char err[1024];
    int rc = DD_OK;

    for (int r = 0; r < conf->route_cnt; r++)
        hs[r] = NULL;
    for (int r = 0; !rc && r < conf->route_cnt; r++) {
        const dd_conf_handler_t *h = &conf->routes[r].handler;
        if ((rc = dd_handler_load(&hs[r], h->path, h->config, conf->outbox.enabled, err,
                                  sizeof(err))))
            dd_routes_prefix(conf, r, err, errstr, errstr_size);
    }
    if (rc) dd_routes_destroy_handlers(hs, conf->route_cnt);
    return rc;
}

void dd_routes_destroy_handlers(dd_handler_t **hs, int n)
{
    /* In reverse: the last loaded is the first to go, as with any stack
     * of libraries that may share one file. */
    for (int r = n; r-- > 0;) {
        dd_handler_destroy(hs[r]);
        hs[r] = NULL;
    }
}
