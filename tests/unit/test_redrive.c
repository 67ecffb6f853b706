/*
 * `dedupd redrive`'s judgement of a dead letter before anything runs it
 * (dd_replay_letter.c), and its command line: headers read strictly (each
 * once, numbers that are numbers, topic names that are names), the route
 * whose dead letters go to the topic read, the filters, --key on the key
 * rendered from the payload, and options that are what they say. No
 * services: the letters are headers built here.
 */
#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dd_cmd.h"
#include "dd_common.h"
#include "dd_replay.h"
#include "dd_stats.h"
#include "check_run.h"

static char errstr[2048];

/* Headers from "name=value" strings (a value of "(null)": a header with no
 * value). */
static rd_kafka_headers_t *hdrs_of(const char *const *kv)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(8);

    for (; *kv; kv++) {
        const char *eq = strchr(*kv, '=');
        ck_assert_ptr_nonnull(eq);
        rd_kafka_header_add(h, *kv, eq - *kv, strcmp(eq + 1, "(null)") ? eq + 1 : NULL, -1);
    }
    return h;
}

/* dedupd_letter_read of the headers kv: its code ("" for none), l filled. */
static const char *letter_read(const char *const *kv, dd_redrive_letter_t *l)
{
    static char why[512];
    rd_kafka_headers_t *h = hdrs_of(kv);
    const char *code = dd_redrive_letter_read(h, l, why, sizeof(why));

    rd_kafka_headers_destroy(h);
    return code ? code : "";
}

