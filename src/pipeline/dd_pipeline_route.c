/*
 * Routing (see dd_pipeline_int.h): the route each assigned topic belongs
 * to, and for each decoded message its business key, request hash, shard
 * and lane. What cannot be parsed or keyed is dead-lettered here.
 */
#include "dd_pipeline_int.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"

/* An assigned topic that is a dead-letter topic of a route (a pattern
 * matched it; the loader refused every name that is one): its messages are
 * dead letters, and applying them would apply what was refused, or send
 * them round for ever. Its partitions stay assigned and are never
 * consumed: nothing polled from them is applied, nothing committed. */
static int dd_pipeline_dlq_topic(dd_pipeline_t *pl, dd_ptrack_t *pt, int r)
{
    const dd_conf_t *conf = pl->conf;
    int d = dd_conf_dlq_route(conf, pt->topic);

    if (d < 0) return 0;
    pt->route = DD_PIPELINE_ROUTE_DLQ;
    if (strcmp(pl->dlq_said, pt->topic) == 0) return 1;
    snprintf(pl->dlq_said, sizeof(pl->dlq_said), "%s", pt->topic);
    dd_log(DD_LOG_ERROR,
           "Not consuming topic %s: the topics of route %s (%s) match it, but it is a "
           "dead-letter topic of route %s (%s), and its dead letters would be consumed again. "
           "Its partitions stay assigned to this member and nothing of them is applied or "
           "committed (dedupd_dead_letter_partitions_skipped); change the pattern so that it "
           "does not match it.",
           pt->topic, conf->routes[r].name, conf->routes[r].where, conf->routes[d].name,
           conf->routes[d].where);
    return 1;
}

/* The route of an assigned topic, into pt->route. A topic two routes'
 * patterns match (or, which the subscription cannot bring, none) gets -1,
 * and the consumer stops with an error: applying its messages by either
 * route's rules would be a guess. A dead-letter topic is not consumed. */
void dd_pipeline_route_topic(dd_pipeline_t *pl, dd_ptrack_t *pt)
{
    const dd_conf_t *conf = pl->conf;
    int other, r = dd_conf_route_find(conf, pt->topic, &other);

    if (r >= 0 && other < 0 && dd_pipeline_dlq_topic(pl, pt, r)) return;
    pt->route = r >= 0 && other < 0 ? r : -1;
    if (pt->route >= 0 || pl->route_err[0]) return;
    if (r < 0)
        snprintf(pl->route_err, sizeof(pl->route_err),
                 "the group assigned topic %s, which no route's topics match", pt->topic);
    else
        snprintf(pl->route_err, sizeof(pl->route_err),
                 "the group assigned topic %s, which the topics of two routes match: route %s "
                 "(%s) and route %s (%s); a topic must belong to one route: change the "
                 "patterns so that only one matches it",
                 pt->topic, conf->routes[r].name, conf->routes[r].where, conf->routes[other].name,
                 conf->routes[other].where);
    dd_log(DD_LOG_ERROR, "Stopping: %s. None of its messages is applied.", pl->route_err);
}

/* The same parse rules as `dedupd replay` (dd_parse.c), so replay judges a
 * message exactly as the consumer did; the key, hash and lane key of the
 * message's route. The payload's size was checked by the decoding. */
void dd_pipeline_route_decoded(dd_pipeline_t *pl, dd_item_t *item)
{
    const dd_route_t *rt = &pl->routes->route[item->route];
    dd_reason_t reason;

    char lane_key[DD_KEY_MAX + 1], why[8];
    size_t lane_len = 0, text_len;
    const char *text = dd_item_text(item, &text_len);
    int shard_reason = 0;

    if (dd_parse_message_into(pl->pool, pl->doc, INT64_MAX, rt->tmpl, text, text_len, &item->json,
                              &item->doc, item->key, &item->key_len, &reason, item->error,
                              sizeof(item->error)) != DD_OK) {
        dd_registry_parse_failed(rt->conf->dedup.format, &reason, item->error, sizeof(item->error));
        dd_pipeline_reject(pl, item, reason);
        return;
    }
    /* Hashed here, from the document just parsed (one per thread, reused):
     * it is still in this core's cache. The lane skips hashed items; on
     * failure it parses and tries again itself, and stops the worker if
     * that fails too. */
    if (dd_hash_doc(rt->hspec, pl->doc, item->hash) == DD_OK) item->hashed = 1;
    /* The shard its rows live in: every copy of a key reaches the same one
     * (the shard key's fields are the business key's). */
    item->shard = dd_routes_shard(rt, pl->doc, item->key, item->key_len, &shard_reason, item->error,
                                  sizeof(item->error));
    if (item->shard < 0) {
        item->shard = 0;
        dd_pipeline_reject(pl, item, (dd_reason_t)shard_reason);
        return;
    }
    /* The lane key's fields are fields of the business key (checked at load),
     * so every copy of a key goes to the same lane. Lane keys of different
     * routes share the lanes: equal ones meet on one lane, which is what
     * handlers of two routes updating the same rows want. */
    if (rt->lane_tmpl &&
        dd_key_render(rt->lane_tmpl, pl->doc, lane_key, &lane_len, why, sizeof(why)) == DD_KEY_OK)
        dd_lanes_push(pl->lanes, lane_key, lane_len, item);
    else
        dd_lanes_push(pl->lanes, item->key, item->key_len, item);
}
