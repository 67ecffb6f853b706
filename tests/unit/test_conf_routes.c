/*
 * Unit tests for the routes of a configuration (dd_conf_route.c): the one
 * default route of a file without routes, the elements of `routes` with
 * their values and defaults, every refusal with the exact FILE:LINE users
 * will see, and the topic lookup. Each test writes its file to a fresh
 * temporary directory; Check forks per test, so setenv() does not leak.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "check_run.h"
#include "conf_fixture.h"

#define K_LINE "kafka = { brokers = \"b:9092\"; group = \"g\"; };\n"
#define M_LINE "mysql = { database = \"db\"; };\n"
#define HEAD K_LINE M_LINE
/* A route on one line: name, topics, key, table, handler, then extras. */
#define ROUTE(name, topics, table, extra)                                                          \
    "  { name = \"" name "\"; topics = [" topics "]; key = \"k:${id}\"; table = \"" table          \
    "\"; handler = { path = \"h.so\"; }; " extra "}"

static void setup(void)
{
    conf_fixture_setup("conf_routes");
}

static void teardown(void)
{
    conf_fixture_teardown();
}

/* Loads text, expects failure with exactly want (every %s: the path). */
static void load_fails(const char *text, const char *want_fmt)
{
    char want[3 * PATH_MAX + 1024];
    int err;

    snprintf(want, sizeof(want), want_fmt, confpath, confpath, confpath);
    ck_assert_ptr_null(load(text, &err));
    ck_assert_int_eq(err, DD_ERR_CONFIG);
    ck_assert_str_eq(errstr, want);
}

/* Without routes, the top-level settings are the one route, "default",
 * with the same values the top-level fields hold. */
START_TEST(test_default_route)
{
    dd_conf_t *conf =
        load_ok("kafka = { brokers = \"b\"; group = \"g\"; topics = [\"p\", \"q\"]; };\n" M_LINE
                "dedup = { key = \"pay:${id}\"; table = \"t\"; ttl = \"2d\"; };\n"
                "handler = { path = \"/h.so\"; };\n"
                "dlq = { topic = \"dead\"; };\n");
    const dd_conf_route_t *r;
    char out[64];
    int other;

    ck_assert_int_eq(conf->has_routes, 0);
    ck_assert_int_eq(conf->route_cnt, 1);
    r = &conf->routes[0];
    ck_assert_str_eq(r->name, "default");
    ck_assert_int_eq(r->topic_cnt, 2);
    ck_assert_str_eq(r->topics[1], "q");
    ck_assert_str_eq(r->dedup.key, "pay:${id}");
    ck_assert_str_eq(r->dedup.table, "t");
    ck_assert_int_eq(r->dedup.ttl_s, 2 * 86400);
    ck_assert_str_eq(r->handler.path, "/h.so");
    ck_assert_str_eq(dd_conf_dlq_topic(r, "p", out, sizeof(out)), "dead");
    ck_assert_int_eq(dd_conf_route_find(conf, "q", &other), 0);
    ck_assert_int_eq(other, -1);
    ck_assert_int_eq(dd_conf_route_find(conf, "nope", &other), -1);
    ck_assert_int_eq(dd_conf_route_named(conf, "default"), 0);
    dd_conf_destroy(conf);
}
END_TEST

/* Two routes: each its own values, defaults where it says nothing,
 * handler paths relative to the file, topics by name and by pattern. */