START_TEST(test_numbers)
{
    int64_t v;

    ck_assert_int_eq(dd_redrive_number_parse("0", 1, INT32_MAX, &v), 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(dd_redrive_number_parse("2147483647", 10, INT32_MAX, &v), 0);
    ck_assert_int_eq(v, INT32_MAX);
    ck_assert_int_eq(dd_redrive_number_parse("2147483648", 10, INT32_MAX, &v), -1);
    ck_assert_int_eq(dd_redrive_number_parse("9223372036854775807", 19, INT64_MAX, &v), 0);
    ck_assert_int_eq(dd_redrive_number_parse("9223372036854775808", 19, INT64_MAX, &v), -1);
    ck_assert_int_eq(dd_redrive_number_parse("00000000000000000001", 20, INT64_MAX, &v), -1);
    ck_assert_int_eq(dd_redrive_number_parse("007", 3, INT32_MAX, &v), 0);
    ck_assert_int_eq(v, 7);
    static const char *const bad[] = {"", "9x", "1x", "+1", "-1", " 1", "1 ", "0x1", "1.0", "1e3"};
    for (size_t i = 0; i < DD_ARRAY_LEN(bad); i++)
        ck_assert_msg(dd_redrive_number_parse(bad[i], strlen(bad[i]), INT32_MAX, &v) == -1, "%s",
                      bad[i]);
    /* the length is the value's: "12" in "12\0" is not "12" */
    ck_assert_int_eq(dd_redrive_number_parse("12\0", 3, INT32_MAX, &v), -1);
}
END_TEST

START_TEST(test_letter_headers)
{
    static const char *const good[] = {"dedupd.reason=rejected",
                                       "dedupd.error=no",
                                       "dedupd.topic=payments",
                                       "dedupd.partition=3",
                                       "dedupd.offset=1044",
                                       "dedupd.biz_key=pay:m1:o1",
                                       NULL};
    dd_redrive_letter_t l;

    ck_assert_str_eq(letter_read(good, &l), "");
    ck_assert_str_eq(l.topic, "payments");
    ck_assert_int_eq(l.partition, 3);
    ck_assert_int_eq(l.offset, 1044);
    ck_assert_str_eq(dd_reason2str((dd_reason_t)l.reason), "rejected");
    ck_assert_int_eq(l.truncated, 0);
    ck_assert_int_eq(l.have,
                     DD_LETTER_TOPIC | DD_LETTER_PARTITION | DD_LETTER_OFFSET | DD_LETTER_REASON);

    static const char *const none[] = {"x-trace=1", NULL};
    ck_assert_str_eq(letter_read(none, &l), "not_a_dead_letter");
    static const char *const empty[] = {NULL};
    ck_assert_str_eq(letter_read(empty, &l), "not_a_dead_letter");

    /* what is read stays read: the entry shows it */
    static const char *const no_offset[] = {"dedupd.topic=payments", "dedupd.partition=1",
                                            "dedupd.reason=rejected", NULL};
    ck_assert_str_eq(letter_read(no_offset, &l), "bad_header");
    ck_assert_int_eq(l.have, DD_LETTER_TOPIC | DD_LETTER_PARTITION | DD_LETTER_REASON);

    static const char *const forged[][6] = {
        /* a partition that is not a number, one past int32 */
        {"dedupd.topic=payments", "dedupd.partition=1x", "dedupd.offset=1",
         "dedupd.reason=rejected", NULL},
        {"dedupd.topic=payments", "dedupd.partition=2147483648", "dedupd.offset=1",
         "dedupd.reason=rejected", NULL},
        {"dedupd.topic=payments", "dedupd.partition=-1", "dedupd.offset=1",
         "dedupd.reason=rejected", NULL},
        {"dedupd.topic=payments", "dedupd.partition=1", "dedupd.offset= 1",
         "dedupd.reason=rejected", NULL},
        /* two topics: which one would be believed? neither */
        {"dedupd.topic=payments", "dedupd.topic=coupons", "dedupd.partition=1", "dedupd.offset=1",
         "dedupd.reason=rejected", NULL},
        {"dedupd.topic=payments", "dedupd.partition=1", "dedupd.partition=1", "dedupd.offset=1",
         "dedupd.reason=rejected", NULL},
        /* not a topic name, not a reason, no value */
        {"dedupd.topic=pay/ments", "dedupd.partition=1", "dedupd.offset=1",
         "dedupd.reason=rejected", NULL},
        {"dedupd.topic=", "dedupd.partition=1", "dedupd.offset=1", "dedupd.reason=rejected", NULL},
        {"dedupd.topic=payments", "dedupd.partition=1", "dedupd.offset=1", "dedupd.reason=nonsense",
         NULL},
        {"dedupd.topic=(null)", "dedupd.partition=1", "dedupd.offset=1", "dedupd.reason=rejected",
         NULL},
    };
    for (size_t i = 0; i < DD_ARRAY_LEN(forged); i++)
        ck_assert_msg(!strcmp(letter_read(forged[i], &l), "bad_header"), "case %zu", i);

    static const char *const cut[] = {"dedupd.topic=payments",  "dedupd.partition=1",
                                      "dedupd.offset=1",        "dedupd.reason=rejected",
                                      "dedupd.truncated=70000", NULL};
    ck_assert_str_eq(letter_read(cut, &l), "");
    ck_assert_int_eq(l.truncated, 1);
}
END_TEST

/* Values a string cannot hold: a NUL inside, a name one byte too long. */
START_TEST(test_letter_header_bytes)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(8);
    dd_redrive_letter_t l;
    char why[512], name[251];

    rd_kafka_header_add(h, "dedupd.topic", -1, "coupons\0x", 9);
    rd_kafka_header_add(h, "dedupd.partition", -1, "0", -1);
    rd_kafka_header_add(h, "dedupd.offset", -1, "0", -1);
    rd_kafka_header_add(h, "dedupd.reason", -1, "rejected", -1);
    ck_assert_str_eq(dd_redrive_letter_read(h, &l, why, sizeof(why)), "bad_header");
    ck_assert_ptr_nonnull(strstr(why, "dedupd.topic"));
    rd_kafka_headers_destroy(h);

    memset(name, 'a', sizeof(name));
    for (int len = 249; len <= 250; len++) {
        h = rd_kafka_headers_new(8);
        rd_kafka_header_add(h, "dedupd.topic", -1, name, len);
        rd_kafka_header_add(h, "dedupd.partition", -1, "0", -1);
        rd_kafka_header_add(h, "dedupd.offset", -1, "0", -1);
        rd_kafka_header_add(h, "dedupd.reason", -1, "rejected\0", 9); /* a NUL after it */
        ck_assert_str_eq(dd_redrive_letter_read(h, &l, why, sizeof(why)), "bad_header");
        ck_assert_int_eq(!!(l.have & DD_LETTER_TOPIC), len == 249);
        ck_assert_int_eq(l.have & DD_LETTER_REASON, 0);
        rd_kafka_headers_destroy(h);
    }
}
END_TEST

