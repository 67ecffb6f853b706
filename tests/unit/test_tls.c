/*
 * Unit tests for the mysql.tls settings: the rules between them, checked
 * when the file is loaded with FILE:LINE errors, paths relative to the
 * config file, the environment overrides, and the connect errors explained.
 * No server is needed; tests/integration/ops/33-mysql-tls.sh connects.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_tls.h"
#include "check_run.h"

#define K_LINE "kafka = { brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"]; };\n"
#define D_LINE "dedup = { key = \"k:${id}\"; };\n"
#define H_LINE "handler = { path = \"h.so\"; };\n"
#define HEAD K_LINE D_LINE H_LINE /* three lines: mysql is on line 4 */

static char tmpdir[PATH_MAX];
static char confpath[PATH_MAX + 32];
static char errstr[1024];

static void write_file(const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    ck_assert_ptr_nonnull(fp = fopen(path, "w"));
    fputs(text, fp);
    fclose(fp);
}

static void setup(void)
{
    char made[PATH_MAX];

    snprintf(made, sizeof(made), "/tmp/dd_test_tls.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(made));
    ck_assert_ptr_nonnull(realpath(made, tmpdir));
    snprintf(confpath, sizeof(confpath), "%s/dedupd.conf", tmpdir);
    /* stand-ins: the loader only checks that they can be read */
    write_file("ca.pem", "ca\n");
    write_file("client.pem", "cert\n");
    write_file("client.key", "key\n");
    errstr[0] = '\0';
}

static void teardown(void)
{
    char cmd[PATH_MAX + 16];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* Loads HEAD + mysql_line; returns the conf or NULL with errstr set. */
static dd_conf_t *load(const char *mysql_line)
{
    char text[2048];
    dd_conf_t *conf = NULL;

    snprintf(text, sizeof(text), HEAD "%s\n", mysql_line);
    write_file("dedupd.conf", text);
    if (dd_conf_load(&conf, confpath, errstr, sizeof(errstr)) != DD_OK) return NULL;
    return conf;
}

/* Expects the load to fail with "FILE:4: setting SETTING: msg". */
static void load_fails(const char *mysql_line, const char *setting, const char *msg)
{
    char want[8192];

    snprintf(want, sizeof(want), "%s:4: setting %s: %s", confpath, setting, msg);
    ck_assert_ptr_null(load(mysql_line));
    ck_assert_str_eq(errstr, want);
}

START_TEST(test_defaults)
{
    dd_conf_t *conf = load("mysql = { database = \"db\"; };");

    ck_assert_msg(conf != NULL, "%s", errstr);
    ck_assert_int_eq(conf->shards[0].tls.mode, DD_TLS_REQUIRED);
    ck_assert_int_eq(conf->shards[0].tls.min_version, DD_TLS_V1_2);
    ck_assert_ptr_null(conf->shards[0].tls.ca);
    ck_assert_int_eq(dd_conf_tls_mode(&conf->shards[0]), DD_TLS_REQUIRED);
    dd_conf_destroy(conf);
}
END_TEST

/* Relative paths are the config directory's; the mode's case is free. */
START_TEST(test_paths_and_modes)
{
    char want[PATH_MAX + 32];
    dd_conf_t *conf = load("mysql = { database = \"db\"; tls = { mode = \"VERIFY_IDENTITY\"; "
                           "ca = \"ca.pem\"; cert = \"client.pem\"; key = \"client.key\"; "
                           "min_version = \"TLSv1.3\"; }; };");

    ck_assert_msg(conf != NULL, "%s", errstr);
    ck_assert_int_eq(conf->shards[0].tls.mode, DD_TLS_VERIFY_IDENTITY);
    ck_assert_int_eq(conf->shards[0].tls.min_version, DD_TLS_V1_3);
    snprintf(want, sizeof(want), "%s/ca.pem", tmpdir);
    ck_assert_str_eq(conf->shards[0].tls.ca, want);
    snprintf(want, sizeof(want), "%s/client.key", tmpdir);
    ck_assert_str_eq(conf->shards[0].tls.key, want);
    ck_assert_int_eq(conf->warning_cnt, 0);
    dd_conf_destroy(conf);
    ck_assert_int_eq(dd_conf_tls_mode_parse("verify_ca"), DD_TLS_VERIFY_CA);
    ck_assert_int_eq(dd_conf_tls_mode_parse("ssl"), -1);
    ck_assert_int_eq(dd_conf_tls_version_parse("TLSv1.1"), -1);
    ck_assert_str_eq(dd_conf_tls_mode_name(DD_TLS_PREFERRED), "preferred");
}
END_TEST

START_TEST(test_rules)
{
    load_fails("mysql = { database = \"db\"; tls = { mode = \"ssl\"; }; };", "mysql.tls.mode",
               "expected one of disabled|preferred|required|verify_ca|verify_identity, got "
               "\"ssl\"");
    load_fails("mysql = { database = \"db\"; tls = { mode = \"verify_ca\"; }; };", "mysql.tls.mode",
               "verify_ca needs mysql.tls.ca, the CA certificates the server's certificate "
               "must be signed by (for a publicly trusted certificate, the system's bundle, "
               "e.g. /etc/ssl/certs/ca-certificates.crt)");
    load_fails("mysql = { database = \"db\"; tls = { cert = \"client.pem\"; }; };",
               "mysql.tls.cert", "needs mysql.tls.key, the certificate's private key");
    load_fails("mysql = { database = \"db\"; tls = { key = \"client.key\"; }; };", "mysql.tls.key",
               "needs mysql.tls.cert, the certificate it belongs to");
    load_fails("mysql = { database = \"db\"; tls = { ca = \"ca.pem\"; }; };", "mysql.tls.ca",
               "is only used by verify_ca and verify_identity: under mysql.tls.mode required "
               "the server's certificate is not checked; set the mode to verify_identity (or "
               "verify_ca) to check it against this CA");
    load_fails("mysql = { database = \"db\"; tls = { mode = \"disabled\"; cert = \"client.pem\"; "
               "key = \"client.key\"; }; };",
               "mysql.tls.cert", "mysql.tls.mode is disabled, so it would not be used");
    load_fails("mysql = { database = \"db\"; tls = { min_version = \"TLSv1.0\"; }; };",
               "mysql.tls.min_version", "expected one of TLSv1.2|TLSv1.3, got \"TLSv1.0\"");
}
END_TEST

START_TEST(test_unreadable_file)
{
    char msg[PATH_MAX + 64];

    snprintf(msg, sizeof(msg), "cannot read %s/none.pem: No such file or directory", tmpdir);
    load_fails("mysql = { database = \"db\"; tls = { mode = \"verify_ca\"; ca = \"none.pem\"; }; "
               "};",
               "mysql.tls.ca", msg);
}
END_TEST

/* Over a unix socket no TLS is used: settings given anyway earn a warning. */
START_TEST(test_socket)
{
    dd_conf_t *conf = load("mysql = { database = \"db\"; socket = \"/run/m.sock\"; };");

    ck_assert_msg(conf != NULL, "%s", errstr);
    ck_assert_int_eq(dd_conf_tls_mode(&conf->shards[0]), DD_TLS_DISABLED);
    ck_assert_int_eq(conf->warning_cnt, 0);
    dd_conf_destroy(conf);
    conf = load("mysql = { database = \"db\"; socket = \"/run/m.sock\";\n"
                "  tls = { mode = \"verify_identity\"; ca = \"ca.pem\"; }; };");
    ck_assert_msg(conf != NULL, "%s", errstr);
    ck_assert_int_eq(conf->warning_cnt, 1);
    ck_assert_msg(strstr(conf->warnings[0], ":5: setting mysql.tls.mode: dedupd connects "
                                            "through the unix socket /run/m.sock"),
                  "%s", conf->warnings[0]);
    dd_conf_destroy(conf);
}
END_TEST

/* DEDUPD_MYSQL_TLS_* override the file, and errors name the variable. */
START_TEST(test_environment)
{
    dd_conf_t *conf;

    setenv("DEDUPD_MYSQL_TLS_MODE", "verify_ca", 1);
    setenv("DEDUPD_MYSQL_TLS_CA", "ca.pem", 1);
    setenv("DEDUPD_MYSQL_TLS_MIN_VERSION", "TLSv1.3", 1);
    conf = load("mysql = { database = \"db\"; tls = { mode = \"disabled\"; }; };");
    ck_assert_msg(conf != NULL, "%s", errstr);
    ck_assert_int_eq(conf->shards[0].tls.mode, DD_TLS_VERIFY_CA);
    ck_assert_int_eq(conf->shards[0].tls.min_version, DD_TLS_V1_3);
    ck_assert_ptr_nonnull(strstr(conf->shards[0].tls.ca, "/ca.pem"));
    dd_conf_destroy(conf);
    unsetenv("DEDUPD_MYSQL_TLS_CA");
    ck_assert_ptr_null(load("mysql = { database = \"db\"; };"));
    ck_assert_str_eq(errstr, "environment variable DEDUPD_MYSQL_TLS_MODE (setting "
                             "mysql.tls.mode): verify_ca needs mysql.tls.ca, the CA certificates "
                             "the server's certificate must be signed by (for a publicly "
                             "trusted certificate, the system's bundle, e.g. "
                             "/etc/ssl/certs/ca-certificates.crt)");
    unsetenv("DEDUPD_MYSQL_TLS_MODE");
    unsetenv("DEDUPD_MYSQL_TLS_MIN_VERSION");
}
END_TEST

/* Connector/C's TLS errors, said in terms of the settings. */
START_TEST(test_explain)
{
    dd_conf_t *conf = load("mysql = { database = \"db\"; host = \"db.example\"; tls = { mode = "
                           "\"verify_identity\"; ca = \"ca.pem\"; }; };");
    char out[512];

    ck_assert_msg(conf != NULL, "%s", errstr);
    ck_assert_ptr_null(dd_tls_explain(&conf->shards[0], 2003, "Can't connect", out, sizeof(out)));
    ck_assert_ptr_nonnull(dd_tls_explain(
        &conf->shards[0], 2026, "TLS/SSL error: Validation of SSL server certificate failed", out,
        sizeof(out)));
    ck_assert_msg(strstr(out, "does not name the host db.example"), "%s", out);
    dd_tls_explain(&conf->shards[0], 2026, "TLS/SSL error: unable to get local issuer certificate",
                   out, sizeof(out));
    ck_assert_msg(strstr(out, "could not be verified with the CA certificates in mysql.tls.ca"),
                  "%s", out);
    dd_tls_explain(&conf->shards[0], 2026,
                   "TLS/SSL error: SSL is required, but the server does not support it", out,
                   sizeof(out));
    ck_assert_msg(strstr(out, "the server offers no TLS"), "%s", out);
    dd_tls_explain(&conf->shards[0], 2026,
                   "TLS/SSL error: error:0A000102:SSL routines::unsupported protocol", out,
                   sizeof(out));
    ck_assert_msg(strstr(out, "no TLS version in common at or above mysql.tls.min_version"), "%s",
                  out);
    dd_conf_destroy(conf);
}
END_TEST

static Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("conf");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_paths_and_modes);
    tcase_add_test(tc, test_rules);
    tcase_add_test(tc, test_unreadable_file);
    tcase_add_test(tc, test_socket);
    tcase_add_test(tc, test_environment);
    tcase_add_test(tc, test_explain);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(tls_suite());
}
