/*
 * Unit tests for dd_conf: every kind of value and every kind of error, with
 * the exact FILE:LINE users will see. Each test writes its config to a fresh
 * temporary directory; Check forks per test, so setenv() does not leak.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_log.h"
#include "dd_offsets.h"
#include "dd_source.h"
#include "check_run.h"
#include "conf_fixture.h"

/* The smallest valid file: four lines, required settings only. */
#define K_LINE "kafka = { brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"]; };\n"
#define M_LINE "mysql = { database = \"db\"; };\n"
#define D_LINE "dedup = { key = \"k:${id}\"; };\n"
#define H_LINE "handler = { path = \"h.so\"; };\n"
#define MIN K_LINE M_LINE D_LINE H_LINE

static void setup(void)
{
    conf_fixture_setup("conf");
}

extern char **environ;

/* Check forks per test, but with CK_FORK=no the variables would leak. */
static void unset_test_env(void)
{
    char name[256];

    for (int i = 0; environ[i];) {
        if (strncmp(environ[i], "DEDUPD_", 7) != 0 && strncmp(environ[i], "DD_TEST_PW", 10) != 0) {
            i++;
            continue;
        }
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(environ[i], "="), environ[i]);
        unsetenv(name);
    }
}

static void teardown(void)
{
    unset_test_env();
    conf_fixture_teardown();
}

/* Loads text, expects failure with exactly fmt (its %s is the file path). */
static void load_fails(const char *text, const char *fmt)
{
    char want[2048];
    int err;

    snprintf(want, sizeof(want), fmt, confpath);
    ck_assert_ptr_null(load(text, &err));
    ck_assert_int_eq(err, DD_ERR_CONFIG);
    ck_assert_str_eq(errstr, want);
}

START_TEST(test_full)
{
    dd_conf_t *conf;
    char path[PATH_MAX + 64];

    conf = load_ok("kafka = {\n"
                   "  brokers = \"k1:9092,k2:9092\";\n"
                   "  group = \"grp\";\n"
                   "  topics = [\"a\", \"b\"];\n"
                   "  properties = [\"session.timeout.ms=6000\", \"client.id=x\"];\n"
                   "};\n"
                   "mysql = { host = \"db.local\"; port = 3307; socket = \"/run/m.sock\";\n"
                   "  user = \"u\"; password = \"pw\"; database = \"pay\";\n"
                   "  connect_timeout = 7; };\n"
                   "dedup = { key = \"p:${a.b[0]}\"; hash = [\"a\", \"b.c\"]; ttl = \"36h\";\n"
                   "  table = \"Dedup_2\"; retry_failed = false; max_payload_bytes = 2048L; };\n"
                   "handler = { path = \"/opt/h.so\"; config = { prefix = \"x_\"; n = 3; }; };\n"
                   "dlq = { topic = \"dead\"; };\n"
                   "batch = { max_messages = 100; max_wait_ms = 0; max_inflight = 100; };\n"
                   "retry = { backoff_initial = \"250ms\"; backoff_max = \"1m\";\n"
                   "  max_attempts = 5; };\n"
                   "workers = 8;\n"
                   "shutdown_timeout = \"1m30s\";\n"
                   "http = { listen = \"[::1]:9464\"; };\n"
                   "log = { level = \"debug\"; format = \"json\"; };\n"
                   "purge = { interval = \"0\"; batch = 50; };\n");
    ck_assert_str_eq(conf->path, confpath);
    ck_assert_str_eq(conf->dir, tmpdir);
    ck_assert_str_eq(conf->kafka.brokers, "k1:9092,k2:9092");
    ck_assert_str_eq(conf->kafka.group, "grp");
    ck_assert_int_eq(conf->routes[0].topic_cnt, 2);
    ck_assert_str_eq(conf->routes[0].topics[0], "a");
    ck_assert_str_eq(conf->routes[0].topics[1], "b");
    ck_assert_int_eq(conf->kafka.property_cnt, 2);
    ck_assert_str_eq(conf->kafka.properties[1], "client.id=x");
    ck_assert_str_eq(conf->shards[0].host, "db.local");
    ck_assert_int_eq(conf->shards[0].port, 3307);
    ck_assert_str_eq(conf->shards[0].socket, "/run/m.sock");
    ck_assert_str_eq(conf->shards[0].user, "u");
    ck_assert_str_eq(conf->shards[0].password, "pw");
    ck_assert_str_eq(conf->shards[0].database, "pay");
    ck_assert_int_eq(conf->shards[0].connect_timeout_s, 7);
    ck_assert_str_eq(conf->routes[0].dedup.key, "p:${a.b[0]}");
    ck_assert_int_eq(conf->routes[0].dedup.hash_cnt, 2);
    ck_assert_str_eq(conf->routes[0].dedup.hash[1], "b.c");
    ck_assert_int_eq(conf->routes[0].dedup.ttl_s, 36 * 3600);
    ck_assert_str_eq(conf->routes[0].dedup.table, "Dedup_2");
    ck_assert_int_eq(conf->routes[0].dedup.retry_failed, 0);
    ck_assert_int_eq(conf->routes[0].dedup.max_payload_bytes, 2048);
    ck_assert_str_eq(conf->routes[0].handler.path, "/opt/h.so");
    ck_assert_ptr_nonnull(conf->routes[0].handler.config);
    ck_assert_int_eq(config_setting_length(conf->routes[0].handler.config), 2);
    ck_assert_str_eq(config_setting_get_string(
                         config_setting_get_member(conf->routes[0].handler.config, "prefix")),
                     "x_");
    ck_assert_str_eq(conf->routes[0].dlq.topic, "dead");
    ck_assert_str_eq(dd_conf_dlq_topic(&conf->routes[0], "payments", path, sizeof(path)), "dead");
    ck_assert_int_eq(conf->batch.max_messages, 100);
    ck_assert_int_eq(conf->batch.max_wait_ms, 0);
    ck_assert_int_eq(conf->batch.max_inflight, 100);
    ck_assert_int_eq(conf->retry.backoff_initial_ms, 250);
    ck_assert_int_eq(conf->retry.backoff_max_ms, 60000);
    ck_assert_int_eq(conf->retry.max_attempts, 5);
    ck_assert_int_eq(conf->workers, 8);
    ck_assert_int_eq(conf->shutdown_timeout_ms, 90000);
    ck_assert_str_eq(conf->http.listen, "[::1]:9464");
    ck_assert_int_eq(conf->log.level, DD_LOG_DEBUG);
    ck_assert_int_eq(conf->log.format, DD_LOG_FMT_JSON);
    ck_assert_int_eq(conf->purge.interval_s, 0);
    ck_assert_int_eq(conf->purge.batch, 50);
    dd_conf_destroy(conf);
}
END_TEST

