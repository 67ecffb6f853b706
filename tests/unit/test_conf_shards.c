/*
 * Unit tests for the database shards of a configuration
 * (dd_conf_shard.c): the one shard of a file without mysql.shards, the
 * elements inheriting the mysql group's settings, every refusal with the
 * FILE:LINE users will see, and the routing settings of a route
 * (dedup.shard_key, shard_by, shard_map).
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
#include "dd_key.h"
#include "dd_shard.h"
#include "check_run.h"
#include "conf_fixture.h"

#define K_LINE "kafka = { brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"]; };\n"
#define D_LINE "dedup = { key = \"k:${m}:${id}\"; };\nhandler = { path = \"h.so\"; };\n"

static char mappath[PATH_MAX + 32];

static void setup(void)
{
    conf_fixture_setup("conf_shards");
    snprintf(mappath, sizeof(mappath), "%s/shards.map", tmpdir);
}

static void teardown(void)
{
    conf_fixture_teardown();
}

/* Without mysql.shards, the mysql group is shard 0. */
START_TEST(test_one_shard)
{
    dd_conf_t *conf = load_ok(K_LINE "mysql = {\n  host = \"db1\";\n  database = \"pay\";\n"
                                     "  password = \"pw\";\n};\n" D_LINE);

    ck_assert_int_eq(conf->shard_cnt, 1);
    ck_assert_str_eq(conf->shards[0].host, "db1");
    ck_assert_str_eq(conf->shards[0].database, "pay");
    ck_assert_str_eq(conf->shards[0].password, "pw");
    ck_assert_int_eq(conf->shards[0].port, 3306);
    ck_assert_int_eq(conf->routes[0].dedup.shard_by, DD_SHARD_HASH);
    ck_assert_ptr_null(conf->routes[0].dedup.shard_key);
    ck_assert_int_eq(conf->shard_check, DD_SHARD_CHECK_AUTO);
    dd_conf_destroy(conf);
}
END_TEST

/* mysql.shard_check: auto (the default) and the three fixed behaviours,
 * each with its name back. */
START_TEST(test_shard_check_values)
{
    static const struct {
        const char *name;
        int check;
    } values[] = {{"auto", DD_SHARD_CHECK_AUTO},
                  {"skip", DD_SHARD_CHECK_SKIP},
                  {"wait", DD_SHARD_CHECK_WAIT},
                  {"off", DD_SHARD_CHECK_OFF}};
    char text[256];

    for (size_t i = 0; i < DD_ARRAY_LEN(values); i++) {
        dd_conf_t *conf;
        snprintf(text, sizeof(text),
                 K_LINE "mysql = {\n  database = \"d\";\n  shard_check = \"%s\";\n};\n" D_LINE,
                 values[i].name);
        conf = load_ok(text);
        ck_assert_int_eq(conf->shard_check, values[i].check);
        ck_assert_str_eq(dd_conf_shard_check_name(conf->shard_check), values[i].name);
        dd_conf_destroy(conf);
    }
}
END_TEST