START_TEST(test_two_routes)
{
    dd_conf_t *conf =
        load_ok(HEAD "routes = (\n"
                     "  { name = \"payments\"; topics = [\"payments\", \"refunds\"];\n"
                     "    key = \"pay:${m}:${o}\"; lane_key = \"${m}\"; table = "
                     "\"dedup_record\";\n"
                     "    hash = [\"amount\"];\n"
                     "    handler = { path = \"ledger.so\"; batch = false;\n"
                     "                config = { table_prefix = \"x_\"; }; };\n"
                     "    dlq = { topic = \"payments.dead\"; }; },\n"
                     "  { name = \"coupons\"; topics = [\"^coupons-.*\"];\n"
                     "    key = \"c:${id}\"; table = \"dedup_coupon\"; ttl = \"30d\";\n"
                     "    retry_failed = false; defer_claim = false;\n"
                     "    max_payload_bytes = 1000;\n"
                     "    handler = { path = \"/abs/coupon.so\"; "
                     "max_response_bytes = 128; }; }\n"
                     ");\n");
    const dd_conf_route_t *p, *c;
    char out[64], want[PATH_MAX + 64];
    int other;

    ck_assert_int_eq(conf->has_routes, 1);
    ck_assert_int_eq(conf->route_cnt, 2);
    p = &conf->routes[0];
    c = &conf->routes[1];
    ck_assert_str_eq(p->name, "payments");
    snprintf(want, sizeof(want), "%s:4", confpath);
    ck_assert_str_eq(p->where, want);
    ck_assert_str_eq(p->dedup.key, "pay:${m}:${o}");
    ck_assert_str_eq(p->dedup.lane_key, "${m}");
    ck_assert_int_eq(p->dedup.hash_cnt, 1);
    ck_assert_str_eq(p->dedup.hash[0], "amount");
    ck_assert_int_eq(p->dedup.ttl_s, 7 * 86400); /* the defaults of dedup.* */
    ck_assert_int_eq(p->dedup.retry_failed, 1);
    ck_assert_int_eq(p->dedup.defer_claim, 1);
    ck_assert_int_eq(p->handler.batch, 0);
    ck_assert_int_eq(p->handler.max_response_bytes, 65536);
    ck_assert_ptr_nonnull(p->handler.config);
    snprintf(want, sizeof(want), "%s/ledger.so", tmpdir);
    ck_assert_str_eq(p->handler.path, want);
    ck_assert_str_eq(dd_conf_dlq_topic(p, "refunds", out, sizeof(out)), "payments.dead");

    ck_assert_str_eq(c->name, "coupons");
    ck_assert_str_eq(c->dedup.table, "dedup_coupon");
    ck_assert_int_eq(c->dedup.ttl_s, 30 * 86400);
    ck_assert_int_eq(c->dedup.retry_failed, 0);
    ck_assert_int_eq(c->dedup.defer_claim, 0);
    ck_assert_int_eq(c->dedup.max_payload_bytes, 1000);
    ck_assert_ptr_null(c->dedup.lane_key);
    ck_assert_str_eq(c->handler.path, "/abs/coupon.so");
    ck_assert_int_eq(c->handler.batch, 1);
    ck_assert_int_eq(c->handler.max_response_bytes, 128);
    ck_assert_ptr_null(c->handler.config);
    ck_assert_str_eq(dd_conf_dlq_topic(c, "coupons-eu", out, sizeof(out)), "coupons-eu.dlq");

    ck_assert_int_eq(dd_conf_route_find(conf, "refunds", &other), 0);
    ck_assert_int_eq(dd_conf_route_find(conf, "coupons-eu", &other), 1);
    ck_assert_int_eq(other, -1);
    ck_assert_int_eq(dd_conf_route_find(conf, "coupons", NULL), -1); /* "^coupons-.*" */
    ck_assert_int_eq(dd_conf_route_named(conf, "coupons"), 1);
    ck_assert_int_eq(dd_conf_route_named(conf, "nope"), -1);
    dd_conf_destroy(conf);
}
END_TEST

/* Two patterns may overlap on topics that do not exist yet: the load takes
 * them, and the lookup says which two routes a topic matches. */
START_TEST(test_pattern_overlap_found)
{
    dd_conf_t *conf = load_ok(HEAD "routes = (\n" ROUTE("a", "\"^pay.*\"", "t1", "") ",\n" ROUTE(
        "b", "\"^[a-z].*s$\"", "t2", "") "\n);\n");
    int other;

    ck_assert_int_eq(dd_conf_route_find(conf, "payment", &other), 0);
    ck_assert_int_eq(other, -1);
    ck_assert_int_eq(dd_conf_route_find(conf, "coupons", &other), 1);
    ck_assert_int_eq(dd_conf_route_find(conf, "payments", &other), 0);
    ck_assert_int_eq(other, 1);
    dd_conf_destroy(conf);
}
END_TEST