START_TEST(test_defaults)
{
    dd_conf_t *conf = load_ok(MIN);
    char out[64];

    ck_assert_int_eq(conf->kafka.property_cnt, 0);
    ck_assert_str_eq(conf->shards[0].host, "127.0.0.1");
    ck_assert_int_eq(conf->shards[0].port, 3306);
    ck_assert_ptr_null(conf->shards[0].socket);
    ck_assert_str_eq(conf->shards[0].user, "dedupd");
    ck_assert_str_eq(conf->shards[0].password, "");
    ck_assert_ptr_null(conf->shards[0].password_env);
    ck_assert_ptr_null(conf->shards[0].password_file);
    ck_assert_int_eq(conf->shards[0].connect_timeout_s, 5);
    ck_assert_int_eq(conf->routes[0].dedup.hash_cnt, 0);
    ck_assert_int_eq(conf->routes[0].dedup.ttl_s, 7 * 86400);
    ck_assert_str_eq(conf->routes[0].dedup.table, "dedup_record");
    ck_assert_int_eq(conf->routes[0].dedup.retry_failed, 1);
    ck_assert_int_eq(conf->routes[0].dedup.max_payload_bytes, 990000);
    ck_assert_ptr_null(conf->routes[0].handler.config);
    ck_assert_int_eq(conf->routes[0].handler.max_response_bytes, 65536);
    ck_assert_ptr_null(conf->routes[0].dlq.topic);
    ck_assert_str_eq(dd_conf_dlq_topic(&conf->routes[0], "payments", out, sizeof(out)),
                     "payments.dlq");
    ck_assert_ptr_null(dd_conf_dlq_topic(&conf->routes[0], "payments", out, 8));
    ck_assert_int_eq(conf->batch.max_messages, 1000);
    ck_assert_int_eq(conf->batch.max_wait_ms, 20);
    ck_assert_int_eq(conf->batch.max_inflight, 20000);
    ck_assert_int_eq(conf->retry.backoff_initial_ms, 100);
    ck_assert_int_eq(conf->retry.backoff_max_ms, 30000);
    ck_assert_int_eq(conf->retry.max_attempts, 0);
    ck_assert_int_eq(conf->workers, 4);
    ck_assert_int_eq(conf->shutdown_timeout_ms, 30000);
    ck_assert_ptr_null(conf->http.listen);
    ck_assert_int_eq(conf->log.level, DD_LOG_INFO);
    ck_assert_int_eq(conf->log.format, DD_LOG_FMT_LOGFMT);
    ck_assert_int_eq(conf->purge.interval_s, 600);
    ck_assert_int_eq(conf->purge.batch, 1000);
    dd_conf_destroy(conf);
    dd_conf_destroy(NULL);
}
END_TEST

