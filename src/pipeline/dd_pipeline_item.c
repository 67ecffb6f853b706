/*
 * The pipeline's items (see dd_pipeline_int.h): where they come from and
 * where they go once done with. The loop, the decoding and the dead
 * letters end items here; this part calls no other.
 */
#include "dd_pipeline_int.h"

#include <stdlib.h>

#include "dd_common.h"

/* Items are allocated and freed once per message, in bursts of a batch: a
 * bounded free list keeps them out of malloc (whose bins then consolidate
 * on the hot path). At most DD_ITEM_SPARE_MAX are kept, so memory stays
 * flat. */
#define DD_ITEM_SPARE_MAX 4096

void dd_pipeline_item_recycle(dd_pipeline_t *pl, dd_item_t *item)
{
    if (pl->spare_cnt >= DD_ITEM_SPARE_MAX) {
        dd_item_destroy(item, pl->pool);
        return;
    }
    dd_item_reset(item, pl->pool);
    item->next = pl->spare;
    pl->spare = item;
    pl->spare_cnt++;
}

dd_item_t *dd_pipeline_item_new(dd_pipeline_t *pl)
{
    dd_item_t *item = pl->spare;

    if (!item) return dd_item_new();
    pl->spare = item->next;
    pl->spare_cnt--;
    item->next = NULL; /* the rest was zeroed when it was recycled */
    return item;
}

/* The latencies of a finished item: poll to finish for all, and from the
 * message's Kafka timestamp (the producer's or the broker's clock; none
 * when the broker gave none) for one applied. */
static void dd_pipeline_observe(dd_pipeline_t *pl, const dd_item_t *item, int64_t now_us)
{
    int64_t ts;

    pl->lat[dd_stats_latency_bucket(now_us - item->t_poll_us)]++;
    dd_stats_msg_observe(&pl->poll_to_commit[item->route],
                         (double)(now_us - item->t_poll_us) / 1e6);
    if (item->outcome == DD_OUT_APPLIED && item->rkm &&
        (ts = rd_kafka_message_timestamp(item->rkm, NULL)) >= 0)
        dd_stats_msg_observe(&pl->end_to_end[item->route], (double)(dd_wall_ms() - ts) / 1e3);
    pl->lat_pending = 1;
}

/* The item's offset may move: mark it in its partition's watermark.
 * now_us: the time it finished, read once for everything drained together. */
void dd_pipeline_finish(dd_pipeline_t *pl, dd_item_t *item, int64_t now_us)
{
    if (item->pt && item->epoch == item->pt->epoch) dd_ptrack_done(item->pt, item->seq);
    pl->inflight--;
    pl->last_finish_ms = now_us / 1000;
    dd_pipeline_observe(pl, item, now_us);
    dd_pipeline_item_recycle(pl, item);
}

void dd_pipeline_item_release(dd_pipeline_t *pl)
{
    dd_item_t *next;

    for (; pl->spare; pl->spare = next) {
        next = pl->spare->next;
        free(pl->spare);
    }
}