/* Each refusal and its exact message; %s is the file's path. */
static const struct {
    const char *text;
    const char *want;
} bad_routes[] = {
    /* a topic in two routes, by name */
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t1", "") ",\n" ROUTE("b", "\"y\", \"x\"", "t2",
                                                                   "") "\n);\n",
     "%s:5: route b: setting topics: topic x is route a's too (%s:4: \"x\"): a topic belongs to "
     "one route"},
    /* ... by a name and another route's pattern, either way round */
    {HEAD
     "routes = (\n" ROUTE("a", "\"^x.*\"", "t1", "") ",\n" ROUTE("b", "\"xy\"", "t2", "") "\n);\n",
     "%s:5: route b: setting topics: topic xy matches route a's pattern (%s:4: \"^x.*\"): a "
     "topic belongs to one route"},
    {HEAD
     "routes = (\n" ROUTE("a", "\"x\"", "t1", "") ",\n" ROUTE("b", "\"^x$\"", "t2", "") "\n);\n",
     "%s:5: route b: setting topics: pattern ^x$ matches route a's topic (%s:4: \"x\"): a topic "
     "belongs to one route"},
    /* a topic in no route: kafka.topics beside routes names one */
    {"kafka = { brokers = \"b\"; group = \"g\"; topics = [\"x\", \"zz\"]; };\n" M_LINE
     "routes = (\n" ROUTE("a", "\"x\"", "t1", "") "\n);\n",
     "%s:1: setting kafka.topics: cannot be set beside routes (%s:3): dedupd consumes the topics "
     "the routes list (routes[].topics); topic zz is in no route"},
    /* two routes on one table */
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t1", "") ",\n" ROUTE("b", "\"y\"", "t1", "") "\n);\n",
     "%s:5: route b: setting table: route a (%s:4) has the dedup table t1 too; each route needs "
     "its own, or the keys of the two would meet"},
    /* ... or on tables equal but for case (one table under lower_case_table_names) */
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "dedup_a", "") ",\n" ROUTE("b", "\"y\"", "DEDUP_A",
                                                                        "") "\n);\n",
     "%s:5: route b: setting table: route a (%s:4) has the dedup table dedup_a, the same name but "
     "for case, which the server may not tell apart; each route needs its own, or the keys of "
     "the two would meet"},
    /* dedupd's own tables, and any name of theirs */
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "dedupd_schema", "") "\n);\n",
     "%s:4: route a: setting table: \"dedupd_schema\": names starting with dedupd_ (in any case) "
     "are dedupd's own tables; choose another"},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t",
                               "") ",\n" ROUTE("b", "\"y\"", "DedupD_Shard_Layout", "") "\n);\n",
     "%s:5: route b: setting table: \"DedupD_Shard_Layout\": names starting with dedupd_ (in any "
     "case) are dedupd's own tables; choose another"},
    {"kafka = { brokers = \"b\"; group = \"g\"; topics = [\"x\"]; };\n" M_LINE
     "dedup = { key = \"k:${id}\";\n  table = \"dedupd_later\"; };\nhandler = { path = \"h.so\"; "
     "};\n",
     "%s:4: setting dedup.table: \"dedupd_later\": names starting with dedupd_ (in any case) are "
     "dedupd's own tables; choose another"},
    /* duplicate names */
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t1", "") ",\n" ROUTE("a", "\"y\"", "t2", "") "\n);\n",
     "%s:5: route a: setting name: the route at %s:4 has this name too; route names must differ"},
    /* a route's dead letters into a route's topic */
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t1", "dlq = { topic = \"y\"; }; ") ",\n" ROUTE(
         "b", "\"^y\"", "t2", "") "\n);\n",
     "%s:4: route a: setting dlq.topic: y is a topic of route b (%s:5): its dead letters would "
     "be consumed again"},
    /* ... or its default dead letters ("<topic>.dlq"), into a pattern */
    {HEAD "routes = (\n" ROUTE("a", "\"pay\"", "t1", "") ",\n" ROUTE("b", "\"^pay[.]dlq$\"", "t2",
                                                                     "") "\n);\n",
     "%s:5: route b: setting topics: pattern ^pay[.]dlq$ matches pay.dlq, a dead-letter topic of "
     "route a (%s:4): dead letters would be consumed again"},
    /* ... into a name */
    {HEAD "routes = (\n" ROUTE("a", "\"pay\"", "t1", "") ",\n" ROUTE("b", "\"x\", \"pay.dlq\"",
                                                                     "t2", "") "\n);\n",
     "%s:5: route b: setting topics: topic pay.dlq is a dead-letter topic of route a (%s:4): dead "
     "letters would be consumed again"},
    /* ... a name whose topic a pattern matches */
    {HEAD "routes = (\n" ROUTE("a", "\"^pay-[a-z]+$\"", "t1", "") ",\n" ROUTE("b", "\"pay-eu.dlq\"",
                                                                              "t2", "") "\n);\n",
     "%s:5: route b: setting topics: topic pay-eu.dlq is a dead-letter topic of route a (%s:4): "
     "dead letters would be consumed again"},
    /* ... into the route itself */
    {HEAD "routes = (\n" ROUTE("a", "\"pay\",\n    \"^pay[.].*\"", "t1", "") "\n);\n",
     "%s:5: route a: setting topics: pattern ^pay[.].* matches pay.dlq, a dead-letter topic of "
     "route a (%s:4): dead letters would be consumed again"},
    /* ... and without routes */
    {"kafka = { brokers = \"b\"; group = \"g\";\n  topics = [\"pay\",\n  \"pay.dlq\"]; };\n" M_LINE
     "dedup = { key = \"k:${id}\"; };\nhandler = { path = \"h.so\"; };\n",
     "%s:3: setting kafka.topics: topic pay.dlq is a dead-letter topic of these topics "
     "(dlq.topic is unset: \"<topic>.dlq\"): dead letters would be consumed again"},
    /* a pattern matching Kafka's internal topics */
    {HEAD "routes = (\n" ROUTE("a", "\"x\", \"^.*s$\"", "t1", "") "\n);\n",
     "%s:4: route a: setting topics: pattern ^.*s$ matches __consumer_offsets, an internal topic "
     "of Kafka: make it match no topic starting with __"},
    {"kafka = { brokers = \"b\"; group = \"g\";\n  topics = [\"^_.*_state$\"]; };\n" M_LINE
     "dedup = { key = \"k:${id}\"; };\nhandler = { path = \"h.so\"; };\n",
     "%s:2: setting kafka.topics: pattern ^_.*_state$ matches __transaction_state, an internal "
     "topic of Kafka: make it match no topic starting with __"},
    /* names Kafka refuses: as a topic, as a dead-letter topic */
    {HEAD "routes = (\n" ROUTE("a", "\"x\", \"pay ments\"", "t1", "") "\n);\n",
     "%s:4: route a: setting topics: element 2: \"pay ments\" is not a topic name (1 to 249 of "
     "[A-Za-z0-9._-], not \".\" or \"..\"), nor a pattern (starting with ^)"},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t1", "\n    dlq = { topic = \"..\"; }; ") "\n);\n",
     "%s:5: route a: setting dlq.topic: \"..\" is not a topic name (1 to 249 of [A-Za-z0-9._-], "
     "not \".\" or \"..\")"},
    {"kafka = { brokers = \"b\"; group = \"g\"; topics = [\"x\"]; };\n" M_LINE
     "dedup = { key = \"k:${id}\"; };\nhandler = { path = \"h.so\"; };\ndlq = { topic = "
     "\"x/dead\"; };\n",
     "%s:5: setting dlq.topic: \"x/dead\" is not a topic name (1 to 249 of [A-Za-z0-9._-], not "
     "\".\" or \"..\")"},
    /* the top-level route settings beside routes */
    {HEAD "dedup = {\n  ttl = \"3d\";\n};\nroutes = (\n" ROUTE("a", "\"x\"", "t", "") "\n);\n",
     "%s:4: setting dedup.ttl: cannot be set beside routes (%s:6): each route has its own "
     "(routes[].ttl); a value here would be ambiguous"},
    {HEAD "handler = { path = \"h.so\"; };\nroutes = (\n" ROUTE("a", "\"x\"", "t", "") "\n);\n",
     "%s:3: setting handler: cannot be set beside routes (%s:4): each route has its own "
     "(routes[].handler); a value here would be ambiguous"},
    /* within one route, as at the top level, naming the route and the line */
    {HEAD "routes = (\n  { name = \"a\"; topics = [\"x\"]; key = \"k:${id}\";\n"
          "    handler = { path = \"h.so\"; }; }\n);\n",
     "%s:4: route a: missing required setting table"},
    {HEAD "routes = (\n  { name = \"a\"; topics = [\"x\"]; table = \"t\";\n"
          "    handler = { path = \"h.so\"; }; }\n);\n",
     "%s:4: route a: missing required setting key"},
    {HEAD "routes = (\n  { topics = [\"x\"]; key = \"k:${id}\"; table = \"t\";\n"
          "    handler = { path = \"h.so\"; }; }\n);\n",
     "%s:4: route #1: missing required setting name"},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t", "") ",\n  { name = \"b\"; topics = [\"y\"]; "
                                                      "key = \"k:${id}\"; table = \"u\"; }\n);\n",
     "%s:5: route b: missing required setting handler.path (or handler.sql, handler.http)"},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t", "\n    ttl = \"1ms\"; ") "\n);\n",
     "%s:5: route a: setting ttl: must be between 1s and 3650d, got 1ms"},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t", "\n    lane_key = \"${zz}\"; ") "\n);\n",
     "%s:5: route a: setting lane_key: ${zz} is not a field of key"},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "bad-table", "") "\n);\n",
     "%s:4: route a: setting table: expected a name matching [A-Za-z0-9_]{1,64}, got "
     "\"bad-table\""},
    {HEAD "routes = (\n" ROUTE("a b", "\"x\"", "t", "") "\n);\n",
     "%s:4: route a b: setting name: expected a name matching [A-Za-z0-9_.-]{1,64}, got \"a b\""},
    {HEAD "routes = (\n" ROUTE("a", "\"x\",\n    \"^y(\"", "t", "") "\n);\n",
     "%s:5: route a: setting topics: element 2: \"^y(\" is not a valid pattern: Unmatched ( or "
     "\\("},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t", "\n    colour = \"red\"; ") "\n);\n",
     "%s:5: route a: unknown setting colour"},
    {HEAD "routes = (\n" ROUTE("a", "\"x\"", "t", "\n    dedup = { ttl = \"1d\"; }; ") "\n);\n",
     "%s:5: route a: unknown setting dedup"},
    {HEAD "routes = (\n  { name = \"a\"; topics = [\"x\"]; key = \"k:${id}\"; table = \"t\";\n"
          "    handler = { path = \"h.so\"; colour = 1; }; }\n);\n",
     "%s:5: route a: unknown setting handler.colour"},
    {HEAD "routes = ();\n",
     "%s:3: setting routes: expected a list of one or more groups, ( { name = ...; topics = "
     "[...]; ... }, ... )"},
    {HEAD "routes = (\n  \"a\"\n);\n",
     "%s:4: setting routes: element 1: expected a group, { name = ...; topics = [...]; ... }"},
    {HEAD "routes = { name = \"a\"; };\n",
     "%s:3: setting routes: expected a list of one or more groups, ( { name = ...; topics = "
     "[...]; ... }, ... )"},
};