/* Each bad file and the exact message; %s is the file's path. */
static const struct {
    const char *text;
    const char *want;
} bad_files[] = {
    {"kafka = { brokers = \"b\"; group = 5; topics = [\"t\"]; };\n" M_LINE D_LINE H_LINE,
     "%s:1: setting kafka.group: expected a string"},
    {"kafka = { brokers = \"\"; group = \"g\"; topics = [\"t\"]; };\n" M_LINE D_LINE H_LINE,
     "%s:1: setting kafka.brokers: must not be empty"},
    {MIN "workers = 0;\n", "%s:5: setting workers: must be between 1 and 64, got 0"},
    {MIN "workers = \"4\";\n", "%s:5: setting workers: expected an integer"},
    {MIN "workers = 4.5;\n", "%s:5: setting workers: expected an integer"},
    {MIN "\nverbose = true;\n", "%s:6: unknown setting verbose"},
    {MIN "batch = {\n  max_messages = 10;\n  max_messagez = 1;\n};\n",
     "%s:7: unknown setting batch.max_messagez"},
    {MIN "Workers = 4;\n", "%s:5: unknown setting Workers"},
    {K_LINE "mysql = { host = \"h\"; };\n" D_LINE H_LINE,
     "%s: missing required setting mysql.database"},
    {K_LINE M_LINE D_LINE,
     "%s: missing required setting handler.path (or handler.sql, handler.http)"},
    /* a handler that ships with dedupd is named by its group, alone */
    {K_LINE M_LINE D_LINE "handler = { path = \"h.so\";\n  sql = { x = 1; }; };\n",
     "%s:5: setting handler.sql: handler.sql and handler.path both name the handler; give one"},
    {K_LINE M_LINE D_LINE "handler = { sql = { x = 1; };\n  http = { y = 2; }; };\n",
     "%s:5: setting handler.http: handler.http and handler.sql both name the handler; give one"},
    {K_LINE M_LINE D_LINE "handler = { sql = { x = 1; };\n  config = { y = 2; }; };\n",
     "%s:5: setting handler.config: handler.config is for a plugin named by handler.path; "
     "handler.sql takes its settings in its own group"},
    {K_LINE M_LINE D_LINE "handler = { sql = 5; };\n",
     "%s:4: setting handler.sql: expected a group"},
    {MIN "workers = ;\n", "%s:5: syntax error"},
    {MIN "workers = 1;\nworkers = 2;\n", "%s:6: duplicate setting name"},
    {MIN "purge = { interval = \"10 minutes\"; };\n",
     "%s:5: setting purge.interval: expected a duration like \"250ms\", \"30s\" or \"1h30m\", "
     "got \"10 minutes\""},
    {MIN "purge = { interval = true; };\n",
     "%s:5: setting purge.interval: expected a duration like \"30s\" or a number of seconds"},
    {MIN "purge = { interval = \"31d\"; };\n",
     "%s:5: setting purge.interval: must be between 0 and 30d, got 31d"},
    {K_LINE "mysql = { database = \"db\"; connect_timeout = \"1500ms\"; };\n" D_LINE H_LINE,
     "%s:2: setting mysql.connect_timeout: must be a whole number of seconds"},
    {K_LINE "mysql = { database = \"db\";\n  port = 70000; };\n" D_LINE H_LINE,
     "%s:3: setting mysql.port: must be between 1 and 65535, got 70000"},
    {K_LINE M_LINE H_LINE "dedup = {\n  key = \"k:${id}\";\n  table = \"bad-name\";\n};\n",
     "%s:6: setting dedup.table: expected a name matching [A-Za-z0-9_]{1,64}, got \"bad-name\""},
    {K_LINE M_LINE H_LINE "dedup = {\n  key = \"static\";\n};\n",
     "%s:5: setting dedup.key: key template has no ${path} placeholder: every message would "
     "get the same key"},
    {K_LINE M_LINE H_LINE "dedup = {\n  key = \"pay:$${id}\";\n};\n",
     "%s:5: setting dedup.key: key template has no ${path} placeholder: every message would "
     "get the same key"},
    {K_LINE M_LINE H_LINE "dedup = {\n  key = \"k:${id}%\";\n};\n",
     "%s:5: setting dedup.key: '%%' at column 8: dedupd escapes bytes of key values as %%XX, so "
     "the template's literal text cannot contain '%%'"},
    {K_LINE M_LINE H_LINE "dedup = { key = \"k:${id}\"; ttl = \"0s\"; };\n",
     "%s:4: setting dedup.ttl: must be between 1s and 3650d, got 0"},
    {K_LINE M_LINE H_LINE "dedup = { key = \"k:${id}\"; retry_failed = \"yes\"; };\n",
     "%s:4: setting dedup.retry_failed: expected true or false"},
    {K_LINE M_LINE H_LINE "dedup = { key = \"k:${id}\"; lane_key = \"${shop}\"; };\n",
     "%s:4: setting dedup.lane_key: ${shop} is not a field of dedup.key"},
    {K_LINE M_LINE H_LINE "dedup = { key = \"k:${id}\"; lane_key = \"all\"; };\n",
     "%s:4: setting dedup.lane_key: key template has no ${path} placeholder: every message "
     "would get the same key"},
    {K_LINE M_LINE H_LINE "dedup = { key = \"k$${shop}:${id}\"; lane_key = \"${shop}\"; };\n",
     "%s:4: setting dedup.lane_key: ${shop} is not a field of dedup.key"},
    {MIN "batch = { max_messages = 600; max_inflight = 500; };\n",
     "%s:5: setting batch.max_inflight: must be at least batch.max_messages (600), got 500"},
    {MIN "batch = { max_messages = 30000; };\n",
     "%s:5: setting batch.max_messages: must be at most batch.max_inflight (20000), got 30000"},
    {MIN "retry = { backoff_initial = \"2s\"; backoff_max = \"1s\"; };\n",
     "%s:5: setting retry.backoff_max: must be at least retry.backoff_initial (2s), got 1s"},
    {MIN "http = { listen = \"localhost\"; };\n",
     "%s:5: setting http.listen: expected \"host:port\" with a port from 1 to 65535, got "
     "\"localhost\""},
    {MIN "http = { listen = \"localhost:0\"; };\n",
     "%s:5: setting http.listen: expected \"host:port\" with a port from 1 to 65535, got "
     "\"localhost:0\""},
    {MIN "log = { level = \"verbose\"; };\n",
     "%s:5: setting log.level: expected one of error|warn|info|debug, got \"verbose\""},
    {"kafka = {\n"
     "  brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"];\n"
     "  properties = [\n"
     "    \"session.timeout.ms=6000\",\n"
     "    \"no.such.prop=1\"\n"
     "  ];\n"
     "};\n" M_LINE D_LINE H_LINE,
     "%s:5: setting kafka.properties: librdkafka rejected property no.such.prop: "
     "No such configuration property: \"no.such.prop\""},
    {"kafka = {\n"
     "  brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"];\n"
     "  properties = [ \"session.timeout.ms=soon\" ];\n"
     "};\n" M_LINE D_LINE H_LINE,
     "%s:3: setting kafka.properties: librdkafka rejected property session.timeout.ms: "
     "Invalid value for configuration property \"session.timeout.ms\""},
    {"kafka = {\n"
     "  brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"];\n"
     "  properties = [ \"client.id=a\",\n \"session.timeout.ms 6000\" ];\n"
     "};\n" M_LINE D_LINE H_LINE,
     "%s:4: setting kafka.properties: element 2 is not of the form \"name=value\""},
    {"kafka = { brokers = \"b\"; group = \"g\"; topics = [\"t\"];\n"
     "  properties = [\"group.id=other\"]; };\n" M_LINE D_LINE H_LINE,
     "%s:2: setting kafka.properties: property group.id cannot be set here: kafka.group sets it"},
    {"kafka = { brokers = \"b\"; group = \"g\"; topics = []; };\n" M_LINE D_LINE H_LINE,
     "%s:1: setting kafka.topics: must have at least 1 element(s)"},
    {"kafka = { brokers = \"b\"; group = \"g\";\n  topics = (\"a\",\n 5); };\n" M_LINE D_LINE
         H_LINE,
     "%s:3: setting kafka.topics: element 2: expected a string"},
    {"kafka = { brokers = \"b\"; group = \"g\"; topics = \"t\"; };\n" M_LINE D_LINE H_LINE,
     "%s:1: setting kafka.topics: expected a list of strings"},
    {"kafka = \"b:9092\";\n" M_LINE D_LINE H_LINE, "%s:1: setting kafka: expected a group"},
    {K_LINE M_LINE D_LINE "handler = { path = \"h.so\";\n  config = 5; };\n",
     "%s:5: setting handler.config: expected a group"},
    {K_LINE "mysql = { database = \"db\"; password = \"hunter2\";\n"
            "  password_env = \"DD_TEST_PW\"; };\n" D_LINE H_LINE,
     "%s:3: setting mysql.password_env: at most one of mysql.password, mysql.password_env and "
     "mysql.password_file may be set"},
    {K_LINE "mysql = { database = \"db\"; password = 42; };\n" D_LINE H_LINE,
     "%s:2: setting mysql.password: expected a string"},
    {K_LINE "mysql = { database = \"db\"; password_env = \"DD_TEST_UNSET_PW\"; };\n" D_LINE H_LINE,
     "%s:2: setting mysql.password_env: environment variable DD_TEST_UNSET_PW is not set"},
};

