/*
 * Unit tests for dd_routes: each route of a configuration compiled (its
 * key, lane key and hash), every route's handler loaded as an instance of
 * its own (two routes naming one file too), and a route's failure named
 * by the route. No database, no Kafka: the handlers are the test ones.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_routes.h"
#include "check_run.h"

static char confpath[PATH_MAX + 32];
static char errstr[2048];

/* A configuration of two routes on the handler file `handler` (in
 * DD_TEST_HANDLER_DIR), the second with a lane key. */
static dd_conf_t *two_routes(const char *handler, const char *second_handler)
{
    const char *dir = getenv("DD_TEST_HANDLER_DIR");
    char made[PATH_MAX];
    dd_conf_t *conf = NULL;
    FILE *fp;

    ck_assert_msg(dir != NULL, "DD_TEST_HANDLER_DIR is not set");
    snprintf(made, sizeof(made), "/tmp/dd_test_routes.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(made));
    snprintf(confpath, sizeof(confpath), "%s/dedupd.conf", made);
    ck_assert_ptr_nonnull(fp = fopen(confpath, "w"));
    fprintf(fp,
            "kafka = { brokers = \"b:9092\"; group = \"g\"; };\n"
            "mysql = { database = \"db\"; };\n"
            "routes = (\n"
            "  { name = \"a\"; topics = [\"ta\"]; key = \"k:${id}\"; table = \"t_a\";\n"
            "    handler = { path = \"%s/%s.so\"; }; },\n"
            "  { name = \"b\"; topics = [\"tb\"]; key = \"k:${shop}:${id}\";\n"
            "    lane_key = \"${shop}\"; hash = [\"amount\"]; table = \"t_b\";\n"
            "    handler = { path = \"%s/%s.so\"; }; }\n"
            ");\n",
            dir, handler, dir, second_handler);
    fclose(fp);
    ck_assert_msg(dd_conf_load(&conf, confpath, errstr, sizeof(errstr)) == 0, "%s", errstr);
    unlink(confpath);
    *strrchr(confpath, '/') = '\0';
    rmdir(confpath);
    return conf;
}

START_TEST(test_routes_compiled)
{
    dd_conf_t *conf = two_routes("th_instance", "th_instance");
    dd_routes_t *routes = NULL;

    ck_assert_msg(dd_routes_new(&routes, conf, NULL, errstr, sizeof(errstr)) == DD_OK, "%s",
                  errstr);
    ck_assert_int_eq(routes->cnt, 2);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(routes->route[r].idx, r);
        ck_assert_ptr_eq(routes->route[r].conf, &conf->routes[r]);
        ck_assert_ptr_nonnull(routes->route[r].tmpl);
        ck_assert_ptr_nonnull(routes->route[r].hspec);
        ck_assert_ptr_null(routes->route[r].h); /* none given: a report-only replay */
    }
    ck_assert_ptr_null(routes->route[0].lane_tmpl);
    ck_assert_ptr_nonnull(routes->route[1].lane_tmpl);
    dd_routes_destroy(routes);
    dd_routes_destroy(NULL);
    dd_conf_destroy(conf);
}
END_TEST

/* Two routes naming one file: two instances, each its own init (the
 * handler numbers its instances) and state. */
START_TEST(test_handlers_per_route)
{
    dd_conf_t *conf = two_routes("th_instance", "th_instance");
    dd_handler_t *hs[DD_CONF_ROUTE_MAX] = {0};
    dedupd_msg msg = {.topic = "t", .payload = "{}", .payload_len = 2, .biz_key = "k"};
    dedupd_result res;
    MYSQL *db = mysql_init(NULL);
    dd_routes_t *routes = NULL;
    int broken;

    ck_assert_msg(dd_routes_load_handlers(conf, hs, errstr, sizeof(errstr)) == DD_OK, "%s", errstr);
    ck_assert_ptr_nonnull(hs[0]);
    ck_assert_ptr_nonnull(hs[1]);
    ck_assert_ptr_ne(hs[0], hs[1]);
    ck_assert_msg(dd_routes_new(&routes, conf, hs, errstr, sizeof(errstr)) == DD_OK, "%s", errstr);
    ck_assert_ptr_eq(routes->route[1].h, hs[1]);
    ck_assert_int_eq(dd_handler_handle(routes->route[1].h, db, NULL, &msg, &res, &broken),
                     DEDUPD_OK);
    ck_assert_str_eq(res.response, "{\"instance\":2,\"calls\":1}");
    free(res.response);
    ck_assert_int_eq(dd_handler_handle(routes->route[0].h, db, NULL, &msg, &res, &broken),
                     DEDUPD_OK);
    ck_assert_str_eq(res.response, "{\"instance\":1,\"calls\":1}");
    free(res.response);
    dd_routes_destroy(routes);
    dd_routes_destroy_handlers(hs, conf->route_cnt);
    ck_assert_ptr_null(hs[0]);
    ck_assert_ptr_null(hs[1]);
    mysql_close(db);
    dd_conf_destroy(conf);
}
END_TEST

/* A route whose handler cannot be loaded: the error names the route, and
 * the instance loaded before it is released. */
START_TEST(test_handler_failure_named)
{
    dd_conf_t *conf = two_routes("th_instance", "th_wrong_abi");
    dd_handler_t *hs[DD_CONF_ROUTE_MAX] = {0};

    ck_assert_int_ne(dd_routes_load_handlers(conf, hs, errstr, sizeof(errstr)), DD_OK);
    ck_assert_msg(strncmp(errstr, "route b: handler ", 17) == 0, "%s", errstr);
    ck_assert_ptr_nonnull(strstr(errstr, "th_wrong_abi.so was built for ABI version"));
    ck_assert_ptr_null(hs[0]);
    ck_assert_ptr_null(hs[1]);
    dd_conf_destroy(conf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("routes");
    TCase *tc = tcase_create("routes");

    tcase_add_test(tc, test_routes_compiled);
    tcase_add_test(tc, test_handlers_per_route);
    tcase_add_test(tc, test_handler_failure_named);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
