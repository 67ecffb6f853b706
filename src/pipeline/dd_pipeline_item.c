/*
 * The pipeline's items (see dd_pipeline_int.h): where they come from and
 * where they go once done with. The loop, the decoding and the dead
 * letters end items here; this part calls no other.
 */
#include "dd_pipeline_int.h"

#include <stdlib.h>

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

/* The item's offset may move: mark it in its partition's watermark.
 * now_us: the time it finished, read once for everything drained together. */
void dd_pipeline_finish(dd_pipeline_t *pl, dd_item_t *item, int64_t now_us)
{
    if (item->pt && item->epoch == item->pt->epoch) dd_ptrack_done(item->pt, item->seq);
    pl->inflight--;
    pl->last_finish_ms = now_us / 1000;
    pl->lat[dd_stats_latency_bucket(now_us - item->t_poll_us)]++;
    pl->lat_pending = 1;
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
