/*
 * Unit tests for dd_common: the test-fault switch that integration tests
 * use to reach paths a healthy server never takes.
 */
#include <check.h>
#include <stdlib.h>

#include "dd_common.h"
#include "check_run.h"

START_TEST(test_fault_forms)
{
    unsetenv("DEDUPD_TEST_FAULTS");
    ck_assert_uint_eq(dd_test_fault("commit_lost"), 0);

    setenv("DEDUPD_TEST_FAULTS", "commit_lost=3", 1);
    ck_assert_uint_eq(dd_test_fault("commit_lost"), 3);
    ck_assert_uint_eq(dd_test_fault("no_returning"), 0);

    setenv("DEDUPD_TEST_FAULTS", "no_returning,commit_lost=7", 1);
    ck_assert_uint_eq(dd_test_fault("no_returning"), 1);
    ck_assert_uint_eq(dd_test_fault("commit_lost"), 7);

    /* A name inside another name, or followed by more letters, is not it. */
    setenv("DEDUPD_TEST_FAULTS", "xcommit_lost=2 commit_lostx=4", 1);
    ck_assert_uint_eq(dd_test_fault("commit_lost"), 0);
    setenv("DEDUPD_TEST_FAULTS", "xcommit_lost=2 commit_lost=5", 1);
    ck_assert_uint_eq(dd_test_fault("commit_lost"), 5);
    unsetenv("DEDUPD_TEST_FAULTS");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("faults");

    tcase_add_test(tc, test_fault_forms);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
