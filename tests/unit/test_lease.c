/*
 * Unit tests for dd_lease, without a database: the renewer cannot reach
 * the server (a socket that does not exist), so a claim is held for one
 * lease from when it was sent and then no longer, and saying why. Holds
 * released while registered, or never made, are safe.
 */
#include <check.h>
#include <string.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_external.h"
#include "dd_lease.h"
#include "check_run.h"
#include "unit_conf.h"

static char errstr[1024];

/* A configuration with a lease of 1 s and a database nobody answers. */
static dd_conf_t *lease_conf(void)
{
    return unit_conf("lease", "/nonexistent/dd-lease.sock", "th_external",
                     "external = { lease = \"1s\"; };", errstr, sizeof(errstr));
}

START_TEST(test_held_for_one_lease_without_renewal)
{
    dd_conf_t *conf = lease_conf();
    dd_external_opts_t opts;
    dd_lease_t *lease = NULL;
    dd_lease_hold_t *a, *b;
    int64_t t0 = dd_now_ms();

    dd_external_opts_init(&opts, conf, &conf->routes[0], "host:1 test");
    ck_assert_int_eq(opts.lease_ms, 1000);
    ck_assert_int_eq(dd_lease_new(&lease, conf, errstr, sizeof(errstr)), DD_OK);
    ck_assert_int_eq(dd_lease_start(lease, errstr, sizeof(errstr)), DD_OK);
    ck_assert_ptr_nonnull(a = dd_lease_hold(lease, &opts, 0, "k:1", 3, 1, t0));
    ck_assert_ptr_nonnull(
        b = dd_lease_hold(lease, &opts, 0, "k:2", 3, 4, t0 - 2000)); /* sent long ago */
    ck_assert_int_eq(dd_lease_held(lease, a), 1);
    ck_assert_int_eq(dd_lease_held(lease, b), 0);
    /* no renewal of b was tried, none failed: not the database's fault */
    ck_assert_ptr_nonnull(strstr(dd_lease_why(lease, b), "with no renewal failing"));
    /* The renewals (one third into the lease) fail: no server. */
    while (dd_now_ms() < t0 + 1100)
        dd_sleep_ms(50, NULL);
    ck_assert_int_eq(dd_lease_held(lease, a), 0);
    ck_assert_ptr_nonnull(
        strstr(dd_lease_why(lease, a), "not renewed in time (the database did not answer)"));
    dd_lease_release(lease, b);
    dd_lease_stop(lease);
    dd_lease_release(lease, NULL);
    ck_assert_int_eq(dd_lease_held(lease, NULL), 0);
    dd_lease_destroy(lease); /* frees a, still registered */
    dd_conf_destroy(conf);
}
END_TEST

START_TEST(test_destroy_unstarted)
{
    dd_conf_t *conf = lease_conf();
    dd_external_opts_t opts;
    dd_lease_t *lease = NULL;

    dd_external_opts_init(&opts, conf, &conf->routes[0], "host:1 test");
    ck_assert_int_eq(dd_lease_new(&lease, conf, errstr, sizeof(errstr)), DD_OK);
    ck_assert_ptr_nonnull(dd_lease_hold(lease, &opts, 0, "k:1", 3, 1, dd_now_ms()));
    dd_lease_destroy(lease);
    dd_lease_destroy(NULL);
    dd_conf_destroy(conf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lease");
    TCase *tc = tcase_create("lease");

    tcase_add_test(tc, test_held_for_one_lease_without_renewal);
    tcase_add_test(tc, test_destroy_unstarted);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
