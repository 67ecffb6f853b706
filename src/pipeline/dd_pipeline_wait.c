/*
 * The queue of messages waiting for the schema registry, and the registry
 * they wait for (see dd_pipeline_decode.c for when a message waits).
 *
 * Each partition with messages waiting has its own queue, in poll order:
 * its first message is the one whose schema is missing, the others wait
 * behind it so that no key of the partition is applied out of order and
 * its offset does not move past them. Another partition's messages do not
 * wait for it. The registry is opened for a caller that never waits: its
 * thread fetches, the consumer asks again.
 */
#include "dd_pipeline_int.h"

#include <stdlib.h>

#include "dd_common.h"

struct dd_pwait_part_s {
    dd_ptrack_t *pt;
    dd_item_t *head, *tail;
};

int dd_pipeline_wait_init(dd_pipeline_wait_t *w, const dd_conf_t *conf, char *errstr,
                          size_t errstr_size)
{
    dd_registry_opts_t opts = {.nowait = 1,
                               .backoff_initial_ms = conf->retry.backoff_initial_ms,
                               .backoff_max_ms = conf->retry.backoff_max_ms,
                               .verify = dd_schemafp_verify,
                               .verify_opaque = &w->fp};

    w->fp = (dd_schemafp_t){conf, 1};
    if (!conf->schema_registry.url) return DD_OK;
    return dd_registry_new(&w->registry, &conf->schema_registry, &opts, errstr, errstr_size);
}

void dd_pipeline_wait_release(dd_pipeline_wait_t *w)
{
    dd_registry_destroy(w->registry);
    w->registry = NULL;
    free(w->parts);
    w->parts = NULL;
    w->part_cnt = w->part_cap = 0;
}

int dd_pipeline_wait_push(dd_pipeline_wait_t *w, dd_item_t *item)
{
    dd_pwait_part_t *p = NULL;

    for (size_t i = 0; !p && item->pt->held && i < w->part_cnt; i++)
        if (w->parts[i].pt == item->pt && w->parts[i].head) p = &w->parts[i];
    if (!p) {
        if (w->part_cnt == w->part_cap) {
            size_t cap = w->part_cap ? 2 * w->part_cap : 16;
            dd_pwait_part_t *n = realloc(w->parts, cap * sizeof(*n));
            if (!n) {
                w->nomem = 1;
                return -1;
            }
            w->parts = n;
            w->part_cap = cap;
        }
        p = &w->parts[w->part_cnt++];
        *p = (dd_pwait_part_t){.pt = item->pt};
    }
    item->next = NULL;
    if (p->tail)
        p->tail->next = item;
    else
        p->head = item;
    p->tail = item;
    item->pt->held++;
    return 0;
}

dd_item_t *dd_pipeline_wait_first(dd_pipeline_wait_t *w, size_t i)
{
    return i < w->part_cnt ? w->parts[i].head : NULL;
}

void dd_pipeline_wait_pop(dd_pipeline_wait_t *w, size_t i)
{
    dd_pwait_part_t *p = &w->parts[i];
    dd_item_t *item = p->head;

    if (!item) return;
    if (!(p->head = item->next)) p->tail = NULL;
    item->next = NULL;
    item->pt->held--;
}

dd_item_t *dd_pipeline_wait_take(dd_pipeline_wait_t *w, size_t i)
{
    dd_pwait_part_t *p = &w->parts[i];
    dd_item_t *chain = p->head;

    if (chain) p->pt->held = 0;
    p->head = p->tail = NULL;
    return chain;
}

void dd_pipeline_wait_compact(dd_pipeline_wait_t *w)
{
    size_t n = 0;

    for (size_t i = 0; i < w->part_cnt; i++)
        if (w->parts[i].head) w->parts[n++] = w->parts[i];
    w->part_cnt = n;
}