START_TEST(test_errors)
{
    load_fails(bad_files[_i].text, bad_files[_i].want);
    ck_assert_ptr_null(strstr(errstr, "hunter2"));
}
END_TEST

START_TEST(test_missing_file)
{
    dd_conf_t *conf = (dd_conf_t *)1;
    char want[PATH_MAX + 64];

    snprintf(want, sizeof(want), "%s/nope.conf: cannot read: No such file or directory", tmpdir);
    snprintf(confpath, sizeof(confpath), "%s/nope.conf", tmpdir);
    ck_assert_int_eq(dd_conf_load(&conf, confpath, errstr, sizeof(errstr)), DD_ERR_CONFIG);
    ck_assert_ptr_null(conf);
    ck_assert_str_eq(errstr, want);
}
END_TEST

/* An error inside an @include'd file names that file. */
START_TEST(test_include_names_file)
{
    char inc[PATH_MAX + 32], want[2 * PATH_MAX];
    int err;

    snprintf(inc, sizeof(inc), "%s/batch.conf", tmpdir);
    write_file(inc, "batch = {\n  max_wait_ms = -1;\n};\n");
    ck_assert_ptr_null(load(MIN "@include \"batch.conf\"\n", &err));
    snprintf(want, sizeof(want),
             "%s:2: setting batch.max_wait_ms: must be between 0 and 60000, got -1", inc);
    ck_assert_str_eq(errstr, want);
}
END_TEST

START_TEST(test_env_overrides)
{
    dd_conf_t *conf;

    setenv("DEDUPD_KAFKA_BROKERS", "envhost:9093", 1);
    setenv("DEDUPD_KAFKA_TOPICS", "a, b,c", 1);
    setenv("DEDUPD_KAFKA_PROPERTIES", "client.id=x", 1);
    setenv("DEDUPD_MYSQL_PORT", "3310", 1);
    setenv("DEDUPD_DEDUP_RETRY_FAILED", "false", 1);
    setenv("DEDUPD_DEDUP_TTL", "2d", 1);
    setenv("DEDUPD_WORKERS", "16", 1);
    setenv("DEDUPD_BATCH_MAX_MESSAGES", "1000", 1);
    setenv("DEDUPD_LOG_LEVEL", "warn", 1);
    setenv("DEDUPD_HANDLER_PATH", "/abs/from/env.so", 1);
    conf = load_ok(MIN "workers = 2;\n");
    ck_assert_str_eq(conf->kafka.brokers, "envhost:9093");
    ck_assert_int_eq(conf->routes[0].topic_cnt, 3);
    ck_assert_str_eq(conf->routes[0].topics[0], "a");
    ck_assert_str_eq(conf->routes[0].topics[1], "b");
    ck_assert_str_eq(conf->routes[0].topics[2], "c");
    ck_assert_int_eq(conf->kafka.property_cnt, 1);
    ck_assert_int_eq(conf->shards[0].port, 3310);
    ck_assert_int_eq(conf->routes[0].dedup.retry_failed, 0);
    ck_assert_int_eq(conf->routes[0].dedup.ttl_s, 2 * 86400);
    ck_assert_int_eq(conf->workers, 16);
    ck_assert_int_eq(conf->batch.max_messages, 1000);
    ck_assert_int_eq(conf->log.level, DD_LOG_WARN);
    ck_assert_str_eq(conf->routes[0].handler.path, "/abs/from/env.so");
    ck_assert_str_eq(conf->kafka.group, "g"); /* untouched */
    dd_conf_destroy(conf);
}
END_TEST

/* The environment may supply a required setting the file leaves out. */
START_TEST(test_env_supplies_required)
{
    dd_conf_t *conf;

    setenv("DEDUPD_MYSQL_DATABASE", "fromenv", 1);
    conf = load_ok(K_LINE D_LINE H_LINE);
    ck_assert_str_eq(conf->shards[0].database, "fromenv");
    dd_conf_destroy(conf);
}
END_TEST

/* An empty variable unsets an optional setting: back to its default, or
 * to none when it has none, whatever the file says. */
START_TEST(test_env_empty_unsets)
{
    dd_conf_t *conf;

    setenv("DEDUPD_HTTP_LISTEN", "", 1);
    setenv("DEDUPD_MYSQL_SOCKET", "", 1);
    setenv("DEDUPD_WORKERS", "", 1);
    setenv("DEDUPD_DEDUP_TTL", "", 1);
    setenv("DEDUPD_KAFKA_PROPERTIES", "", 1);
    setenv("DEDUPD_DEDUP_RETRY_FAILED", "", 1);
    conf =
        load_ok(K_LINE "mysql = { database = \"db\"; socket = \"/run/mysqld.sock\"; };\n"
                       "dedup = { key = \"k:${a}\"; ttl = \"2d\"; retry_failed = false; };\n" H_LINE
                       "http = { listen = \"127.0.0.1:9464\"; };\nworkers = 7;\n");
    ck_assert_ptr_null(conf->http.listen);
    ck_assert_ptr_null(conf->shards[0].socket);
    ck_assert_int_eq(conf->workers, 4);
    ck_assert_int_eq(conf->routes[0].dedup.ttl_s, 7 * 86400);
    ck_assert_int_eq(conf->kafka.property_cnt, 0);
    ck_assert_int_eq(conf->routes[0].dedup.retry_failed, 1);
    ck_assert_str_eq(conf->routes[0].dedup.key, "k:${a}"); /* the file still counts for the rest */
    dd_conf_destroy(conf);
}
END_TEST

