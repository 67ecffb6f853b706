/*
 * Unit tests for dd_text and dd_buf: the one hex encoder, the one JSON
 * string escaper (whose rules are those of canonical JSON) and the bytewise
 * order of keys, and the statement buffer.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "dd_buf.h"
#include "dd_text.h"
#include "check_run.h"

START_TEST(test_hex)
{
    char out[9] = "";

    dd_text_hex(out, "\x00\x7f\xab\xff", 4, 0);
    ck_assert_str_eq(out, "007fabff");
    dd_text_hex(out, "\x00\x7f\xab\xff", 4, 1);
    ck_assert_str_eq(out, "007FABFF");
}
END_TEST

static char *json_of(const char *s, size_t n, int flags)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(f);
    dd_text_json_fputs(f, s, n, flags);
    fclose(f);
    return text;
}

START_TEST(test_json_escapes)
{
    static const char in[] = "a\"b\\c\b\f\n\r\t\x01\x1f\x7f\xc3\xa9";
    char *t = json_of(in, sizeof(in) - 1, 0);

    /* short forms where JSON has them, \u00XX for the other controls,
     * DEL and UTF-8 as they are: canonical JSON's rules (docs/KEYS.md) */
    ck_assert_str_eq(t, "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xc3\xa9\"");
    free(t);
    t = json_of("x\0y", 3, 0);
    ck_assert_str_eq(t, "\"x\\u0000y\"");
    free(t);
    t = json_of("\xff", 1, DD_TEXT_JSON_ASCII);
    ck_assert_str_eq(t, "\"\\u00ff\"");
    free(t);
}
END_TEST

START_TEST(test_json_quote_bounded)
{
    char out[16];
    size_t pos;

    pos = dd_text_json_quote(out, 0, sizeof(out), "ab\ncd", 0);
    ck_assert_str_eq(out, "\"ab\\ncd\"");
    ck_assert_uint_eq(pos, strlen(out));
    /* Cut at an escape boundary, the closing quote and the NUL kept. */
    pos = dd_text_json_quote(out, 0, 10, "abcdef\x01zz", 0);
    ck_assert_str_eq(out, "\"abcdef\"");
    ck_assert_uint_lt(pos, 10);
}
END_TEST

START_TEST(test_visible)
{
    char out[64];

    dd_text_visible(out, sizeof(out), "plain text, caf\xc3\xa9");
    ck_assert_str_eq(out, "plain text, caf\xc3\xa9");
    dd_text_visible(out, sizeof(out), "a\x1b[31mred\x07\r\n\x7f");
    ck_assert_str_eq(out, "a\\x1b[31mred\\x07\\x0d\\x0a\\x7f");
    dd_text_visible(out, sizeof(out),
                    "csi\xc2\x9b"
                    "2J back\\slash");
    ck_assert_str_eq(out, "csi\\u009b2J back\\\\slash");
    /* cut to fit, never inside an escape */
    dd_text_visible(out, 6, "ab\x1b\x1b");
    ck_assert_str_eq(out, "ab");
}
END_TEST

START_TEST(test_cmp)
{
    ck_assert_int_eq(dd_text_cmp("ab", 2, "ab", 2), 0);
    ck_assert_int_lt(dd_text_cmp("a", 1, "ab", 2), 0);
    ck_assert_int_gt(dd_text_cmp("b", 1, "ab", 2), 0);
    ck_assert_int_lt(dd_text_cmp("a\0", 2, "a\x01", 2), 0);
    ck_assert_int_lt(dd_text_cmp(NULL, 0, "a", 1), 0);
    ck_assert_int_eq(dd_text_cmp(NULL, 0, NULL, 0), 0);
}
END_TEST

START_TEST(test_buf)
{
    dd_buf_t b = {0};

    dd_buf_puts(&b, "x=");
    dd_buf_printf(&b, "%d", 42);
    dd_buf_put(&b, "!?", 1);
    ck_assert_str_eq(b.p, "x=42!");
    ck_assert_uint_eq(b.len, 5);
    dd_buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.p, "");
    for (int i = 0; i < 3000; i++)
        dd_buf_puts(&b, "0123456789");
    ck_assert_uint_eq(b.len, 30000);
    ck_assert_int_eq(b.oom, 0);
    dd_buf_release(&b);
    ck_assert_ptr_null(b.p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("text");

    tcase_add_test(tc, test_hex);
    tcase_add_test(tc, test_json_escapes);
    tcase_add_test(tc, test_json_quote_bounded);
    tcase_add_test(tc, test_visible);
    tcase_add_test(tc, test_cmp);
    tcase_add_test(tc, test_buf);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