/* Each element has the group's settings it does not set. */
START_TEST(test_shards_inherit)
{
    dd_conf_t *conf;
    char want[PATH_MAX + 64];

    setenv("DD_TEST_SHARD_PW", "envpw", 1);
    conf = load_ok(K_LINE "mysql = {\n"
                          "  user = \"app\";\n"
                          "  password = \"shared\";\n"
                          "  database = \"pay\";\n"
                          "  tls = { mode = \"disabled\"; };\n"
                          "  shard_check = \"wait\";\n"
                          "  shards = (\n"
                          "    { host = \"10.0.0.1\"; },\n"
                          "    { host = \"10.0.0.2\"; port = 3307; database = \"pay2\"; },\n"
                          "    { socket = \"/run/s.sock\"; password_env = \"DD_TEST_SHARD_PW\"; "
                          "tls = { mode = \"preferred\"; }; }\n"
                          "  );\n"
                          "};\n" D_LINE);
    ck_assert_int_eq(conf->shard_cnt, 3);
    ck_assert_str_eq(conf->shards[0].host, "10.0.0.1");
    ck_assert_str_eq(conf->shards[0].user, "app");
    ck_assert_str_eq(conf->shards[0].password, "shared");
    ck_assert_str_eq(conf->shards[0].database, "pay");
    ck_assert_int_eq(conf->shards[0].port, 3306);
    ck_assert_int_eq(conf->shards[0].tls.mode, DD_TLS_DISABLED);
    ck_assert_str_eq(conf->shards[1].host, "10.0.0.2");
    ck_assert_int_eq(conf->shards[1].port, 3307);
    ck_assert_str_eq(conf->shards[1].database, "pay2");
    ck_assert_str_eq(conf->shards[2].host, "127.0.0.1");
    ck_assert_str_eq(conf->shards[2].socket, "/run/s.sock");
    ck_assert_str_eq(conf->shards[2].password, "envpw");
    ck_assert_str_eq(conf->shards[2].password_env, "DD_TEST_SHARD_PW");
    ck_assert_int_eq(conf->shards[2].tls.mode, DD_TLS_PREFERRED);
    ck_assert_int_eq(conf->shard_check, DD_SHARD_CHECK_WAIT);
    snprintf(want, sizeof(want), "%s:10", confpath);
    ck_assert_str_eq(conf->shards[1].where, want);
    dd_conf_destroy(conf);
}
END_TEST

/* A shard that sets host is reached over TCP, not through the group's
 * socket; one that sets nothing of its address keeps the socket; and the
 * timeouts are inherited like the rest. */
START_TEST(test_shard_host_over_socket)
{
    dd_conf_t *conf = load_ok(K_LINE "mysql = {\n"
                                     "  socket = \"/run/group.sock\";\n"
                                     "  database = \"pay\";\n"
                                     "  read_timeout = \"7s\";\n"
                                     "  shards = (\n"
                                     "    { database = \"pay0\"; },\n"
                                     "    { host = \"10.0.0.2\"; write_timeout = \"3s\"; },\n"
                                     "    { host = \"10.0.0.3\"; socket = \"/run/s3.sock\"; }\n"
                                     "  );\n"
                                     "};\n" D_LINE);
    char addr[300];

    ck_assert_str_eq(conf->shards[0].socket, "/run/group.sock");
    ck_assert_ptr_null(conf->shards[1].socket);
    ck_assert_str_eq(conf->shards[1].host, "10.0.0.2");
    ck_assert_str_eq(dd_conf_mysql_addr(&conf->shards[1], addr, sizeof(addr)), "10.0.0.2:3306");
    ck_assert_str_eq(conf->shards[2].socket, "/run/s3.sock");
    ck_assert_int_eq(conf->shards[1].read_timeout_s, 7);
    ck_assert_int_eq(conf->shards[1].write_timeout_s, 3);
    ck_assert_int_eq(conf->shards[0].write_timeout_s, 20);
    dd_conf_destroy(conf);
}
END_TEST