/* A configuration in a file of its own; topics and routes as given. */
static dd_conf_t *conf_of(const char *text)
{
    char path[] = "/tmp/dd_test_redrive_XXXXXX";
    dd_conf_t *conf = NULL;
    int fd = mkstemp(path);
    FILE *fp;

    ck_assert_int_ge(fd, 0);
    ck_assert_ptr_nonnull(fp = fdopen(fd, "w"));
    fprintf(fp,
            "kafka = { brokers = \"b:9092\"; group = \"g\"; %s };\n"
            "mysql = { database = \"db\"; };\n%s\n",
            strstr(text, "routes") ? "" : "topics = [\"pay\"];",
            strstr(text, "routes") ? text
                                   : "dedup = { key = \"k:${id}\"; };\n"
                                     "handler = { path = \"/x/h.so\"; };");
    fclose(fp);
    ck_assert_msg(dd_conf_load(&conf, path, errstr, sizeof(errstr)) == 0, "%s", errstr);
    unlink(path);
    return conf;
}

/* The route letter (source topic) gets from dlq, or its refusal's code. */
static const char *route_of(const dd_conf_t *conf, const char *dlq, const char *topic, int *route)
{
    dd_redrive_letter_t l = {.have = DD_LETTER_TOPIC, .partition = 0, .offset = 0, .reason = 0};
    const char *code = "";
    char why[600];

    snprintf(l.topic, sizeof(l.topic), "%s", topic);
    *route = dd_redrive_letter_route(conf, dlq, &l, &code, why, sizeof(why));
    return *route >= 0 ? "" : code;
}

START_TEST(test_letter_route)
{
    dd_conf_t *conf = conf_of(
        "routes = (\n"
        "  { name = \"payments\"; topics = [\"payments\"]; key = \"pay:${id}\"; table = \"t_p\";\n"
        "    handler = { path = \"/x/p.so\"; }; dlq = { topic = \"payments.dead\"; }; },\n"
        "  { name = \"coupons\"; topics = [\"coupons\", \"^promo-[a-z]+$\"]; key = \"cp:${id}\";\n"
        "    table = \"t_c\"; handler = { path = \"/x/c.so\"; }; }\n"
        ");");
    int r;

    ck_assert_str_eq(route_of(conf, "payments.dead", "payments", &r), "");
    ck_assert_int_eq(r, 0);
    /* one route's dead-letter topic never runs another route's handler */
    ck_assert_str_eq(route_of(conf, "payments.dead", "coupons", &r), "wrong_dlq");
    ck_assert_str_eq(route_of(conf, "coupons.dlq", "coupons", &r), "");
    ck_assert_int_eq(r, 1);
    ck_assert_str_eq(route_of(conf, "coupons.dlq", "payments", &r), "wrong_dlq");
    /* "<topic>.dlq" holds that topic's letters only */
    ck_assert_str_eq(route_of(conf, "coupons.dlq", "promo-x", &r), "wrong_dlq");
    ck_assert_str_eq(route_of(conf, "promo-x.dlq", "promo-x", &r), "");
    ck_assert_int_eq(r, 1);
    ck_assert_str_eq(route_of(conf, "payments.dead", "nobody", &r), "unknown_source");
    ck_assert_str_eq(route_of(conf, "payments.dead", "payments.dead", &r), "source_is_dlq");
    ck_assert_str_eq(route_of(conf, "coupons.dlq", "coupons.dlq", &r), "source_is_dlq");
    /* --from-dlq takes a dead-letter topic only */
    ck_assert_int_ge(dd_conf_dlq_route(conf, "payments.dead"), 0);
    ck_assert_int_ge(dd_conf_dlq_route(conf, "promo-y.dlq"), 0);
    ck_assert_int_lt(dd_conf_dlq_route(conf, "payments"), 0);
    ck_assert_int_lt(dd_conf_dlq_route(conf, "payments.dlq"), 0);
    dd_conf_destroy(conf);
}
END_TEST

