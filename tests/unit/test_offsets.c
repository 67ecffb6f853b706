/*
 * The contiguous watermark: offsets finish out of order, the stored offset
 * only moves to the lowest unfinished one.
 */
#include <check.h>
#include <stdlib.h>

#include "dd_offsets.h"
#include "check_run.h"

START_TEST(test_watermark_out_of_order)
{
    dd_offsets_t *offs = dd_offsets_new();
    dd_ptrack_t *pt = dd_offsets_get(offs, "t", 3, 1);
    uint64_t s10, s11, s12;

    ck_assert_ptr_nonnull(pt);
    dd_ptrack_reset(pt, 1, 10);
    ck_assert_int_eq(pt->next, 10);
    s10 = dd_ptrack_add(pt, 10);
    s11 = dd_ptrack_add(pt, 11);
    s12 = dd_ptrack_add(pt, 12);
    ck_assert_int_eq(dd_ptrack_polled_end(pt), 13);
    dd_ptrack_done(pt, s12);
    ck_assert_int_eq(pt->next, 10); /* 10 and 11 still running */
    dd_ptrack_done(pt, s10);
    ck_assert_int_eq(pt->next, 11);
    ck_assert_uint_eq(dd_ptrack_inflight(pt), 2);
    dd_ptrack_done(pt, s11);
    ck_assert_int_eq(pt->next, 13);
    ck_assert_uint_eq(dd_ptrack_inflight(pt), 0);
    ck_assert_int_eq(dd_ptrack_polled_end(pt), 13); /* nothing in flight: next */
    dd_offsets_destroy(offs);
}
END_TEST

START_TEST(test_watermark_gaps_and_growth)
{
    dd_offsets_t *offs = dd_offsets_new();
    dd_ptrack_t *pt = dd_offsets_get(offs, "t", 0, 1);
    uint64_t seqs[5000];

    dd_ptrack_reset(pt, 1, -1);
    ck_assert_int_eq(dd_ptrack_polled_end(pt), -1); /* unknown until polled */
    /* Offsets with gaps (compacted topic, transaction markers), ring growth. */
    for (int i = 0; i < 5000; i++)
        seqs[i] = dd_ptrack_add(pt, 100 + 2 * i);
    ck_assert_int_eq(dd_ptrack_polled_end(pt), 100 + 2 * 4999 + 1);
    for (int i = 4999; i >= 1; i--)
        dd_ptrack_done(pt, seqs[i]);
    ck_assert_int_eq(pt->next, -1);
    dd_ptrack_done(pt, seqs[0]);
    ck_assert_int_eq(pt->next, 100 + 2 * 4999 + 1);
    dd_offsets_destroy(offs);
}
END_TEST

START_TEST(test_epoch_and_at_end)
{
    dd_offsets_t *offs = dd_offsets_new();
    dd_ptrack_t *pt = dd_offsets_get(offs, "t", 1, 1);
    uint32_t epoch;
    uint64_t seq;

    ck_assert_ptr_eq(dd_offsets_get(offs, "t", 1, 0), pt);
    ck_assert_ptr_null(dd_offsets_get(offs, "u", 1, 0));
    pt->low_offset = 0;
    pt->end_offset = 5;
    dd_ptrack_reset(pt, 1, 3);
    ck_assert(!dd_ptrack_at_end(pt));
    seq = dd_ptrack_add(pt, 3);
    epoch = pt->epoch;
    dd_ptrack_reset(pt, 0, -1); /* revoked */
    ck_assert_uint_ne(epoch, pt->epoch);
    dd_ptrack_done(pt, seq); /* stale: must not move anything */
    ck_assert_int_eq(pt->next, -1);
    dd_ptrack_reset(pt, 1, 5);
    ck_assert(dd_ptrack_at_end(pt));
    pt->end_offset = 0; /* empty partition */
    dd_ptrack_reset(pt, 1, -1);
    ck_assert(dd_ptrack_at_end(pt));
    dd_offsets_destroy(offs);
    dd_offsets_destroy(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("offsets");
    TCase *tc = tcase_create("watermark");

    tcase_add_test(tc, test_watermark_out_of_order);
    tcase_add_test(tc, test_watermark_gaps_and_growth);
    tcase_add_test(tc, test_epoch_and_at_end);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