static const struct {
    const char *text;
    const char *want; /* %s: the path */
} bad_shards[] = {
    {K_LINE "mysql = {\n  database = \"d\";\n  shards = (\n    { host = \"a\"; },\n"
            "    { hots = \"b\"; }\n  );\n};\n" D_LINE,
     "%s:6: shard 1: unknown setting hots"},
    {K_LINE
     "mysql = {\n  database = \"d\";\n  shards = (\n    { port = 70000; }\n  );\n};\n" D_LINE,
     "%s:5: shard 0: setting port: must be between 1 and 65535, got 70000"},
    {K_LINE "mysql = {\n  database = \"d\";\n  shards = (\n    { shards = (); }\n  );\n};\n" D_LINE,
     "%s:5: shard 0: unknown setting shards"},
    {K_LINE "mysql = {\n  database = \"d\";\n  shards = ();\n};\n" D_LINE,
     "%s:4: setting mysql.shards: expected a list of one or more groups, ( { host = ...; }, ... )"},
    {K_LINE "mysql = {\n  database = \"d\";\n  shards = ( \"a\" );\n};\n" D_LINE,
     "%s:4: setting mysql.shards: element 1: expected a group, { host = ...; ... }"},
    {K_LINE "mysql = {\n  database = \"d\";\n  shards = (\n    { password = \"a\"; "
            "password_env = \"B\"; }\n  );\n};\n" D_LINE,
     "%s:5: shard 0: setting password_env: at most one of mysql.password, mysql.password_env and "
     "mysql.password_file may be set"},
    {K_LINE "mysql = {\n  database = \"d\";\n  shards = (\n    { tls = { mode = \"verify_ca\"; "
            "}; }\n  );\n};\n" D_LINE,
     "%s:5: shard 0: setting tls.mode: verify_ca needs mysql.tls.ca, the CA certificates the "
     "server's certificate must be signed by (for a publicly trusted certificate, the system's "
     "bundle, e.g. /etc/ssl/certs/ca-certificates.crt)"},
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_key = \"${x}\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_key: ${x} is not a field of dedup.key"},
    /* the key holds the text ${merchant_id}, not the field */
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"pay$${merchant_id}:${order_no}\";\n"
            "  shard_key = \"${merchant_id}\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_key: ${merchant_id} is not a field of dedup.key"},
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_key = \"$${m}\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_key: key template has no ${path} placeholder: every message "
     "would get the same key"},
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_by = \"map\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_by: map needs dedup.shard_map, the file of ranges"},
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_by = \"range\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_by: expected one of hash|modulo|map, got \"range\""},
    /* modulo and map read a number: literal text would make every key invalid */
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_by = \"modulo\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_by: modulo reads the shard key as a number, and without "
     "dedup.shard_key it is dedup.key, whose literal text holds 'k': every message would be "
     "dead-lettered shard_key_invalid (set dedup.shard_key to the numeric field)"},
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_key = \"m${m}\";\n"
            "  shard_by = \"modulo\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_key: shard_by modulo reads the shard key as a number, but the "
     "literal text of dedup.shard_key holds 'm': every message would be dead-lettered "
     "shard_key_invalid"},
    {K_LINE "mysql = {\n  database = \"d\";\n  shard_check = \"never\";\n};\n" D_LINE,
     "%s:4: setting mysql.shard_check: expected one of auto|skip|wait|off, got \"never\""},
    {K_LINE "mysql = {\n  database = \"d\";\n  shards = (\n    { shard_check = \"off\"; }\n"
            "  );\n};\n" D_LINE,
     "%s:5: shard 0: unknown setting shard_check"},
    {K_LINE "mysql = { database = \"d\"; };\n"
            "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_map = \"x.map\";\n};\n"
            "handler = { path = \"h.so\"; };\n",
     "%s:5: setting dedup.shard_map: is only used with dedup.shard_by map"},
};

START_TEST(test_bad_shards)
{
    char want[3 * PATH_MAX + 1024];
    int err;

    snprintf(want, sizeof(want), bad_shards[_i].want, confpath);
    ck_assert_ptr_null(load(bad_shards[_i].text, &err));
    ck_assert_int_eq(err, DD_ERR_CONFIG);
    ck_assert_str_eq(errstr, want);
}
END_TEST

START_TEST(test_too_many_shards)
{
    char text[8192] = K_LINE "mysql = {\n  database = \"d\";\n  shards = (";
    char want[PATH_MAX + 128];
    int err;

    for (int i = 0; i <= DD_CONF_SHARD_MAX; i++)
        strcat(text, i ? ", {}" : "{}");
    strcat(text, ");\n};\n" D_LINE);
    snprintf(want, sizeof(want),
             "%s:4: setting mysql.shards: has 65 shards, at most 64 are allowed", confpath);
    ck_assert_ptr_null(load(text, &err));
    ck_assert_str_eq(errstr, want);
}
END_TEST

