/*
 * The lane group's choice of a lane (dd_lanes.h): keys that differ only in
 * their digits, as business keys do, spread evenly over the workers.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "dd_lanes.h"

/* n keys "pay:m<i mod 97>:o<i>" over `workers` lanes: each lane gets
 * within a quarter of its share. */
static void spread(int n, int workers)
{
    int cnt[64] = {0};
    char key[64];

    for (int i = 1; i <= n; i++) {
        int len = snprintf(key, sizeof(key), "pay:m%d:o%d", i % 97, i);
        cnt[dd_lanes_key_hash(key, (size_t)len) % (uint32_t)workers]++;
    }
    for (int w = 0; w < workers; w++)
        ck_assert_msg(cnt[w] * 4 > n / workers * 3 && cnt[w] * 4 < n / workers * 5,
                      "%d keys on %d lanes: lane %d has %d", n, workers, w, cnt[w]);
}

START_TEST(test_spread)
{
    spread(480, 4);
    spread(1920, 4);
    spread(4000, 8);
    spread(6400, 16);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lanes");
    TCase *tc = tcase_create("lanes");

    tcase_add_test(tc, test_spread);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
