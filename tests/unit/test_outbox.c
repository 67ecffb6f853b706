/*
 * Unit tests for dd_outbox: event ids (a hash of the database's event
 * namespace, the dedup table, the business key and the event's number
 * within its message's call, so a replayed batch gives the same ones), Kafka topic names, the
 * encoding of an event's headers in its row, an event's size and the multi-row insert a handler
 * call collects.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "dd_buf.h"
#include "dd_outbox.h"
#include "check_run.h"

START_TEST(test_event_id)
{
    static const char ns[] = "0123456789abcdef0123456789abcdef";
    char a[DD_OUTBOX_ID_LEN + 1], b[DD_OUTBOX_ID_LEN + 1];

    /* SHA-256 of NS "\0dedup_record\0pay:m1:o1\0" "0", its first 16 bytes */
    dd_outbox_event_id(ns, "dedup_record", "pay:m1:o1", 0, a);
    ck_assert_str_eq(a, "661a5ebab02d6d74f124a8251b41b5ea");
    dd_outbox_event_id(ns, "dedup_record", "pay:m1:o1", 1, b);
    ck_assert_str_eq(b, "7396f5b8aad36191ba93a7e05aad2bef");
    dd_outbox_event_id(ns, "dedup_record", "pay:m1:o1", 0, b);
    ck_assert_str_eq(a, b); /* the same in every attempt */
    dd_outbox_event_id(ns, "other_table", "pay:m1:o1", 0, b);
    ck_assert_str_ne(a, b);
    /* another database's namespace: another id for the same table and key */
    dd_outbox_event_id("fedcba9876543210fedcba9876543210", "dedup_record", "pay:m1:o1", 0, b);
    ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_topic_valid)
{
    char long_name[251];

    ck_assert_int_eq(dd_outbox_topic_valid("payment.booked"), 1);
    ck_assert_int_eq(dd_outbox_topic_valid("a-b_C.9"), 1);
    ck_assert_int_eq(dd_outbox_topic_valid(""), 0);
    ck_assert_int_eq(dd_outbox_topic_valid(NULL), 0);
    ck_assert_int_eq(dd_outbox_topic_valid("."), 0);
    ck_assert_int_eq(dd_outbox_topic_valid(".."), 0);
    ck_assert_int_eq(dd_outbox_topic_valid("a b"), 0);
    ck_assert_int_eq(dd_outbox_topic_valid("x'); DROP TABLE t; --"), 0);
    memset(long_name, 'a', 250);
    long_name[250] = '\0';
    ck_assert_int_eq(dd_outbox_topic_valid(long_name), 0);
    long_name[249] = '\0';
    ck_assert_int_eq(dd_outbox_topic_valid(long_name), 1);
}
END_TEST

typedef struct {
    int n;
    char text[256];
} collected_t;

static void collect(void *arg, const char *name, size_t name_len, const void *value,
                    size_t value_len)
{
    collected_t *c = arg;
    size_t at = strlen(c->text);

    snprintf(c->text + at, sizeof(c->text) - at, "%s%.*s=%.*s", c->n++ ? ";" : "", (int)name_len,
             name, value ? (int)value_len : 4, value ? (const char *)value : "NULL");
}

START_TEST(test_headers)
{
    const dedupd_header h[] = {{.name = "type", .value = "booked", .value_len = 6},
                               {.name = "empty", .value = "", .value_len = 0},
                               {.name = "null", .value = NULL, .value_len = 0}};
    dd_buf_t b = {0};
    collected_t c = {0};

    dd_outbox_headers_encode(&b, h, 3);
    ck_assert_int_eq(dd_outbox_headers_each(b.p, b.len, collect, &c), 0);
    ck_assert_str_eq(c.text, "type=booked;empty=;null=NULL");
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(dd_outbox_headers_each(b.p, b.len - 1, collect, &c), -1); /* cut short */
    dd_buf_release(&b);
}
END_TEST

START_TEST(test_size_and_insert)
{
    const dedupd_header h = {.name = "type", .value = "booked", .value_len = 6};
    dd_outbox_event_t ev = {.topic = "t",
                            .key = "k1",
                            .key_len = 2,
                            .value = "{}",
                            .value_len = 2,
                            .headers = &h,
                            .header_cnt = 1};
    dd_buf_t stmt = {0};

    ck_assert_uint_eq(dd_outbox_event_size(&ev), 2 + 2 + 4 + 6 + 10 + DD_OUTBOX_RESERVE);
    snprintf(ev.event_id, sizeof(ev.event_id), "%032d", 1);
    ck_assert_int_eq(dd_outbox_append(&stmt, 0, &ev, NULL, 0), 0);
    ev.key = NULL;
    ev.value = NULL;
    ev.header_cnt = 0;
    ck_assert_int_eq(dd_outbox_append(&stmt, 1, &ev, NULL, 0), 0);
    ck_assert_str_eq(stmt.p, "INSERT INTO `dedupd_outbox` (event_id, topic, msg_key, msg_value, "
                             "headers) VALUES ('00000000000000000000000000000001', 't', X'6b31', "
                             "X'7b7d', X'000000047479706500000006626f6f6b6564'), "
                             "('00000000000000000000000000000001', 't', NULL, NULL, NULL)");
    dd_buf_release(&stmt);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outbox");
    TCase *tc = tcase_create("outbox");

    tcase_add_test(tc, test_event_id);
    tcase_add_test(tc, test_topic_valid);
    tcase_add_test(tc, test_headers);
    tcase_add_test(tc, test_size_and_insert);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