/* A route's map is read when the file is loaded, against the shard count. */
START_TEST(test_route_map)
{
    dd_conf_t *conf;
    char want[2 * PATH_MAX + 256];
    int err;
    const char *text = K_LINE "mysql = {\n  database = \"d\";\n  shards = ( {}, {} );\n};\n"
                              "dedup = {\n  key = \"k:${m}:${id}\";\n  shard_key = \"${m}\";\n"
                              "  shard_by = \"map\";\n  shard_map = \"shards.map\";\n};\n"
                              "handler = { path = \"h.so\"; };\n";

    write_file(mappath, "0 99 0\n100 199 1\n");
    conf = load_ok(text);
    ck_assert_int_eq(conf->shard_cnt, 2);
    ck_assert_int_eq(conf->routes[0].dedup.shard_by, DD_SHARD_MAP);
    ck_assert_str_eq(conf->routes[0].dedup.shard_key, "${m}");
    ck_assert_str_eq(conf->routes[0].dedup.shard_map, mappath);
    dd_conf_destroy(conf);

    write_file(mappath, "0 99 0\n100 199 2\n");
    ck_assert_ptr_null(load(text, &err));
    snprintf(want, sizeof(want),
             "%s:10: setting dedup.shard_map: %s:2: shard 2 does not exist: the configuration has "
             "2 (0..1)",
             confpath, mappath);
    ck_assert_str_eq(errstr, want);

    /* a map of comments only would dead-letter every message */
    write_file(mappath, "# moved to the new servers\n\n");
    ck_assert_ptr_null(load(text, &err));
    snprintf(want, sizeof(want),
             "%s:10: setting dedup.shard_map: %s has no range, only blank lines and comments: "
             "every message would be dead-lettered shard_unmapped",
             confpath, mappath);
    ck_assert_str_eq(errstr, want);
}
END_TEST

/*
 * The field checks against rendering. For random templates (literal text,
 * "$$", literal "$${a}", fields), a lane or shard key is accepted exactly
 * when every field whose value changes what it renders also changes what
 * the business key renders: two messages with one key then have one lane
 * and one shard.
 */

static const char *const prop_fields[] = {"a", "b", "c", "d.e", "arr[1]"};
static const char *const prop_lits[] = {":", "-", "x", "$$", "$${a}", "$${b}", "$${d.e}", "pay$$:"};
/* The payload, and one with each field of prop_fields changed. */
static const char prop_base[] = "{\"a\":\"va\",\"b\":\"vb\",\"c\":7,\"d\":{\"e\":\"ve\"},"
                                "\"arr\":[\"z0\",\"z1\"]}";
static const char *const prop_changed[] = {
    "{\"a\":\"VA\",\"b\":\"vb\",\"c\":7,\"d\":{\"e\":\"ve\"},\"arr\":[\"z0\",\"z1\"]}",
    "{\"a\":\"va\",\"b\":\"VB\",\"c\":7,\"d\":{\"e\":\"ve\"},\"arr\":[\"z0\",\"z1\"]}",
    "{\"a\":\"va\",\"b\":\"vb\",\"c\":7.5,\"d\":{\"e\":\"ve\"},\"arr\":[\"z0\",\"z1\"]}",
    "{\"a\":\"va\",\"b\":\"vb\",\"c\":7,\"d\":{\"e\":\"VE\"},\"arr\":[\"z0\",\"z1\"]}",
    "{\"a\":\"va\",\"b\":\"vb\",\"c\":7,\"d\":{\"e\":\"ve\"},\"arr\":[\"z0\",\"Z1\"]}",
};

/* A random template: literals and up to three fields, a literal between
 * two fields (else it does not compile, which is not what is tested). */
static void prop_tmpl(unsigned *seed, char *out, size_t out_size)
{
    int fields = rand_r(seed) % 4;
    size_t len = 0;

    out[0] = '\0';
    if (rand_r(seed) % 2)
        len += (size_t)snprintf(out + len, out_size - len, "%s",
                                prop_lits[rand_r(seed) % DD_ARRAY_LEN(prop_lits)]);
    for (int i = 0; i < fields; i++) {
        len += (size_t)snprintf(out + len, out_size - len, "${%s}",
                                prop_fields[rand_r(seed) % DD_ARRAY_LEN(prop_fields)]);
        if (i + 1 < fields || rand_r(seed) % 2)
            len += (size_t)snprintf(out + len, out_size - len, "%s",
                                    prop_lits[rand_r(seed) % DD_ARRAY_LEN(prop_lits)]);
    }
    if (len == 0) snprintf(out, out_size, "static");
}

/* What text renders over payload json; "" when it does not render. */
static void prop_render(const dd_key_tmpl_t *tmpl, const char *json, char out[DD_KEY_MAX + 1])
{
    dd_json_doc_t *doc = dd_json_doc_new();
    char why[128];
    size_t len;

    ck_assert_int_eq(dd_json_parse(doc, json, strlen(json), why, sizeof(why)), 0);
    if (dd_key_render(tmpl, doc, out, &len, why, sizeof(why)) != DD_KEY_OK) out[0] = '\0';
    dd_json_doc_destroy(doc);
}

