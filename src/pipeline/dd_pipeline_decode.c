/*
 * Decoding payloads before they are parsed (dedup.format), and the
 * messages that wait for the schema registry.
 *
 * A message whose writer schema is not known yet waits while the
 * registry's thread fetches it; one whose schema the registry cannot serve
 * now (down, slow, answering errors or something that is not a registry's
 * answer, or another schema than the database recorded for the id) waits
 * too, and is neither applied nor dead-lettered. Every later message of
 * its partition waits behind it, in order (dd_pipeline_wait.c), so no key
 * is applied out of order and the partition's offset does not move past
 * it. Other partitions go on (a JSON route's, or an Avro route's whose
 * schemas are known). The waiting messages are tried again whenever a
 * fetch ends, and at least every DD_PIPELINE_WAIT_TRY_MS (the registry
 * paces a failed id's fetches with the retry backoff); /readyz says what
 * they wait for. They count as in flight, so backpressure bounds them.
 * Messages of partitions the group takes away are dropped from the queue:
 * their new owner reads them again.
 */
#include "dd_pipeline_int.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"

static void dd_pipeline_wait_set(dd_pipeline_t *pl, const char *why)
{
    pthread_mutex_lock(&pl->mu);
    snprintf(pl->stats.registry_wait, sizeof(pl->stats.registry_wait), "%s", why);
    pthread_mutex_unlock(&pl->mu);
}

/* How often the waiting messages are tried again when no fetch ended. */
#define DD_PIPELINE_WAIT_TRY_MS 100

/* What dd_pipeline_decode found. */
enum { DD_DECODED = 0, DD_REJECTED = 1, DD_FAULT = -1, DD_FETCHING = -2 };

/* Decodes item's payload into the JSON text its route reads: DD_DECODED
 * (item->text set), DD_REJECTED (dead-lettered), DD_FAULT (the registry
 * could not give the schema: item->error says why) or DD_FETCHING. */
static int dd_pipeline_decode(dd_pipeline_t *pl, dd_item_t *item)
{
    const dd_route_t *rt = &pl->routes->route[item->route];
    rd_kafka_message_t *rkm = item->rkm;
    dd_registry_text_t out;
    dd_reason_t reason;
    int rc;

    rc = dd_registry_decode(pl->wait.registry, rt->conf->dedup.format, rkm->payload, rkm->len,
                            rt->conf->dedup.max_payload_bytes, &out, &reason, item->error,
                            sizeof(item->error));
    if (rc == DD_REGISTRY_PENDING) return DD_FETCHING;
    if (rc == DD_ERR_RETRIABLE) return DD_FAULT;
    if (rc) {
        dd_pipeline_reject(pl, item, rc == DD_ERR_NOMEM ? DD_REASON_BAD_AVRO : reason);
        return DD_REJECTED;
    }
    item->text = out.text;
    item->text_len = out.len;
    item->text_owned = out.owned;
    return DD_DECODED;
}

/* The registry could not give item's schema: said once while messages
 * wait (the registry logs a schema that changed as an error itself). */
static void dd_pipeline_wait_said(dd_pipeline_t *pl, const dd_item_t *item)
{
    char why[sizeof(pl->stats.registry_wait)];

    if (pl->wait.faulted) return;
    pl->wait.faulted = 1;
    dd_log(DD_LOG_WARN,
           "%s [%d] @%lld waits for the schema registry: %s. It and the later messages of "
           "its partition wait (nothing is dead-lettered, no offset passes it); trying "
           "again with backoff.",
           rd_kafka_topic_name(item->rkm->rkt), (int)item->rkm->partition,
           (long long)item->rkm->offset, item->error);
    snprintf(why, sizeof(why), "waiting for the schema registry: %.400s", item->error);
    dd_pipeline_wait_set(pl, why);
}

/* Queues item; out of memory, the consumer stops and the item is given
 * up (its offset stays: it is read again). */
static void dd_pipeline_hold(dd_pipeline_t *pl, dd_item_t *item)
{
    if (dd_pipeline_wait_push(&pl->wait, item) == 0) return;
    dd_log(DD_LOG_ERROR, "Out of memory queueing a message that waits for the schema registry: "
                         "stopping.");
    pl->inflight--;
    pl->abandoned++;
    dd_pipeline_item_recycle(pl, item);
}

int dd_pipeline_decode_or_hold(dd_pipeline_t *pl, dd_item_t *item)
{
    int rc;

    if (item->pt->held) { /* behind the earlier ones of its partition */
        dd_pipeline_hold(pl, item);
        return -1;
    }
    if ((rc = dd_pipeline_decode(pl, item)) >= 0) return rc;
    dd_pipeline_hold(pl, item);
    if (rc == DD_FAULT) dd_pipeline_wait_said(pl, item);
    return -1;
}

/* Tries the waiting messages of the i-th waiting partition, first to
 * last, until one still waits. */
static void dd_pipeline_held_part(dd_pipeline_t *pl, size_t i)
{
    dd_item_t *item;
    int rc;

    while ((item = dd_pipeline_wait_first(&pl->wait, i))) {
        if ((rc = dd_pipeline_decode(pl, item)) < 0) {
            if (rc == DD_FAULT) dd_pipeline_wait_said(pl, item);
            return;
        }
        dd_pipeline_wait_pop(&pl->wait, i);
        if (rc == DD_DECODED) dd_pipeline_route_decoded(pl, item);
    }
}

void dd_pipeline_held_turn(dd_pipeline_t *pl)
{
    dd_pipeline_wait_t *w = &pl->wait;
    uint64_t settled;
    int64_t now;

    if (!w->part_cnt) return;
    settled = w->registry ? dd_registry_settled(w->registry) : 0;
    now = dd_now_ms();
    if (settled == w->settled && now < w->next_ms) return;
    w->settled = settled;
    w->next_ms = now + DD_PIPELINE_WAIT_TRY_MS;
    for (size_t i = 0; i < w->part_cnt; i++)
        dd_pipeline_held_part(pl, i);
    dd_pipeline_wait_compact(w);
    if (w->part_cnt) return;
    if (w->faulted)
        dd_log(DD_LOG_INFO, "The schema registry answers again: the waiting messages go on.");
    w->faulted = 0;
    dd_pipeline_wait_set(pl, "");
}

/* 1 when pt is one of parts. */
static int dd_pipeline_held_of(const dd_ptrack_t *pt, const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++)
        if (pt->partition == parts->elems[i].partition &&
            strcmp(pt->topic, parts->elems[i].topic) == 0)
            return 1;
    return 0;
}

void dd_pipeline_held_drop(dd_pipeline_t *pl, const rd_kafka_topic_partition_list_t *parts)
{
    dd_pipeline_wait_t *w = &pl->wait;

    for (size_t i = 0; i < w->part_cnt; i++) {
        dd_item_t *item = dd_pipeline_wait_first(w, i), *next;
        if (!item || (parts && !dd_pipeline_held_of(item->pt, parts))) continue;
        for (item = dd_pipeline_wait_take(w, i); item; item = next) {
            next = item->next;
            item->next = NULL;
            pl->inflight--;
            if (!parts) pl->abandoned++;
            dd_pipeline_item_recycle(pl, item);
        }
    }
    dd_pipeline_wait_compact(w);
    if (!w->part_cnt) {
        w->faulted = 0;
        dd_pipeline_wait_set(pl, "");
    }
}