static const struct {
    const char *name, *value, *want;
} bad_env[] = {
    {"DEDUPD_MYSQL_PORT", "abc",
     "environment variable DEDUPD_MYSQL_PORT (setting mysql.port): expected an integer, got "
     "\"abc\""},
    {"DEDUPD_MYSQL_PORT", "0",
     "environment variable DEDUPD_MYSQL_PORT (setting mysql.port): must be between 1 and 65535, "
     "got 0"},
    {"DEDUPD_DEDUP_RETRY_FAILED", "maybe",
     "environment variable DEDUPD_DEDUP_RETRY_FAILED (setting dedup.retry_failed): expected true "
     "or false, got \"maybe\""},
    {"DEDUPD_KAFKA_TOPICS", "a,,b",
     "environment variable DEDUPD_KAFKA_TOPICS (setting kafka.topics): element 2 is empty"},
    {"DEDUPD_KAFKA_TOPICS", "",
     "environment variable DEDUPD_KAFKA_TOPICS (setting kafka.topics): is empty, and "
     "kafka.topics is required (an empty variable unsets an optional setting only)"},
    {"DEDUPD_KAFKA_BROKERS", "",
     "environment variable DEDUPD_KAFKA_BROKERS (setting kafka.brokers): is empty, and "
     "kafka.brokers is required (an empty variable unsets an optional setting only)"},
    {"DEDUPD_MYSQL_DATABASE", "",
     "environment variable DEDUPD_MYSQL_DATABASE (setting mysql.database): is empty, and "
     "mysql.database is required (an empty variable unsets an optional setting only)"},
    {"DEDUPD_KAFKA_PROPERTIES", "no.such=1",
     "environment variable DEDUPD_KAFKA_PROPERTIES (setting kafka.properties): librdkafka "
     "rejected property no.such: No such configuration property: \"no.such\""},
    {"DEDUPD_BATCH_MAX_INFLIGHT", "10",
     "environment variable DEDUPD_BATCH_MAX_INFLIGHT (setting batch.max_inflight): must be at "
     "least batch.max_messages (1000), got 10"},
    {"DEDUPD_PURGE_INTERVAL", "1x",
     "environment variable DEDUPD_PURGE_INTERVAL (setting purge.interval): expected a duration "
     "like \"250ms\", \"30s\" or \"1h30m\", got \"1x\""},
};

START_TEST(test_env_errors)
{
    int err;

    setenv(bad_env[_i].name, bad_env[_i].value, 1);
    ck_assert_ptr_null(load(MIN, &err));
    ck_assert_int_eq(err, DD_ERR_CONFIG);
    ck_assert_str_eq(errstr, bad_env[_i].want);
}
END_TEST

/* DEDUPD_MYSQL_PASSWORD is only read when password_env names it. */
START_TEST(test_env_password_not_an_override)
{
    dd_conf_t *conf;

    setenv("DEDUPD_MYSQL_PASSWORD", "secret", 1);
    setenv("DEDUPD_MYSQL_PASSWORD_FILE", "/etc/shadow", 1);
    conf = load_ok(MIN);
    ck_assert_str_eq(conf->shards[0].password, "");
    ck_assert_ptr_null(conf->shards[0].password_file);
    dd_conf_destroy(conf);
}
END_TEST

/* A password file its group or others can open is allowed, with a warning
 * naming the file and its mode, kept for dd_validate_conf() to report. */
START_TEST(test_password_file_mode)
{
    static const struct {
        mode_t mode;
        const char *verb; /* NULL: no warning */
    } cases[] = {{0600, NULL}, {0400, NULL}, {0644, "read"}, {0640, "read"}, {0620, "change"}};
    char pwpath[PATH_MAX + 32], want[3 * PATH_MAX];
    dd_conf_t *conf;

    snprintf(pwpath, sizeof(pwpath), "%s/pw", tmpdir);
    write_file(pwpath, "s3cret\n");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(chmod(pwpath, cases[i].mode), 0);
        conf = load_ok(K_LINE
                       "mysql = { database = \"db\";\n password_file = \"pw\"; };\n" D_LINE H_LINE);
        ck_assert_str_eq(conf->shards[0].password, "s3cret");
        if (!cases[i].verb) {
            ck_assert_int_eq(conf->warning_cnt, 0);
        } else {
            snprintf(want, sizeof(want),
                     "%s:3: setting mysql.password_file: %s has mode %04o: users other than its "
                     "owner can %s it, and it holds the database password; make it readable by "
                     "its owner only (chmod 600)",
                     confpath, pwpath, (unsigned)cases[i].mode, cases[i].verb);
            ck_assert_int_eq(conf->warning_cnt, 1);
            ck_assert_str_eq(conf->warnings[0], want);
            ck_assert_ptr_null(strstr(conf->warnings[0], "s3cret"));
        }
        dd_conf_destroy(conf);
    }
}
END_TEST

START_TEST(test_password_env)
{
    dd_conf_t *conf;

    setenv("DD_TEST_PW", "s3cret", 1);
    conf = load_ok(
        K_LINE "mysql = { database = \"db\"; password_env = \"DD_TEST_PW\"; };\n" D_LINE H_LINE);
    ck_assert_str_eq(conf->shards[0].password, "s3cret");
    ck_assert_str_eq(conf->shards[0].password_env, "DD_TEST_PW");
    dd_conf_destroy(conf);
}
END_TEST