START_TEST(test_letter_route_no_routes)
{
    dd_conf_t *conf = conf_of("");
    int r;

    ck_assert_str_eq(route_of(conf, "pay.dlq", "pay", &r), "");
    ck_assert_int_eq(r, 0);
    ck_assert_str_eq(route_of(conf, "pay.dlq", "other", &r), "unknown_source");
    ck_assert_str_eq(route_of(conf, "pay.dlq", "pay.dlq", &r), "source_is_dlq");
    ck_assert_int_lt(dd_conf_dlq_route(conf, "pay"), 0); /* the live topic */
    ck_assert_int_ge(dd_conf_dlq_route(conf, "pay.dlq"), 0);
    dd_conf_destroy(conf);
}
END_TEST

START_TEST(test_filters)
{
    dd_redrive_letter_t l = {.have = 0xf, .topic = "payments", .partition = 2, .offset = 50};
    dd_redrive_filter_t f = {
        .since_ms = -1, .until_ms = -1, .src_part = -1, .src_lo = -1, .src_hi = -1};
    char why[300];

    for (l.reason = 0; l.reason < DD_REASON_CNT; l.reason++)
        if (!strcmp(dd_reason2str((dd_reason_t)l.reason), "rejected")) break;
    ck_assert_ptr_null(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)));
    f.reasons = 1u << (l.reason + 1);
    ck_assert_str_eq(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)), "--reason");
    f.reasons |= 1u << l.reason;
    ck_assert_ptr_null(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)));
    f.src_topic = "coupons";
    ck_assert_str_eq(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)), "--source-topic");
    f.src_topic = "payments";
    f.src_part = 3;
    ck_assert_str_eq(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)),
                     "--source-partition");
    f.src_part = 2;
    f.src_lo = 51;
    f.src_hi = 60;
    ck_assert_str_eq(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)), "--source-offsets");
    f.src_lo = 50;
    ck_assert_ptr_null(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)));
    f.since_ms = 1001;
    ck_assert_str_eq(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)), "--since");
    f.since_ms = 1000;
    f.until_ms = 1000;
    ck_assert_str_eq(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)), "--until");
    f.until_ms = 1001;
    ck_assert_ptr_null(dd_redrive_filter_letter(&f, &l, 1000, why, sizeof(why)));
}
END_TEST

START_TEST(test_key_match)
{
    char big[300];

    ck_assert_int_eq(dd_redrive_key_match("pay:m1:*", "pay:m1:o1", 9), 1);
    ck_assert_int_eq(dd_redrive_key_match("pay:m1:*", "pay:m2:o1", 9), 0);
    ck_assert_int_eq(dd_redrive_key_match("pay:m1:o1", "pay:m1:o1", 9), 1);
    /* the whole key, not its part before a NUL */
    ck_assert_int_eq(dd_redrive_key_match("pay:m1:o1", "pay:m1:o1\0m2", 12), 0);
    ck_assert_int_eq(dd_redrive_key_match("*", "pay:m1:o1\0m2", 12), 0);
    memset(big, 'a', sizeof(big));
    ck_assert_int_eq(dd_redrive_key_match("*", big, sizeof(big)), 0);
}
END_TEST

