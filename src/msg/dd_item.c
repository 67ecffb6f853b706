/*
 * Item life cycle (see dd_item.h): the one place that knows what an item
 * owns, so the pipeline, the lanes and replay release it alike.
 */
#include "dd_item.h"

#include <stdlib.h>
#include <string.h>

dd_item_t *dd_item_new(void)
{
    return calloc(1, sizeof(dd_item_t));
}

void dd_item_reset(dd_item_t *item, dd_parse_pool_t *pool)
{
    dd_parse_release(pool, item->json);
    dd_parse_release_doc(pool, item->doc);
    if (item->rkm) rd_kafka_message_destroy(item->rkm);
    free(item->response);
    free(item->text_owned);
    memset(item, 0, sizeof(*item));
}

void dd_item_destroy(dd_item_t *item, dd_parse_pool_t *pool)
{
    if (!item) return;
    dd_item_reset(item, pool);
    free(item);
}

void dd_item_list_destroy(dd_item_t *list, dd_parse_pool_t *pool)
{
    dd_item_t *next;

    for (; list; list = next) {
        next = list->next;
        dd_item_destroy(list, pool);
    }
}