START_TEST(test_password_file)
{
    char pwpath[PATH_MAX + 32], want[3 * PATH_MAX];
    dd_conf_t *conf;
    int err;

    snprintf(pwpath, sizeof(pwpath), "%s/secrets", tmpdir);
    ck_assert_int_eq(mkdir(pwpath, 0700), 0);
    snprintf(pwpath, sizeof(pwpath), "%s/secrets/db", tmpdir);
    write_file(pwpath, "s3cret pass\r\n");
    conf = load_ok(
        K_LINE "mysql = { database = \"db\"; password_file = \"secrets/db\"; };\n" D_LINE H_LINE);
    ck_assert_str_eq(conf->shards[0].password, "s3cret pass");
    ck_assert_str_eq(conf->shards[0].password_file, pwpath);
    dd_conf_destroy(conf);

    unlink(pwpath);
    ck_assert_ptr_null(load(
        K_LINE "mysql = { database = \"db\";\n password_file = \"secrets/db\"; };\n" D_LINE H_LINE,
        &err));
    snprintf(want, sizeof(want),
             "%s:3: setting mysql.password_file: cannot read %s: No such file or directory",
             confpath, pwpath);
    ck_assert_str_eq(errstr, want);

    /* a directory is not a password */
    ck_assert_ptr_null(
        load(K_LINE "mysql = { database = \"db\"; password_file = \"secrets\"; };\n" D_LINE H_LINE,
             &err));
    snprintf(want, sizeof(want),
             "%s:2: setting mysql.password_file: %s/secrets is not a regular file", confpath,
             tmpdir);
    ck_assert_str_eq(errstr, want);
}
END_TEST

/* The password never reaches an error message, even next to the error. */
START_TEST(test_password_never_printed)
{
    FILE *mem;
    char *text = NULL;
    size_t len = 0;
    int err;

    ck_assert_ptr_null(load(
        K_LINE "mysql = { database = \"db\"; password = \"hunter2\"; port = 0; };\n" D_LINE H_LINE,
        &err));
    ck_assert_ptr_nonnull(strstr(errstr, "mysql.port"));
    ck_assert_ptr_null(strstr(errstr, "hunter2"));

    ck_assert_ptr_nonnull(mem = open_memstream(&text, &len));
    dd_conf_print_reference(mem);
    fclose(mem);
    ck_assert_ptr_null(strstr(text, "Environment: DEDUPD_MYSQL_PASSWORD")); /* no override */
    free(text);
}
END_TEST

START_TEST(test_handler_path)
{
    char want[PATH_MAX + 64];
    dd_conf_t *conf;

    conf = load_ok(K_LINE M_LINE D_LINE "handler = { path = \"handlers/ledger.so\"; };\n");
    snprintf(want, sizeof(want), "%s/handlers/ledger.so", tmpdir);
    ck_assert_str_eq(conf->routes[0].handler.path, want);
    ck_assert(conf->routes[0].handler.path[0] == '/');
    dd_conf_destroy(conf);

    conf = load_ok(K_LINE M_LINE D_LINE "handler = { path = \"/usr/lib/dedupd/x.so\"; };\n");
    ck_assert_str_eq(conf->routes[0].handler.path, "/usr/lib/dedupd/x.so");
    dd_conf_destroy(conf);
}
END_TEST

/* The handler's group is kept as is, unknown names and all. */
START_TEST(test_handler_config_unchecked)
{
    dd_conf_t *conf = load_ok(K_LINE M_LINE D_LINE
                              "handler = { path = \"h.so\";\n"
                              "  config = { anything = 1; nested = { deep = [1, 2]; }; }; };\n");
    const config_setting_t *nested;

    ck_assert_ptr_nonnull(conf->routes[0].handler.config);
    ck_assert_str_eq(config_setting_name(conf->routes[0].handler.config), "config");
    ck_assert_int_eq(config_setting_source_line(conf->routes[0].handler.config), 5);
    ck_assert_ptr_nonnull(nested =
                              config_setting_get_member(conf->routes[0].handler.config, "nested"));
    ck_assert_int_eq(config_setting_length(config_setting_get_member(nested, "deep")), 2);
    dd_conf_destroy(conf);
}
END_TEST

static const struct {
    const char *text;
    int ok;
    int64_t ms;
} durations[] = {
    {"250ms", 1, 250},
    {"45s", 1, 45000},
    {"30m", 1, 1800000},
    {"12h", 1, 43200000},
    {"7d", 1, 604800000},
    {"1h30m", 1, 5400000},
    {"1d2h3m4s5ms", 1, 93784005},
    {"90", 1, 90000},
    {"0", 1, 0},
    {"0s", 1, 0},
    {"", 0, 0},
    {"s", 0, 0},
    {"10", 1, 10000},
    {"10x", 0, 0},
    {"-5s", 0, 0},
    {"+5s", 0, 0},
    {"5 s", 0, 0},
    {" 5s", 0, 0},
    {"1.5h", 0, 0},
    {"30m1h", 0, 0},
    {"1s1s", 0, 0},
    {"1h30", 0, 0},
    {"ms", 0, 0},
    {"99999999999999999999s", 0, 0},
    {"9223372036854775807", 0, 0},
    {"106751991167d", 1, INT64_C(9223372036828800000)},
    {"106751991168d", 0, 0},
};

START_TEST(test_duration)
{
    int64_t ms = -42;
    int rc = dd_conf_parse_duration_ms(durations[_i].text, &ms);

    ck_assert_msg(rc == (durations[_i].ok ? 0 : -1), "\"%s\": rc %d", durations[_i].text, rc);
    if (durations[_i].ok)
        ck_assert_int_eq(ms, durations[_i].ms);
    else
        ck_assert_int_eq(ms, -42);
}
END_TEST

START_TEST(test_duration_null)
{
    int64_t ms;

    ck_assert_int_eq(dd_conf_parse_duration_ms(NULL, &ms), -1);
}
END_TEST

