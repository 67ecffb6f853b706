/*
 * The lane group stands on the layers below it alone: this program links
 * only lanes_lib (src/lanes/ and the layers below it), no pipeline, no
 * replay, no command, so it stops linking the day a lane reaches up into
 * one of them.
 * It then creates a group with a trivial handler, starts and stops it:
 * against the test MariaDB when DD_TEST_MYSQL_SOCKET is set (scripts/test
 * always sets it), else against a socket that does not exist, where the
 * start must fail cleanly and leave a group that stops and frees.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_handler.h"
#include "dd_lanes.h"
#include "check_run.h"
#include "unit_conf.h"

static char errstr[1024];

/* A configuration for the lanes: a database on socket, a trivial handler. */
static dd_conf_t *link_conf(const char *socket)
{
    return unit_conf("link", socket, "th_abi_v1",
                     "batch = { max_messages = 10; max_wait_ms = 5; };", errstr, sizeof(errstr));
}

START_TEST(test_lanes_new_start_stop_destroy)
{
    const char *socket = getenv("DD_TEST_MYSQL_SOCKET");
    dd_conf_t *conf = link_conf(socket ? socket : "/nonexistent/dd-link-lanes.sock");
    dd_item_t *leftover = NULL;
    dd_handler_t *h = NULL;
    dd_routes_t *routes = NULL;
    dd_lanes_t *lanes = NULL;
    dd_stats_t s = {0};
    int rc;

    ck_assert_msg(
        dd_handler_load(&h, conf->routes[0].handler.path, NULL, 0, errstr, sizeof(errstr)) == DD_OK,
        "%s", errstr);
    ck_assert_msg(dd_routes_new(&routes, conf, &h, errstr, sizeof(errstr)) == DD_OK, "%s", errstr);
    ck_assert_msg(dd_lanes_new(&lanes, conf, routes, 2, "link-test", errstr, sizeof(errstr)) ==
                      DD_OK,
                  "%s", errstr);
    ck_assert_int_eq(dd_lanes_stopped(lanes), 0);
    rc = dd_lanes_start(lanes, errstr, sizeof(errstr));
    if (socket) {
        ck_assert_msg(rc == DD_OK, "%s", errstr);
        ck_assert_int_eq(dd_lanes_failed(lanes, errstr, sizeof(errstr)), 0);
        dd_lanes_finish(lanes);
    } else {
        ck_assert_int_eq(rc, DD_ERR_RETRIABLE);
        ck_assert_ptr_nonnull(strstr(errstr, "cannot connect"));
    }
    ck_assert_ptr_null(dd_lanes_take_done(lanes, 0));
    dd_lanes_stop(lanes, &leftover);
    ck_assert_int_eq(dd_lanes_stopped(lanes), 1);
    ck_assert_ptr_null(leftover);
    dd_lanes_stats(lanes, &s);
    ck_assert_uint_eq(s.batches, 0);
    ck_assert_uint_eq(s.db_errors_fatal, 0);
    dd_lanes_destroy(lanes);
    dd_routes_destroy(routes);
    dd_handler_destroy(h);
    dd_conf_destroy(conf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("link_lanes");
    TCase *tc = tcase_create("lanes");

    tcase_add_test(tc, test_lanes_new_start_stop_destroy);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
