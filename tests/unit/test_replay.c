/*
 * `dedupd replay` argument parsing: positions (offsets, ISO-8601 times with
 * zones, durations back from now) and partition lists.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_replay.h"
#include "check_run.h"

#define NOW 1795946400000LL /* 2026-11-29T10:00:00Z */

START_TEST(test_pos_words_and_offsets)
{
    dd_replay_pos_t pos;
    char err[256];

    ck_assert_int_eq(dd_replay_pos_parse("earliest", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.kind, DD_REPLAY_POS_EARLIEST);
    ck_assert_int_eq(dd_replay_pos_parse("latest", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.kind, DD_REPLAY_POS_LATEST);
    ck_assert_int_eq(dd_replay_pos_parse("1200", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.kind, DD_REPLAY_POS_OFFSET);
    ck_assert_int_eq(pos.value, 1200);
    ck_assert_int_eq(dd_replay_pos_parse("0", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.value, 0);
    ck_assert_int_ne(dd_replay_pos_parse("99999999999999999999", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("12x", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("Earliest", NOW, &pos, err, sizeof(err)), DD_OK);
}
END_TEST

START_TEST(test_pos_times)
{
    dd_replay_pos_t pos;
    char err[256];

    ck_assert_int_eq(dd_replay_pos_parse("2026-11-29T10:00:00Z", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_eq(pos.kind, DD_REPLAY_POS_TIME);
    ck_assert_int_eq(pos.value, NOW);
    ck_assert_int_eq(dd_replay_pos_parse("2026-11-29T18:00:00+08:00", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_eq(pos.value, NOW);
    ck_assert_int_eq(
        dd_replay_pos_parse("2026-11-29T04:30:00.250-0530", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.value, NOW + 250);
    ck_assert_int_eq(dd_replay_pos_parse("2026-11-29T10:00Z", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.value, NOW);
    ck_assert_int_eq(dd_replay_pos_parse("1970-01-01T00:00:00Z", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_eq(pos.value, 0);
    ck_assert_int_eq(dd_replay_pos_parse("2024-02-29T00:00:00Z", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_eq(pos.value, 1709164800000LL);
    /* no zone, impossible dates, junk after the zone */
    ck_assert_int_ne(dd_replay_pos_parse("2026-11-29T10:00:00", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("2025-02-29T10:00:00Z", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("2026-13-01T10:00:00Z", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("2026-11-29T24:00:00Z", NOW, &pos, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("2026-11-29T10:00:00Zx", NOW, &pos, err, sizeof(err)),
                     DD_OK);
}
END_TEST

START_TEST(test_pos_durations)
{
    dd_replay_pos_t pos;
    char err[256];

    ck_assert_int_eq(dd_replay_pos_parse("-2h", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.kind, DD_REPLAY_POS_TIME);
    ck_assert_int_eq(pos.value, NOW - 2 * 3600 * 1000LL);
    ck_assert_int_eq(dd_replay_pos_parse("-30m", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.value, NOW - 30 * 60 * 1000LL);
    ck_assert_int_eq(dd_replay_pos_parse("-1d", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_eq(pos.value, NOW - 86400 * 1000LL);
    ck_assert_int_ne(dd_replay_pos_parse("-", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("-2x", NOW, &pos, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_pos_parse("-0s", NOW, &pos, err, sizeof(err)), DD_OK);
}
END_TEST

START_TEST(test_partitions)
{
    int32_t *parts = NULL;
    char err[256];
    int cnt = 0;

    ck_assert_int_eq(dd_replay_partitions_parse("5,0,2-3,2", &parts, &cnt, err, sizeof(err)),
                     DD_OK);
    ck_assert_int_eq(cnt, 4);
    ck_assert_int_eq(parts[0], 0);
    ck_assert_int_eq(parts[1], 2);
    ck_assert_int_eq(parts[2], 3);
    ck_assert_int_eq(parts[3], 5);
    free(parts);
    ck_assert_int_ne(dd_replay_partitions_parse("", &parts, &cnt, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_partitions_parse("1,", &parts, &cnt, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_partitions_parse("-1", &parts, &cnt, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_partitions_parse("3-1", &parts, &cnt, err, sizeof(err)), DD_OK);
    ck_assert_int_ne(dd_replay_partitions_parse("a", &parts, &cnt, err, sizeof(err)), DD_OK);
    ck_assert_ptr_null(parts);
}
END_TEST

/* dd_replay_range_check on two parsed positions. */
static int range(const char *from, const char *to, char *err, size_t err_size)
{
    dd_replay_pos_t f, t;

    ck_assert_int_eq(dd_replay_pos_parse(from, NOW, &f, err, err_size), DD_OK);
    ck_assert_int_eq(dd_replay_pos_parse(to, NOW, &t, err, err_size), DD_OK);
    err[0] = '\0';
    return dd_replay_range_check(&f, &t, err, err_size);
}

/* Empty and inverted ranges are refused before anything is read; ranges
 * that mix kinds are left to the per-partition resolution. */
START_TEST(test_range_check)
{
    char err[256];

    ck_assert_int_eq(range("earliest", "latest", err, sizeof(err)), DD_OK);
    ck_assert_int_eq(range("5", "8", err, sizeof(err)), DD_OK);
    ck_assert_int_eq(range("-2h", "-1h", err, sizeof(err)), DD_OK);
    ck_assert_int_eq(
        range("2026-11-29T09:00:00Z", "2026-11-29T10:00:00.001+00:00", err, sizeof(err)), DD_OK);
    ck_assert_int_eq(range("10", "-1h", err, sizeof(err)), DD_OK);
    ck_assert_int_eq(range("-1h", "5", err, sizeof(err)), DD_OK);
    ck_assert_int_eq(range("earliest", "0", err, sizeof(err)), DD_OK);

    ck_assert_int_eq(range("10", "5", err, sizeof(err)), DD_ERR_ARG);
    ck_assert_str_eq(err, "--to 5 is before --from 10: the range [--from, --to) is inverted");
    ck_assert_int_eq(range("5", "5", err, sizeof(err)), DD_ERR_ARG);
    ck_assert_str_eq(err, "--to 5 is the same as --from: the range [--from, --to) is empty "
                          "(--to is exclusive)");
    ck_assert_int_eq(
        range("2026-11-29T10:00:00Z", "2026-11-29T17:59:59.500+08:00", err, sizeof(err)),
        DD_ERR_ARG);
    ck_assert_str_eq(err, "--to 2026-11-29T09:59:59.500Z is before --from "
                          "2026-11-29T10:00:00.000Z: the range [--from, --to) is inverted");
    ck_assert_int_eq(range("-1h", "-2h", err, sizeof(err)), DD_ERR_ARG);
    ck_assert_str_eq(err, "--to 2026-11-29T08:00:00.000Z is before --from "
                          "2026-11-29T09:00:00.000Z: the range [--from, --to) is inverted");
    ck_assert_int_eq(range("-30m", "-30m", err, sizeof(err)), DD_ERR_ARG);
    ck_assert_int_eq(range("latest", "latest", err, sizeof(err)), DD_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err, "--from latest selects nothing"));
    ck_assert_int_eq(range("earliest", "earliest", err, sizeof(err)), DD_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err, "--to earliest selects nothing"));
}
END_TEST

static Suite *dd_replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("args");

    tcase_add_test(tc, test_pos_words_and_offsets);
    tcase_add_test(tc, test_pos_times);
    tcase_add_test(tc, test_pos_durations);
    tcase_add_test(tc, test_partitions);
    tcase_add_test(tc, test_range_check);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(dd_replay_suite());
}