/* A dead-letter topic of a pattern's topics that another pattern matches
 * cannot be told when loading: known when such a topic is assigned. */
START_TEST(test_dlq_route)
{
    dd_conf_t *conf =
        load(HEAD "routes = (\n" ROUTE("a", "\"^pay-[a-z]+$\"", "t1", "") ",\n" ROUTE(
                 "b", "\"^pay-[a-z]+[.]dlq$\"", "t2",
                 "") ",\n" ROUTE("c", "\"c\"", "t3", "dlq = { topic = \"c-dead\"; }; ") "\n);\n",
             NULL);

    ck_assert_msg(conf != NULL, "%s", errstr);
    ck_assert_int_eq(dd_conf_route_find(conf, "pay-eu.dlq", NULL), 1);
    ck_assert_int_eq(dd_conf_dlq_route(conf, "pay-eu.dlq"), 0); /* route b must not take it */
    ck_assert_int_eq(dd_conf_dlq_route(conf, "pay-eu.dlq.dlq"), 1);
    ck_assert_int_eq(dd_conf_dlq_route(conf, "pay-eu"), -1);
    ck_assert_int_eq(dd_conf_dlq_route(conf, "c-dead"), 2);
    ck_assert_int_eq(dd_conf_dlq_route(conf, "c.dlq"), -1); /* c has its dlq.topic */
    ck_assert_int_eq(dd_conf_dlq_route(conf, ".dlq"), -1);
    dd_conf_destroy(conf);
}
END_TEST

