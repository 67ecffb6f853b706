/*
 * Decoding payloads before they are parsed (dedup.format), and the
 * messages that wait for the schema registry.
 *
 * A message whose writer schema the registry cannot serve now (down, slow,
 * answering errors) is neither applied nor dead-lettered: it waits, and
 * every later message of its partition waits behind it, in order, so no
 * key is applied out of order and the partition's offset does not move
 * past it. Other partitions go on (a JSON route's, or an Avro route's whose
 * schemas are known). The waiting messages are tried again, first to last,
 * with the retry backoff, and /readyz says what they wait for. They count
 * as in flight, so backpressure bounds them. Messages of partitions the
 * group takes away are dropped from the queue: their new owner reads them
 * again.
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

/* Decodes item's payload into the JSON text its route reads. 0: done
 * (item->text set); 1: dead-lettered; -1: the registry could not answer,
 * item->error says why. */
static int dd_pipeline_decode(dd_pipeline_t *pl, dd_item_t *item)
{
    const dd_route_t *rt = &pl->routes->route[item->route];
    rd_kafka_message_t *rkm = item->rkm;
    dd_registry_text_t out;
    dd_reason_t reason;
    int rc;

    rc = dd_registry_decode(pl->registry, rt->conf->dedup.format, rkm->payload, rkm->len,
                            rt->conf->dedup.max_payload_bytes, &out, &reason, item->error,
                            sizeof(item->error));
    if (rc == DD_ERR_RETRIABLE) return -1;
    if (rc) {
        dd_pipeline_reject(pl, item, rc == DD_ERR_NOMEM ? DD_REASON_BAD_AVRO : reason);
        return 1;
    }
    item->text = out.text;
    item->text_len = out.len;
    item->text_owned = out.owned;
    return 0;
}

static void dd_pipeline_hold(dd_pipeline_t *pl, dd_item_t *item)
{
    item->next = NULL;
    if (pl->held_tail)
        pl->held_tail->next = item;
    else
        pl->held = item;
    pl->held_tail = item;
    item->pt->held++;
}

/* The first waiting message could not be decoded: again after the
 * backoff. */
static void dd_pipeline_wait(dd_pipeline_t *pl, dd_item_t *item)
{
    int64_t backoff = pl->conf->retry.backoff_initial_ms;
    char why[sizeof(pl->stats.registry_wait)];

    for (int i = 0; i < pl->held_attempt && backoff < pl->conf->retry.backoff_max_ms; i++)
        backoff *= 2;
    if (backoff > pl->conf->retry.backoff_max_ms) backoff = pl->conf->retry.backoff_max_ms;
    pl->held_due_ms = dd_now_ms() + backoff;
    if (pl->held_attempt++ == 0) {
        dd_log(DD_LOG_WARN,
               "%s [%d] @%lld waits for the schema registry: %s. It and the later messages of "
               "its partition wait (nothing is dead-lettered, no offset passes it); trying "
               "again with backoff.",
               rd_kafka_topic_name(item->rkm->rkt), (int)item->rkm->partition,
               (long long)item->rkm->offset, item->error);
        snprintf(why, sizeof(why), "waiting for the schema registry: %.400s", item->error);
        dd_pipeline_wait_set(pl, why);
    }
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
    if (pl->held == item) dd_pipeline_wait(pl, item);
    return -1;
}

/* Takes item, the first waiting message, off the queue. */
static void dd_pipeline_unhold(dd_pipeline_t *pl, dd_item_t *item)
{
    if (!(pl->held = item->next)) pl->held_tail = NULL;
    item->next = NULL;
    item->pt->held--;
}

void dd_pipeline_held_turn(dd_pipeline_t *pl)
{
    dd_item_t *item;
    int rc;

    if (!pl->held || dd_now_ms() < pl->held_due_ms) return;
    while ((item = pl->held)) {
        if ((rc = dd_pipeline_decode(pl, item)) < 0) {
            dd_pipeline_wait(pl, item);
            return;
        }
        dd_pipeline_unhold(pl, item);
        if (rc == 0) dd_pipeline_route_decoded(pl, item);
    }
    if (pl->held_attempt)
        dd_log(DD_LOG_INFO, "The schema registry answers again: the waiting messages go on.");
    pl->held_attempt = 0;
    dd_pipeline_wait_set(pl, "");
}

/* 1 when item is of one of parts. */
static int dd_pipeline_held_of(const dd_item_t *item, const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++)
        if (item->rkm->partition == parts->elems[i].partition &&
            strcmp(rd_kafka_topic_name(item->rkm->rkt), parts->elems[i].topic) == 0)
            return 1;
    return 0;
}

void dd_pipeline_held_drop(dd_pipeline_t *pl, const rd_kafka_topic_partition_list_t *parts)
{
    dd_item_t **at = &pl->held, *item;

    pl->held_tail = NULL;
    while ((item = *at)) {
        if (!parts || dd_pipeline_held_of(item, parts)) {
            *at = item->next;
            item->pt->held--;
            pl->inflight--;
            if (!parts) pl->abandoned++;
            dd_pipeline_item_recycle(pl, item);
            continue;
        }
        pl->held_tail = item;
        at = &item->next;
    }
    if (!pl->held) {
        pl->held_attempt = 0;
        dd_pipeline_wait_set(pl, "");
    }
}
