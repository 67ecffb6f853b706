/*
 * Unit tests for dd_position and the limit it sets on Kafka's offsets,
 * without a database: the writers cannot reach the server (a socket that
 * does not exist). An assignment then waits for the positions only as
 * long as it is told, a shard that did not answer counts as unread, no
 * offset is storable for Kafka before a shard recorded one, a flush says
 * it could not write, and the writers wait without burning the CPU.
 */
#include <check.h>
#include <stdint.h>
#include <sys/resource.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_offsets.h"
#include "dd_position.h"
#include "check_run.h"
#include "unit_conf.h"

static char errstr[1024];

/* A configuration whose database nobody answers. */
static dd_conf_t *position_conf(void)
{
    return unit_conf("pos", "/nonexistent/dd-position.sock", "th_scripted", "", errstr,
                     sizeof(errstr));
}

static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

START_TEST(test_storable_keeps_to_the_limit)
{
    dd_offsets_t *offs = dd_offsets_new();
    dd_ptrack_t *pt = dd_offsets_get(offs, "t", 0, 1);

    dd_ptrack_reset(pt, 1, 100);
    ck_assert_int_eq(pt->limit, INT64_MAX); /* positions not kept: no limit */
    ck_assert_int_eq(dd_ptrack_storable(pt), 100);
    pt->limit = 40;
    ck_assert_int_eq(dd_ptrack_storable(pt), 40);
    pt->limit = -1;
    ck_assert_int_eq(dd_ptrack_storable(pt), -1);
    pt->limit = 500;
    ck_assert_int_eq(dd_ptrack_storable(pt), 100);
    dd_offsets_destroy(offs);
}
END_TEST

START_TEST(test_unreachable_database)
{
    dd_conf_t *conf = position_conf();
    dd_offsets_t *offs = dd_offsets_new();
    dd_ptrack_t *pt = dd_offsets_get(offs, "t", 3, 1);
    dd_position_t *pos = NULL;
    dd_position_found_t f;
    int64_t t0;
    double cpu0;

    ck_assert_int_eq(dd_position_new(&pos, conf, errstr, sizeof(errstr)), DD_OK);
    ck_assert_int_eq(dd_position_start(pos, errstr, sizeof(errstr)), DD_OK);
    t0 = dd_now_ms();
    dd_position_load(pos, 300);
    ck_assert_int_lt(dd_now_ms() - t0, 1500); /* bounded by its timeout and a connect */
    dd_position_found(pos, "t", 3, &f);
    ck_assert_int_eq(f.unread, 1);
    ck_assert_int_eq(f.have, 0);
    ck_assert_int_eq(f.min, -1);

    dd_ptrack_reset(pt, 1, 10);
    dd_position_track(pos, "t", 3, -1);
    pt->next = 25;
    dd_position_sync(pos, offs);
    ck_assert_int_eq(pt->limit, -1); /* no shard recorded anything yet */
    ck_assert_int_eq(dd_ptrack_storable(pt), -1);
    ck_assert_int_eq(dd_position_flush(pos, 200), DD_ERR_RETRIABLE);
    ck_assert_int_eq(dd_position_went_back(pos, errstr, sizeof(errstr)), 0);

    /* Waiting for the database, the writer sleeps. */
    cpu0 = cpu_seconds();
    dd_sleep_ms(1000, NULL);
    ck_assert_msg(cpu_seconds() - cpu0 < 0.3, "the writers used %.2f s of CPU in 1 s",
                  cpu_seconds() - cpu0);

    dd_position_untrack(pos, "t", 3);
    dd_position_destroy(pos);
    dd_offsets_destroy(offs);
    dd_conf_destroy(conf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("position");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_storable_keeps_to_the_limit);
    tcase_add_test(tc, test_unreachable_database);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
