/*
 * Contiguous watermark per partition (see dd_offsets.h for why).
 */
#include "dd_offsets.h"

#include <stdlib.h>
#include <string.h>

struct dd_offsets_s {
    dd_ptrack_t **pts;
    size_t cnt, cap;
};

dd_offsets_t *dd_offsets_new(void)
{
    return calloc(1, sizeof(dd_offsets_t));
}

void dd_offsets_destroy(dd_offsets_t *offs)
{
    if (!offs) return;
    for (size_t i = 0; i < offs->cnt; i++) {
        free(offs->pts[i]->topic);
        free(offs->pts[i]->offs);
        free(offs->pts[i]->done);
        free(offs->pts[i]);
    }
    free(offs->pts);
    free(offs);
}

dd_ptrack_t *dd_offsets_get(dd_offsets_t *offs, const char *topic, int32_t partition, int create)
{
    dd_ptrack_t *pt;

    for (size_t i = 0; i < offs->cnt; i++) {
        pt = offs->pts[i];
        if (pt->partition == partition && strcmp(pt->topic, topic) == 0) return pt;
    }
    if (!create) return NULL;
    if (offs->cnt == offs->cap) {
        size_t cap = offs->cap ? offs->cap * 2 : 16;
        dd_ptrack_t **pts = realloc(offs->pts, cap * sizeof(*pts));
        if (!pts) return NULL;
        offs->pts = pts;
        offs->cap = cap;
    }
    pt = calloc(1, sizeof(*pt));
    if (!pt || !(pt->topic = strdup(topic))) {
        free(pt);
        return NULL;
    }
    pt->partition = partition;
    pt->low_offset = pt->end_offset = pt->committed = pt->stored = pt->next = -1;
    pt->limit = INT64_MAX;
    pt->pos_slot = -1;
    pt->rewind_end = -1;
    pt->cand_offset = -1;
    offs->pts[offs->cnt++] = pt;
    return pt;
}

size_t dd_offsets_count(const dd_offsets_t *offs)
{
    return offs->cnt;
}

dd_ptrack_t *dd_offsets_at(dd_offsets_t *offs, size_t i)
{
    return i < offs->cnt ? offs->pts[i] : NULL;
}

void dd_ptrack_reset(dd_ptrack_t *pt, int assigned, int64_t next)
{
    pt->assigned = assigned;
    pt->epoch++;
    pt->head_seq = pt->tail_seq = 0;
    pt->next = next;
    pt->stored = -1;
    pt->rewind_end = -1;
    pt->cand_offset = -1;
    pt->cand_ms = 0;
}

int64_t dd_ptrack_storable(const dd_ptrack_t *pt)
{
    return pt->next < pt->limit ? pt->next : pt->limit;
}

static int dd_ptrack_grow(dd_ptrack_t *pt)
{
    size_t cap = pt->cap ? pt->cap * 2 : 256, n = (size_t)(pt->tail_seq - pt->head_seq);
    int64_t *offs = malloc(cap * sizeof(*offs));
    uint8_t *done = malloc(cap);

    if (!offs || !done) {
        free(offs);
        free(done);
        return -1;
    }
    /* Re-lay the live entries so that seq % cap still finds them. */
    for (size_t i = 0; i < n; i++) {
        uint64_t seq = pt->head_seq + i;
        offs[seq % cap] = pt->offs[seq % pt->cap];
        done[seq % cap] = pt->done[seq % pt->cap];
    }
    free(pt->offs);
    free(pt->done);
    pt->offs = offs;
    pt->done = done;
    pt->cap = cap;
    return 0;
}

uint64_t dd_ptrack_add(dd_ptrack_t *pt, int64_t offset)
{
    uint64_t seq;

    if (pt->tail_seq - pt->head_seq == pt->cap && dd_ptrack_grow(pt)) return UINT64_MAX;
    seq = pt->tail_seq++;
    pt->offs[seq % pt->cap] = offset;
    pt->done[seq % pt->cap] = 0;
    return seq;
}

void dd_ptrack_done(dd_ptrack_t *pt, uint64_t seq)
{
    if (seq < pt->head_seq || seq >= pt->tail_seq) return;
    pt->done[seq % pt->cap] = 1;
    while (pt->head_seq < pt->tail_seq && pt->done[pt->head_seq % pt->cap]) {
        pt->next = pt->offs[pt->head_seq % pt->cap] + 1;
        pt->head_seq++;
    }
}

uint64_t dd_ptrack_inflight(const dd_ptrack_t *pt)
{
    return pt->tail_seq - pt->head_seq;
}

int64_t dd_ptrack_polled_end(const dd_ptrack_t *pt)
{
    if (pt->tail_seq == pt->head_seq) return pt->next;
    return pt->offs[(pt->tail_seq - 1) % pt->cap] + 1;
}

int dd_ptrack_at_end(const dd_ptrack_t *pt)
{
    if (pt->end_offset < 0) return 0;
    if (pt->end_offset <= pt->low_offset || pt->end_offset == 0)
        return 1; /* nothing was there when we started */
    return pt->next >= pt->end_offset;
}
