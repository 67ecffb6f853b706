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
#include "dd_json.h"
#include "dd_migrate.h"
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

/* A configuration of four shards over one route whose dedup group has
 * `extra`, written to dir (kept: a map may be written there). */
static dd_conf_t *sharded(const char *dir, const char *extra)
{
    dd_conf_t *conf = NULL;
    FILE *fp;

    snprintf(confpath, sizeof(confpath), "%s/dedupd.conf", dir);
    ck_assert_ptr_nonnull(fp = fopen(confpath, "w"));
    fprintf(fp,
            "kafka = { brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"]; };\n"
            "mysql = { database = \"db\"; shards = ( {}, {}, {}, {} ); };\n"
            "dedup = { key = \"k:${id}:${amount}\"; %s };\n"
            "handler = { path = \"h.so\"; };\n",
            extra);
    fclose(fp);
    ck_assert_msg(dd_conf_load(&conf, confpath, errstr, sizeof(errstr)) == 0, "%s", errstr);
    return conf;
}

/* The shard of payload json under route 0 of routes. */
static int shard_of(const dd_routes_t *routes, const char *json)
{
    dd_json_doc_t *doc = dd_json_doc_new();
    char why[256];
    int reason = 0, shard;

    ck_assert_int_eq(dd_json_parse(doc, json, strlen(json), why, sizeof(why)), 0);
    shard = dd_routes_shard(&routes->route[0], doc, "unused", 6, &reason, why, sizeof(why));
    dd_json_doc_destroy(doc);
    return shard;
}

/* A number in a shard key is rendered canonically: 1.50 hashes "1.5", as
 * 1.5 does, while the string "1.50" hashes as written. docs/SHARDS.md's
 * vectors: CRC32('1.5') % 4 = 2, CRC32('1.50') % 4 = 0, CRC32('100') % 4
 * = 2, CRC32('100.00') % 4 = 1. */
START_TEST(test_shard_key_numbers)
{
    char dir[PATH_MAX] = "/tmp/dd_test_routes.XXXXXX";
    dd_routes_t *routes = NULL;
    dd_conf_t *conf;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    conf = sharded(dir, "shard_key = \"${amount}\";");
    ck_assert_msg(dd_routes_new(&routes, conf, NULL, errstr, sizeof(errstr)) == DD_OK, "%s",
                  errstr);
    ck_assert_int_eq(shard_of(routes, "{\"id\":\"x\",\"amount\":1.50}"), 2);
    ck_assert_int_eq(shard_of(routes, "{\"id\":\"x\",\"amount\":1.5}"), 2);
    ck_assert_int_eq(shard_of(routes, "{\"id\":\"x\",\"amount\":15e-1}"), 2);
    ck_assert_int_eq(shard_of(routes, "{\"id\":\"x\",\"amount\":\"1.50\"}"), 0);
    ck_assert_int_eq(shard_of(routes, "{\"id\":\"x\",\"amount\":100.00}"), 2);
    ck_assert_int_eq(shard_of(routes, "{\"id\":\"x\",\"amount\":\"100.00\"}"), 1);
    dd_routes_destroy(routes);
    dd_conf_destroy(conf);
    unlink(confpath);
    rmdir(dir);
}
END_TEST

/* The routes use the map the configuration read (and the layout compares):
 * a map file changed in between is refused. */
START_TEST(test_shard_map_changed)
{
    char dir[PATH_MAX] = "/tmp/dd_test_routes.XXXXXX", map[PATH_MAX + 16];
    dd_routes_t *routes = (dd_routes_t *)1;
    dd_conf_t *conf;
    FILE *fp;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(map, sizeof(map), "%s/s.map", dir);
    ck_assert_ptr_nonnull(fp = fopen(map, "w"));
    fputs("0 99 0\n100 199 1\n", fp);
    fclose(fp);
    conf = sharded(dir, "shard_key = \"${id}\"; shard_by = \"map\"; shard_map = \"s.map\";");
    ck_assert_uint_eq(strlen(conf->routes[0].dedup.shard_map_digest), 64);
    ck_assert_ptr_nonnull(fp = fopen(map, "w"));
    fputs("0 99 1\n100 199 0\n", fp);
    fclose(fp);
    ck_assert_int_eq(dd_routes_new(&routes, conf, NULL, errstr, sizeof(errstr)), DD_ERR_CONFIG);
    ck_assert_ptr_null(routes);
    ck_assert_ptr_nonnull(strstr(errstr, "changed after the configuration was loaded"));
    dd_conf_destroy(conf);
    unlink(map);
    unlink(confpath);
    rmdir(dir);
}
END_TEST

/* What the recorded layout compares, from the configuration: the shard
 * key as parsed (the key's own template is the business key), the digest
 * of the map the configuration read, nothing per route with one shard. */
START_TEST(test_layout_of)
{
    static const struct {
        const char *extra, *shard_by, *shard_key;
    } v[] = {
        {"", "hash", ""},
        {"shard_key = \"${amount}\";", "hash", "${amount}"},
        {"shard_key = \"k:${id}:${amount}\";", "hash", ""},
        {"shard_key = \"${id}\"; shard_by = \"modulo\";", "modulo", "${id}"},
    };
    char dir[PATH_MAX] = "/tmp/dd_test_routes.XXXXXX", map[PATH_MAX + 16];
    dd_migrate_layout_t layout;
    dd_conf_t *conf;
    FILE *fp;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        conf = sharded(dir, v[i].extra);
        ck_assert_int_eq(dd_migrate_layout_of(conf, 3, &layout, errstr, sizeof(errstr)), DD_OK);
        ck_assert_int_eq(layout.shard, 3);
        ck_assert_int_eq(layout.shard_cnt, 4);
        ck_assert_int_eq(layout.route_cnt, 1);
        ck_assert_str_eq(layout.route[0].table, "dedup_record");
        ck_assert_str_eq(layout.route[0].shard_by, v[i].shard_by);
        ck_assert_str_eq(layout.route[0].shard_key, v[i].shard_key);
        ck_assert_str_eq(layout.route[0].map, "");
        dd_conf_destroy(conf);
    }
    snprintf(map, sizeof(map), "%s/s.map", dir);
    ck_assert_ptr_nonnull(fp = fopen(map, "w"));
    fputs("0 99 0\n100 199 1\n", fp);
    fclose(fp);
    conf = sharded(dir, "shard_key = \"${id}\"; shard_by = \"map\"; shard_map = \"s.map\";");
    ck_assert_int_eq(dd_migrate_layout_of(conf, 0, &layout, errstr, sizeof(errstr)), DD_OK);
    /* python3 -c 'import hashlib; print(hashlib.sha256(b"0 99 0\n100 199 1\n").hexdigest())' */
    ck_assert_str_eq(layout.route[0].map,
                     "5d2e891af54c76f6f3903bc590531896f93112120c1854b202be29b53acb2903");
    ck_assert_str_eq(layout.route[0].shard_by, "map");
    dd_conf_destroy(conf);
    unlink(map);
    unlink(confpath);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("routes");
    TCase *tc = tcase_create("routes");

    tcase_add_test(tc, test_routes_compiled);
    tcase_add_test(tc, test_handlers_per_route);
    tcase_add_test(tc, test_handler_failure_named);
    tcase_add_test(tc, test_shard_key_numbers);
    tcase_add_test(tc, test_shard_map_changed);
    tcase_add_test(tc, test_layout_of);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