static char *read_all(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *text;
    long len;

    ck_assert_msg(fp != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    text = calloc(1, (size_t)len + 1);
    ck_assert_int_eq(fread(text, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    return text;
}

static const char *src_dir(void)
{
    const char *dir = getenv("DD_TEST_SRC_DIR");

    ck_assert_msg(dir != NULL, "DD_TEST_SRC_DIR is not set");
    return dir;
}

/* The shipped example loads and mentions every setting. */
START_TEST(test_example_config)
{
    char path[PATH_MAX], want[PATH_MAX + 64], needle[128];
    dd_conf_t *conf = NULL;
    char *text;

    snprintf(path, sizeof(path), "%s/config/dedupd.conf", src_dir());
    setenv("DEDUPD_MYSQL_PASSWORD", "example-pw", 1);
    ck_assert_msg(dd_conf_load(&conf, path, errstr, sizeof(errstr)) == 0, "%s", errstr);
    ck_assert_str_eq(conf->kafka.brokers, "127.0.0.1:9092");
    ck_assert_str_eq(conf->kafka.group, "payments-dedup");
    ck_assert_int_eq(conf->routes[0].topic_cnt, 1);
    ck_assert_str_eq(conf->routes[0].topics[0], "payments");
    ck_assert_str_eq(conf->routes[0].dedup.key, "pay:${merchant_id}:${order_no}");
    ck_assert_str_eq(conf->shards[0].password, "example-pw");
    ck_assert_ptr_nonnull(realpath(src_dir(), path));
    snprintf(want, sizeof(want), "%s/config/../build/examples/ledger.so", path);
    ck_assert_str_eq(conf->routes[0].handler.path, want);
    dd_conf_destroy(conf);

    snprintf(path, sizeof(path), "%s/config/dedupd.conf", src_dir());
    text = read_all(path);
    for (int i = 0; dd_conf_setting_path(i); i++) {
        const char *leaf = strrchr(dd_conf_setting_path(i), '.');

        snprintf(needle, sizeof(needle), "%s = ", leaf ? leaf + 1 : dd_conf_setting_path(i));
        ck_assert_msg(strstr(text, needle), "config/dedupd.conf does not show %s",
                      dd_conf_setting_path(i));
    }
    free(text);
}
END_TEST

/* docs/CONFIG.md carries the reference generated from the schema table. */
START_TEST(test_config_md_matches_table)
{
    char path[PATH_MAX], *doc, *ref = NULL;
    size_t len = 0;
    FILE *mem;

    snprintf(path, sizeof(path), "%s/docs/CONFIG.md", src_dir());
    doc = read_all(path);
    ck_assert_ptr_nonnull(mem = open_memstream(&ref, &len));
    dd_conf_print_reference_md(mem);
    fclose(mem);
    ck_assert_msg(strstr(doc, ref) != NULL,
                  "docs/CONFIG.md is out of date; regenerate its reference table from "
                  "dd_conf_print_reference_md()");
    free(ref);
    free(doc);
}
END_TEST

/* man/dedupd.conf.5 carries the SETTINGS section generated from the schema
 * table, between its GENERATED markers. */
START_TEST(test_conf_man_matches_table)
{
    char path[PATH_MAX], *page, *ref = NULL, *begin, *end;
    size_t len = 0;
    FILE *mem;

    snprintf(path, sizeof(path), "%s/man/dedupd.conf.5", src_dir());
    page = read_all(path);
    ck_assert_ptr_nonnull(mem = open_memstream(&ref, &len));
    dd_conf_print_reference_man(mem);
    fclose(mem);
    begin = strstr(page, ".\\\" BEGIN GENERATED");
    end = begin ? strstr(begin, ".\\\" END GENERATED") : NULL;
    ck_assert_msg(begin && end, "man/dedupd.conf.5 has no GENERATED block");
    begin = strchr(strchr(begin, '\n') + 1, '\n') + 1; /* the marker takes two lines */
    ck_assert_msg((size_t)(end - begin) == len && memcmp(begin, ref, len) == 0,
                  "man/dedupd.conf.5 is out of date; replace its GENERATED block with the "
                  "output of dedupd --help-config=man");
    free(ref);
    free(page);
}
END_TEST

/* text with every run of white space one space (the text reference wraps
 * lines), and each '|' written "\\|" when md (a markdown cell). */
static char *squeeze(const char *text, int md)
{
    char *out = malloc(2 * strlen(text) + 1), *o = out;

    ck_assert_ptr_nonnull(out);
    for (const char *p = text; *p; p++) {
        if (md && *p == '|') *o++ = '\\';
        if (!md && (*p == ' ' || *p == '\n')) {
            if (o == out || o[-1] != ' ') *o++ = ' ';
            continue;
        }
        *o++ = *p;
    }
    *o = '\0';
    return out;
}

/* Every description of the schema table is whole in --help-config and in
 * docs/CONFIG.md's table, however long it is. */
START_TEST(test_reference_descriptions_whole)
{
    char *text = NULL, *md = NULL, *flat;
    size_t len = 0, longest = 0;
    FILE *mem;

    ck_assert_ptr_nonnull(mem = open_memstream(&text, &len));
    dd_conf_print_reference(mem);
    fclose(mem);
    ck_assert_ptr_nonnull(mem = open_memstream(&md, &len));
    dd_conf_print_reference_md(mem);
    fclose(mem);
    flat = squeeze(text, 0);
    for (int i = 0; dd_conf_setting_path(i); i++) {
        for (int in_route = 0; in_route < 2; in_route++) {
            const char *desc = dd_conf_setting_desc(i, in_route);
            char *want_md, *want_text;

            if (!desc) continue;
            want_md = squeeze(desc, 1);
            want_text = squeeze(desc, 0);
            if (strlen(desc) > longest) longest = strlen(desc);
            ck_assert_msg(strstr(md, want_md), "%s: description not whole in CONFIG.md's table",
                          dd_conf_setting_path(i));
            ck_assert_msg(in_route || strstr(flat, want_text),
                          "%s: description not whole in --help-config", dd_conf_setting_path(i));
            free(want_md);
            free(want_text);
        }
    }
    ck_assert_uint_gt(longest, 600); /* the long ones are in the table */
    free(flat);
    free(md);
    free(text);
}
END_TEST

/* Every setting is in the reference; overridable ones with their variable. */
START_TEST(test_reference)
{
    char *text = NULL, env[128];
    size_t len = 0;
    FILE *mem;
    int n = 0;

    ck_assert_ptr_nonnull(mem = open_memstream(&text, &len));
    dd_conf_print_reference(mem);
    fclose(mem);
    for (int i = 0; dd_conf_setting_path(i); i++, n++)
        ck_assert_msg(strstr(text, dd_conf_setting_path(i)), "%s missing", dd_conf_setting_path(i));
    ck_assert_int_gt(n, 40);
    ck_assert_ptr_nonnull(strstr(text, "Environment: DEDUPD_BATCH_MAX_MESSAGES\n"));
    ck_assert_ptr_nonnull(strstr(text, "Environment: DEDUPD_WORKERS\n"));
    snprintf(env, sizeof(env), "mysql.port  (integer, 1..65535; default 3306)");
    ck_assert_ptr_nonnull(strstr(text, env));
    free(text);
}
END_TEST

/* The consumer dedupd builds: its own defaults where the file says nothing,
 * the file's kafka.properties over them, and the settings that carry the
 * guarantees whatever the file says. The broker is a closed local port, so
 * nothing waits on a name lookup. */
static void consumer_setting(const char *props, const char *name, const char *want)
{
    char text[1024];
    dd_conf_t *conf;
    dd_offsets_t *offs = dd_offsets_new();
    dd_source_t *src = NULL;
    char value[256];
    size_t size = sizeof(value);

    snprintf(text, sizeof(text),
             "kafka = { brokers = \"127.0.0.1:1\"; group = \"g\"; topics = [\"t\"];\n"
             "          properties = [%s]; };\n" M_LINE D_LINE H_LINE,
             props);
    conf = load_ok(text);
    ck_assert_ptr_nonnull(offs);
    ck_assert_msg(dd_source_new(&src, conf, offs, NULL, NULL, errstr, sizeof(errstr)) == DD_OK,
                  "%s", errstr);
    ck_assert_int_eq(rd_kafka_conf_get(rd_kafka_conf(dd_source_rk(src)), name, value, &size),
                     RD_KAFKA_CONF_OK);
    ck_assert_msg(strcmp(value, want) == 0, "%s = %s, expected %s", name, value, want);
    dd_source_destroy(src);
    dd_offsets_destroy(offs);
    dd_conf_destroy(conf);
}

/* kafka.properties, the setting read back, its value */
static const struct {
    const char *props, *name, *want;
} consumer_settings[] = {
    /* a prefetch queue that holds over a second of the stream (dd_source.c) */
    {"", "queued.max.messages.kbytes", "65536"},
    {"", "queued.min.messages", "100000"},
    {"", "auto.offset.reset", "smallest"},
    {"", "group.id", "g"},
    {"\"queued.max.messages.kbytes=8192\"", "queued.max.messages.kbytes", "8192"},
    {"\"auto.offset.reset=latest\"", "auto.offset.reset", "largest"},
    /* what dedupd relies on is set last, over the file */
    {"\"enable.partition.eof=true\"", "enable.partition.eof", "false"},
};

START_TEST(test_consumer_settings)
{
    consumer_setting(consumer_settings[_i].props, consumer_settings[_i].name,
                     consumer_settings[_i].want);
}
END_TEST

static Suite *conf_suite(void)
{
    Suite *s = suite_create("conf");
    TCase *load_tc = tcase_create("load"), *env_tc = tcase_create("env");
    TCase *misc_tc = tcase_create("misc");

    tcase_add_checked_fixture(load_tc, setup, teardown);
    tcase_add_test(load_tc, test_full);
    tcase_add_test(load_tc, test_defaults);
    tcase_add_loop_test(load_tc, test_errors, 0, (int)DD_ARRAY_LEN(bad_files));
    tcase_add_test(load_tc, test_missing_file);
    tcase_add_test(load_tc, test_include_names_file);
    tcase_add_test(load_tc, test_password_env);
    tcase_add_test(load_tc, test_password_file);
    tcase_add_test(load_tc, test_password_file_mode);
    tcase_add_test(load_tc, test_password_never_printed);
    tcase_add_test(load_tc, test_handler_path);
    tcase_add_test(load_tc, test_handler_config_unchecked);
    tcase_add_loop_test(load_tc, test_consumer_settings, 0, (int)DD_ARRAY_LEN(consumer_settings));
    suite_add_tcase(s, load_tc);

    tcase_add_checked_fixture(env_tc, setup, teardown);
    tcase_add_test(env_tc, test_env_overrides);
    tcase_add_test(env_tc, test_env_supplies_required);
    tcase_add_test(env_tc, test_env_empty_unsets);
    tcase_add_loop_test(env_tc, test_env_errors, 0, (int)DD_ARRAY_LEN(bad_env));
    tcase_add_test(env_tc, test_env_password_not_an_override);
    suite_add_tcase(s, env_tc);

    tcase_add_loop_test(misc_tc, test_duration, 0, (int)DD_ARRAY_LEN(durations));
    tcase_add_test(misc_tc, test_duration_null);
    tcase_add_test(misc_tc, test_example_config);
    tcase_add_test(misc_tc, test_config_md_matches_table);
    tcase_add_test(misc_tc, test_reference);
    tcase_add_test(misc_tc, test_reference_descriptions_whole);
    tcase_add_test(misc_tc, test_conf_man_matches_table);
    suite_add_tcase(s, misc_tc);
    return s;
}

int main(void)
{
    return dd_check_run(conf_suite());
}