/* Bit i: changing field i changes what text renders (-1: no template). */
static int prop_depends(const char *text)
{
    char base[DD_KEY_MAX + 1], other[DD_KEY_MAX + 1], err[256];
    dd_key_tmpl_t *tmpl = NULL;
    int bits = 0;

    if (dd_key_tmpl_new(&tmpl, text, err, sizeof(err)) != 0) return -1;
    prop_render(tmpl, prop_base, base);
    for (size_t i = 0; i < DD_ARRAY_LEN(prop_changed); i++) {
        prop_render(tmpl, prop_changed[i], other);
        if (strcmp(base, other) != 0) bits |= 1 << i;
    }
    dd_key_tmpl_destroy(tmpl);
    return bits;
}

START_TEST(test_key_fields_property)
{
    unsigned seed = 29;
    int accepted = 0, refused = 0;

    for (int n = 0; n < 600; n++) {
        char key[128], sub[128], text[1024];
        const char *setting = n % 2 ? "lane_key" : "shard_key";
        dd_conf_t *conf;
        int err, kdep, sdep, want;

        prop_tmpl(&seed, key, sizeof(key));
        prop_tmpl(&seed, sub, sizeof(sub));
        kdep = prop_depends(key);
        sdep = prop_depends(sub);
        if (kdep < 0) continue; /* a key without a field: refused for itself */
        want = sdep >= 0 && (sdep & ~kdep) == 0;
        snprintf(text, sizeof(text),
                 K_LINE
                 "mysql = { database = \"d\"; shards = ( {}, {} ); };\n"
                 "dedup = { key = \"%s\"; %s = \"%s\"; };\nhandler = { path = \"h.so\"; };\n",
                 key, setting, sub);
        conf = load(text, &err);
        ck_assert_msg((err == 0) == want, "key \"%s\", %s \"%s\": %s (rendering says %s)", key,
                      setting, sub, err ? errstr : "accepted", want ? "accept" : "refuse");
        dd_conf_destroy(conf);
        accepted += want;
        refused += !want;
    }
    /* both answers were tried many times */
    ck_assert_int_gt(accepted, 30);
    ck_assert_int_gt(refused, 30);
}
END_TEST

START_TEST(test_route_shard_settings)
{
    dd_conf_t *conf =
        load_ok("kafka = { brokers = \"b:9092\"; group = \"g\"; };\n"
                "mysql = { database = \"d\"; shards = ( {}, {}, {} ); };\n"
                "routes = (\n"
                "  { name = \"a\"; topics = [\"t1\"]; key = \"k:${m}:${id}\"; table = \"ta\"; "
                "handler = { path = \"h.so\"; }; shard_key = \"${m}\"; shard_by = \"modulo\"; },\n"
                "  { name = \"b\"; topics = [\"t2\"]; key = \"k:${m}:${id}\"; table = \"tb\"; "
                "handler = { path = \"h.so\"; }; }\n"
                ");\n");

    ck_assert_int_eq(conf->routes[0].dedup.shard_by, DD_SHARD_MODULO);
    ck_assert_str_eq(conf->routes[0].dedup.shard_key, "${m}");
    ck_assert_int_eq(conf->routes[1].dedup.shard_by, DD_SHARD_HASH);
    ck_assert_ptr_null(conf->routes[1].dedup.shard_key);
    dd_conf_destroy(conf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conf_shards");
    TCase *tc = tcase_create("shards");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_one_shard);
    tcase_add_test(tc, test_shards_inherit);
    tcase_add_test(tc, test_shard_host_over_socket);
    tcase_add_test(tc, test_shard_check_values);
    tcase_add_loop_test(tc, test_bad_shards, 0, (int)DD_ARRAY_LEN(bad_shards));
    tcase_add_test(tc, test_too_many_shards);
    tcase_add_test(tc, test_route_map);
    tcase_add_test(tc, test_key_fields_property);
    tcase_add_test(tc, test_route_shard_settings);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