/* `dedupd redrive ARGS...` parsed as the dispatcher does: 0 or 2. */
static int parse(const char *first, ...)
{
    char *argv[16] = {"redrive"};
    int argc = 1, rc;
    void *opts = calloc(1, dd_cmd_redrive.opts_size);
    dd_cmd_ctx_t ctx;
    va_list ap;

    memset(&ctx, 0, sizeof(ctx));
    va_start(ap, first);
    for (const char *a = first; a && argc < 15; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    dd_cmd_redrive.init(opts);
    rc = dd_cmd_opts_parse(&dd_cmd_redrive, opts, &ctx, argc, argv);
    if (dd_cmd_redrive.release) dd_cmd_redrive.release(opts);
    free(opts);
    return rc;
}

#define DLQ "--from-dlq", "p.dlq"

START_TEST(test_options_strict)
{
    char group[300];

    ck_assert_int_eq(parse(DLQ, NULL), 0);
    ck_assert_int_eq(parse(NULL), 2);
    ck_assert_int_eq(parse(DLQ, "--rate", "5", "--source-partition", "3", "--source-offsets", "1-9",
                           "--reason", "rejected,conflict", NULL),
                     0);
    ck_assert_int_eq(parse(DLQ, "--rate", "0.5", "--source-offsets", "7", NULL), 0);
    static const char *const rates[] = {"5x",  "0",    "-1", "inf", "nan",
                                        "1e3", "0x10", "",   " 5",  "2000000"};
    for (size_t i = 0; i < DD_ARRAY_LEN(rates); i++)
        ck_assert_msg(parse(DLQ, "--rate", rates[i], NULL) == 2, "--rate '%s'", rates[i]);
    static const char *const parts[] = {"1x", "+1", " 1", "-1", "", "2147483648"};
    for (size_t i = 0; i < DD_ARRAY_LEN(parts); i++)
        ck_assert_msg(parse(DLQ, "--source-partition", parts[i], NULL) == 2, "'%s'", parts[i]);
    static const char *const offs[] = {"3-2", "1-", "-1", "1-2-3", "", "a-b", "1 -2"};
    for (size_t i = 0; i < DD_ARRAY_LEN(offs); i++)
        ck_assert_msg(parse(DLQ, "--source-offsets", offs[i], NULL) == 2, "'%s'", offs[i]);
    static const char *const reasons[] = {"", ",", "rejected,", "rejected,,conflict", "nonsense"};
    for (size_t i = 0; i < DD_ARRAY_LEN(reasons); i++)
        ck_assert_msg(parse(DLQ, "--reason", reasons[i], NULL) == 2, "'%s'", reasons[i]);
    memset(group, 'g', sizeof(group) - 1);
    group[sizeof(group) - 1] = '\0';
    ck_assert_int_eq(parse(DLQ, "--group", group, NULL), 2);
    group[255] = '\0';
    ck_assert_int_eq(parse(DLQ, "--group", group, NULL), 0);
    ck_assert_int_eq(parse(DLQ, "--group", "", NULL), 2);
    ck_assert_int_eq(parse(DLQ, "--since", "-1h", "--until", "-2h", NULL), 2);
    ck_assert_int_eq(parse(DLQ, "--since", "-2h", "--until", "-1h", NULL), 0);
    ck_assert_int_eq(parse("--from-dlq", "", NULL), 2);
}
END_TEST

static Suite *dd_redrive_suite(void)
{
    Suite *s = suite_create("redrive");
    TCase *tc = tcase_create("letters");

    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_letter_headers);
    tcase_add_test(tc, test_letter_header_bytes);
    tcase_add_test(tc, test_letter_route);
    tcase_add_test(tc, test_letter_route_no_routes);
    tcase_add_test(tc, test_filters);
    tcase_add_test(tc, test_key_match);
    tcase_add_test(tc, test_options_strict);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(dd_redrive_suite());
}
