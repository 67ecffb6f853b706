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
        dd_hash_spec_destroy(routes->route[r].hspec);
    }
    free(routes);
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
        if ((rc = dd_handler_load(&hs[r], h->path, h->config, err, sizeof(err))))
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