/* A name Kafka takes, but whose "<name>.dlq" it does not: refused unless
 * the route has a dlq.topic. */
START_TEST(test_dlq_name_too_long)
{
    char name[247], text[1024];
    dd_conf_t *conf;
    int err;

    memset(name, 'x', 246);
    name[246] = '\0';
    snprintf(text, sizeof(text), HEAD "routes = (\n" ROUTE("a", "\"%s\"", "t1", "") "\n);\n", name);
    ck_assert_ptr_null(load(text, &err));
    ck_assert_int_eq(err, DD_ERR_CONFIG);
    ck_assert_msg(
        strstr(errstr,
               ":4: route a: setting topics: topic xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... "
               "(246 bytes) has no dead-letter topic") != NULL,
        "%s", errstr);
    snprintf(text, sizeof(text),
             HEAD
             "routes = (\n" ROUTE("a", "\"%s\"", "t1", "dlq = { topic = \"dead\"; }; ") "\n);\n",
             name);
    ck_assert_ptr_nonnull(conf = load(text, NULL));
    dd_conf_destroy(conf);
    name[245] = '\0'; /* "<name>.dlq" of 249 bytes */
    snprintf(text, sizeof(text), HEAD "routes = (\n" ROUTE("a", "\"%s\"", "t1", "") "\n);\n", name);
    ck_assert_ptr_nonnull(conf = load(text, NULL));
    dd_conf_destroy(conf);
}
END_TEST

