/*
 * The log writer: fields of a line's own in logfmt and JSON, the per-kind
 * rate limit, and librdkafka's levels mapped onto dedupd's.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "dd_log.h"
#include "check_run.h"

static char out_path[] = "/tmp/dd-test-log-XXXXXX";

/* stderr into a file, for the lines one test writes (Check forks per
 * test, so the redirection ends with it). */
static void capture(void)
{
    int fd = mkstemp(out_path);

    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_ptr_nonnull(freopen(out_path, "w", stderr));
}

static char *captured(void)
{
    static char buf[8192];
    FILE *f;
    size_t n;

    fflush(stderr);
    f = fopen(out_path, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(out_path);
    return buf;
}

START_TEST(test_fields_logfmt)
{
    dd_log_field_t f[] = {{"reason", "conflict"}, {"hash", "ab12"}, {"skipped", NULL}};
    char *text;

    capture();
    dd_log_setup(DD_LOG_INFO, DD_LOG_FMT_LOGFMT);
    dd_log_msg_fields(DD_LOG_WARN, "payments", 3, 42, "pay:m1:o1", f, 3, "Dead-lettering %s", "it");
    text = captured();
    ck_assert_ptr_nonnull(strstr(text, " level=warn topic=\"payments\" partition=3 offset=42 "
                                       "key=\"pay:m1:o1\" reason=\"conflict\" hash=\"ab12\" "
                                       "msg=\"Dead-lettering it\"\n"));
    ck_assert_ptr_null(strstr(text, "skipped"));
}
END_TEST

START_TEST(test_fields_json)
{
    dd_log_field_t f[] = {{"reason", "bad_json"}};
    char *text;

    capture();
    dd_log_setup(DD_LOG_INFO, DD_LOG_FMT_JSON);
    dd_log_msg_fields(DD_LOG_WARN, NULL, 0, 0, NULL, f, 1, "x \"quoted\"");
    text = captured();
    ck_assert_ptr_nonnull(strstr(text, ",\"level\":\"warn\",\"reason\":\"bad_json\","
                                       "\"msg\":\"x \\\"quoted\\\"\"}\n"));
}
END_TEST

/* 3 lines per 1000 ms: the 4th and 5th are counted, and reported once the
 * window is over, by the next take or by a flush. */
START_TEST(test_limit)
{
    dd_log_limit_t lim = {.max = 3, .window_ms = 1000};
    uint64_t report;

    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(dd_log_limit_take(&lim, 10000 + i, &report), 1);
        ck_assert_uint_eq(report, 0);
    }
    ck_assert_int_eq(dd_log_limit_take(&lim, 10500, &report), 0);
    ck_assert_int_eq(dd_log_limit_take(&lim, 10999, &report), 0);
    ck_assert_uint_eq(report, 0);
    ck_assert_uint_eq(dd_log_limit_flush(&lim, 10999), 0); /* the window is not over */
    ck_assert_int_eq(dd_log_limit_take(&lim, 11000, &report), 1);
    ck_assert_uint_eq(report, 2);
    ck_assert_int_eq(dd_log_limit_take(&lim, 11001, &report), 1);
    ck_assert_int_eq(dd_log_limit_take(&lim, 11002, &report), 1);
    ck_assert_int_eq(dd_log_limit_take(&lim, 11003, &report), 0);
    ck_assert_uint_eq(dd_log_limit_flush(&lim, 12500), 1);
    ck_assert_uint_eq(dd_log_limit_flush(&lim, 14000), 0);
    ck_assert_int_eq(dd_log_limit_take(&lim, 14001, &report), 1);
    ck_assert_uint_eq(report, 0);
}
END_TEST

/* syslog levels: 0-3 error, 4 warn, 5-6 info, 7 debug. */
START_TEST(test_rdkafka_levels)
{
    char errstr[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), errstr, sizeof(errstr));
    static const struct {
        int level;
        const char *want;
    } cases[] = {{LOG_ERR, "level=error"}, {LOG_WARNING, "level=warn"}, {LOG_NOTICE, "level=info"},
                 {LOG_INFO, "level=info"}, {LOG_DEBUG, "level=debug"},  {LOG_CRIT, "level=error"}};
    char *text, *line;

    ck_assert_ptr_nonnull(rk);
    capture();
    dd_log_setup(DD_LOG_DEBUG, DD_LOG_FMT_LOGFMT);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        dd_log_rdkafka(rk, cases[i].level, "FAC", "text");
    text = captured();
    line = text;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *end = strchr(line, '\n');
        ck_assert_ptr_nonnull(end);
        *end = '\0';
        ck_assert_msg(strstr(line, cases[i].want), "level %d: %s", cases[i].level, line);
        ck_assert_ptr_nonnull(strstr(line, "msg=\"librdkafka producer FAC: text\""));
        line = end + 1;
    }
    rd_kafka_destroy(rk);
}
END_TEST

/* $JOURNAL_STREAM names a stream by DEV:INODE: the file's own matches,
 * another file's, a malformed value or none does not. */
START_TEST(test_journal_stream)
{
    char a[] = "/tmp/dd-test-log-a.XXXXXX", b[] = "/tmp/dd-test-log-b.XXXXXX", env[64];
    int fa = mkstemp(a), fb = mkstemp(b);
    struct stat st;

    ck_assert_int_ge(fa, 0);
    ck_assert_int_ge(fb, 0);
    ck_assert_int_eq(fstat(fa, &st), 0);
    snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    ck_assert_int_eq(dd_log_journal_stream(env, fa), 1);
    ck_assert_int_eq(dd_log_journal_stream(env, fb), 0);
    ck_assert_int_eq(dd_log_journal_stream(NULL, fa), 0);
    ck_assert_int_eq(dd_log_journal_stream("12", fa), 0);
    strcat(env, "x");
    ck_assert_int_eq(dd_log_journal_stream(env, fa), 0);
    close(fa);
    close(fb);
    unlink(a);
    unlink(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");

    tcase_add_test(tc, test_fields_logfmt);
    tcase_add_test(tc, test_fields_json);
    tcase_add_test(tc, test_limit);
    tcase_add_test(tc, test_rdkafka_levels);
    tcase_add_test(tc, test_journal_stream);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
