/*
 * Unit tests for dedup.format and the schema_registry settings
 * (dd_conf_registry.c): the formats per route, an avro route without a
 * registry, credentials in the URL, the password from the environment or a
 * file (never in an error), the TLS files resolved. Each test writes its
 * file to a fresh temporary directory; Check forks per test, so setenv()
 * does not leak.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "check_run.h"
#include "conf_fixture.h"

#define HEAD                                                                                       \
    "kafka = { brokers = \"b:9092\"; group = \"g\"; topics = [\"p\"]; };\n"                        \
    "mysql = { database = \"db\"; };\n"                                                            \
    "handler = { path = \"h.so\"; };\n"
#define DEDUP(extra) "dedup = { key = \"k:${id}\"; " extra " };\n"

static void setup(void)
{
    conf_fixture_setup("conf_registry");
}

static void teardown(void)
{
    conf_fixture_teardown();
}

static void fails_with(const char *text, const char *part)
{
    int err;

    ck_assert_ptr_null(load(text, &err));
    ck_assert_int_eq(err, DD_ERR_CONFIG);
    ck_assert_msg(strstr(errstr, part), "error \"%s\" does not say \"%s\"", errstr, part);
}

START_TEST(test_formats)
{
    dd_conf_t *conf = load_ok(HEAD DEDUP(""));

    ck_assert_int_eq(conf->routes[0].dedup.format, DD_FORMAT_JSON);
    ck_assert_ptr_null(conf->schema_registry.url);
    dd_conf_destroy(conf);
    conf = load_ok(HEAD DEDUP("format = \"json_sr\";")); /* no registry needed */
    ck_assert_int_eq(conf->routes[0].dedup.format, DD_FORMAT_JSON_SR);
    dd_conf_destroy(conf);
    conf =
        load_ok("kafka = { brokers = \"b\"; group = \"g\"; };\nmysql = { database = \"d\"; };\n"
                "schema_registry = { url = \"http://r:8081/\"; };\n"
                "routes = ( { name = \"a\"; topics = [\"a\"]; key = \"k:${id}\"; table = \"ta\"; "
                "format = \"avro\"; handler = { path = \"h.so\"; }; },\n"
                "{ name = \"j\"; topics = [\"j\"]; key = \"k:${id}\"; table = \"tj\"; "
                "handler = { path = \"h.so\"; }; } );\n");
    ck_assert_int_eq(conf->routes[0].dedup.format, DD_FORMAT_AVRO);
    ck_assert_int_eq(conf->routes[1].dedup.format, DD_FORMAT_JSON);
    ck_assert_int_eq(conf->schema_registry.timeout_ms, 5000);
    ck_assert_str_eq(dd_conf_format_name(DD_FORMAT_JSON_SR), "json_sr");
    dd_conf_destroy(conf);
    fails_with(HEAD DEDUP("format = \"protobuf\";"), "json|avro|json_sr");
}
END_TEST

START_TEST(test_avro_needs_registry)
{
    fails_with(HEAD DEDUP("format = \"avro\";"),
               "avro needs the writer schemas: set schema_registry.url");
}
END_TEST

START_TEST(test_urls)
{
    fails_with(HEAD DEDUP("") "schema_registry = { url = \"ftp://r\"; };\n",
               "expected an http:// or https:// URL");
    fails_with(HEAD DEDUP("") "schema_registry = { url = \"https://u:secret@r\"; };\n",
               "credentials in the URL would be logged");
    fails_with(HEAD DEDUP("") "schema_registry = { url = \"https:///x\"; };\n", "no host");
    fails_with(HEAD DEDUP("") "schema_registry = { url = \"http://r/?a=1\"; };\n",
               "query or fragment");
    ck_assert_ptr_null(strstr(errstr, "secret"));
}
END_TEST

START_TEST(test_password)
{
    char path[PATH_MAX + 64], text[4 * PATH_MAX];
    dd_conf_t *conf;

    setenv("REG_PW", "s3cret-env", 1);
    conf = load_ok(HEAD DEDUP("") "schema_registry = { url = \"https://r\"; user = \"u\"; "
                                  "password_env = \"REG_PW\"; };\n");
    ck_assert_str_eq(conf->schema_registry.password, "s3cret-env");
    dd_conf_destroy(conf);
    snprintf(path, sizeof(path), "%s/reg.pw", tmpdir);
    write_file(path, "s3cret-file\n");
    snprintf(text, sizeof(text),
             HEAD DEDUP("") "schema_registry = { url = \"https://r\"; user = \"u\"; "
                            "password_file = \"reg.pw\"; tls = { ca = \"ca.pem\"; }; };\n");
    conf = load_ok(text);
    ck_assert_str_eq(conf->schema_registry.password, "s3cret-file");
    ck_assert_str_eq(conf->schema_registry.password_file, path);
    snprintf(path, sizeof(path), "%s/ca.pem", tmpdir);
    ck_assert_str_eq(conf->schema_registry.tls.ca, path);
    dd_conf_destroy(conf);
    fails_with(HEAD DEDUP("") "schema_registry = { url = \"https://r\"; user = \"u\"; "
                              "password = \"s3cret\"; password_env = \"REG_PW\"; };\n",
               "at most one of schema_registry.password");
    fails_with(
        HEAD DEDUP("") "schema_registry = { url = \"https://r\"; password = \"s3cret\"; };\n",
        "a registry password needs schema_registry.user");
    ck_assert_ptr_null(strstr(errstr, "s3cret"));
    fails_with(HEAD DEDUP("") "schema_registry = { url = \"https://r\"; user = \"u\"; "
                              "password_env = \"NO_SUCH_VAR_I34\"; };\n",
               "environment variable NO_SUCH_VAR_I34 is not set");
    fails_with(
        HEAD DEDUP("") "schema_registry = { url = \"https://r\"; tls = { cert = \"c\"; }; };\n",
        "tls.cert and tls.key go together");
}
END_TEST

/* Basic authentication over http:// only when the file says so, refused
 * at the file's line otherwise. */
START_TEST(test_cleartext_auth)
{
    dd_conf_t *conf;

    fails_with(HEAD DEDUP("") "schema_registry = { url = \"http://r:8081\";\n user = \"u\"; "
                              "password = \"s3cret\"; };\n",
               "dedupd.conf:6: setting schema_registry.user: user and password would cross the "
               "network in clear "
               "text to an http:// URL: use https://, or set schema_registry.cleartext_auth = "
               "true");
    ck_assert_ptr_null(strstr(errstr, "s3cret"));
    conf = load_ok(HEAD DEDUP("") "schema_registry = { url = \"http://r:8081\"; user = \"u\"; "
                                  "password = \"s3cret\"; cleartext_auth = true; };\n");
    ck_assert_int_eq(conf->schema_registry.cleartext_auth, 1);
    dd_conf_destroy(conf);
    conf = load_ok(HEAD DEDUP("") "schema_registry = { url = \"HTTPS://r\"; user = \"u\"; };\n");
    dd_conf_destroy(conf);
    conf = load_ok(HEAD DEDUP("") "schema_registry = { url = \"http://r\"; };\n");
    dd_conf_destroy(conf);
}
END_TEST

static Suite *conf_registry_suite(void)
{
    Suite *s = suite_create("conf_registry");
    TCase *tc = tcase_create("conf_registry");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_formats);
    tcase_add_test(tc, test_avro_needs_registry);
    tcase_add_test(tc, test_urls);
    tcase_add_test(tc, test_password);
    tcase_add_test(tc, test_cleartext_auth);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(conf_registry_suite());
}