START_TEST(test_bad_routes)
{
    load_fails(bad_routes[_i].text, bad_routes[_i].want);
}
END_TEST

/* With routes, the environment cannot set a top-level route setting: it
 * would be ignored, or be taken for every route. */
START_TEST(test_env_refused)
{
    char want[PATH_MAX + 512];
    int err;

    setenv("DEDUPD_DEDUP_TTL", "3d", 1);
    ck_assert_ptr_null(load(HEAD "routes = (\n" ROUTE("a", "\"x\"", "t", "") "\n);\n", &err));
    snprintf(want, sizeof(want),
             "environment variable DEDUPD_DEDUP_TTL (setting dedup.ttl): the configuration has "
             "routes (%s:3), and each route has its own (routes[].ttl), which the environment "
             "cannot set: unset the variable",
             confpath);
    ck_assert_str_eq(errstr, want);
    /* an empty one says nothing */
    setenv("DEDUPD_DEDUP_TTL", "", 1);
    dd_conf_destroy(load_ok(HEAD "routes = (\n" ROUTE("a", "\"x\"", "t", "") "\n);\n"));
    unsetenv("DEDUPD_DEDUP_TTL");
}
END_TEST

/* More routes than the process counts apart are refused at the list. */
START_TEST(test_too_many_routes)
{
    char text[16384], route[256], want[PATH_MAX + 256];
    size_t pos = (size_t)snprintf(text, sizeof(text), HEAD "routes = (\n");
    int err;

    for (int i = 0; i <= DD_CONF_ROUTE_MAX; i++) {
        snprintf(route, sizeof(route),
                 "%s{ name = \"r%d\"; topics = [\"t%d\"]; key = \"k:${id}\"; table = \"t%d\"; "
                 "handler = { path = \"h.so\"; }; }\n",
                 i ? "," : "", i, i, i);
        pos += (size_t)snprintf(text + pos, sizeof(text) - pos, "%s", route);
    }
    snprintf(text + pos, sizeof(text) - pos, ");\n");
    ck_assert_ptr_null(load(text, &err));
    snprintf(want, sizeof(want), "%s:3: setting routes: has %d routes, at most %d are allowed",
             confpath, DD_CONF_ROUTE_MAX + 1, DD_CONF_ROUTE_MAX);
    ck_assert_str_eq(errstr, want);
}
END_TEST

/* config/routes.conf, the example of two routes, loads. */
START_TEST(test_routes_example)
{
    const char *dir = getenv("DD_TEST_SRC_DIR");
    char path[PATH_MAX];
    dd_conf_t *conf = NULL;

    ck_assert_msg(dir != NULL, "DD_TEST_SRC_DIR is not set");
    snprintf(path, sizeof(path), "%s/config/routes.conf", dir);
    setenv("DEDUPD_MYSQL_PASSWORD", "example-pw", 1);
    ck_assert_msg(dd_conf_load(&conf, path, errstr, sizeof(errstr)) == 0, "%s", errstr);
    ck_assert_int_eq(conf->route_cnt, 2);
    ck_assert_str_eq(conf->routes[0].name, "payments");
    ck_assert_str_eq(conf->routes[0].dedup.table, "dedup_record");
    ck_assert_str_eq(conf->routes[1].name, "coupons");
    ck_assert_int_eq(dd_conf_route_find(conf, "coupons-eu", NULL), 1);
    ck_assert_int_eq(dd_conf_route_find(conf, "coupons.dlq", NULL), -1);
    ck_assert_int_eq(dd_conf_route_find(conf, "payments-eu", NULL), 0);
    dd_conf_destroy(conf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conf_routes");
    TCase *tc = tcase_create("routes");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_default_route);
    tcase_add_test(tc, test_two_routes);
    tcase_add_test(tc, test_pattern_overlap_found);
    tcase_add_test(tc, test_dlq_route);
    tcase_add_test(tc, test_dlq_name_too_long);
    tcase_add_loop_test(tc, test_bad_routes, 0, (int)DD_ARRAY_LEN(bad_routes));
    tcase_add_test(tc, test_env_refused);
    tcase_add_test(tc, test_too_many_routes);
    tcase_add_test(tc, test_routes_example);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
