/*
 * Unit tests for reading mysql.hosts (dd_db_hosts.c): counting, ports
 * given or not, spaces, bracketed IPv6 addresses, and the elements that
 * are refused.
 */
#include <check.h>
#include <string.h>

#include "dd_common.h"
#include "dd_db_hosts.h"
#include "check_run.h"

static char host[256], errstr[512];

START_TEST(test_count)
{
    ck_assert_int_eq(dd_db_hosts_count(NULL), 0);
    ck_assert_int_eq(dd_db_hosts_count(""), 0);
    ck_assert_int_eq(dd_db_hosts_count("a:1"), 1);
    ck_assert_int_eq(dd_db_hosts_count("a:1,b:2, c:3 ,"), 3);
    ck_assert_int_eq(dd_db_hosts_count(" , ,"), 0);
}
END_TEST

START_TEST(test_get)
{
    const char *hosts = "db-1:3307, db-2 ,[::1]:3309,[fe80::1]";
    int port = 0;

    ck_assert_int_eq(dd_db_hosts_get(hosts, 0, host, sizeof(host), &port, errstr, sizeof(errstr)),
                     DD_OK);
    ck_assert_str_eq(host, "db-1");
    ck_assert_int_eq(port, 3307);
    ck_assert_int_eq(dd_db_hosts_get(hosts, 1, host, sizeof(host), &port, errstr, sizeof(errstr)),
                     DD_OK);
    ck_assert_str_eq(host, "db-2");
    ck_assert_int_eq(port, 3306);
    ck_assert_int_eq(dd_db_hosts_get(hosts, 2, host, sizeof(host), &port, errstr, sizeof(errstr)),
                     DD_OK);
    ck_assert_str_eq(host, "::1");
    ck_assert_int_eq(port, 3309);
    ck_assert_int_eq(dd_db_hosts_get(hosts, 3, host, sizeof(host), &port, errstr, sizeof(errstr)),
                     DD_OK);
    ck_assert_str_eq(host, "fe80::1");
    ck_assert_int_eq(port, 3306);
}
END_TEST

static const char *const bad[] = {"db:0", "db:65536", "db:x", ":3306", "db:", "[::1", "[::1]x"};

START_TEST(test_bad)
{
    int port = 0;

    ck_assert_int_eq(dd_db_hosts_get(bad[_i], 0, host, sizeof(host), &port, errstr, sizeof(errstr)),
                     DD_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(errstr, "element 1 is not host[:port]"));
}
END_TEST

START_TEST(test_past_the_end)
{
    int port = 0;

    ck_assert_int_eq(
        dd_db_hosts_get("a:1,b:2", 2, host, sizeof(host), &port, errstr, sizeof(errstr)),
        DD_ERR_CONFIG);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db_hosts");
    TCase *tc = tcase_create("db_hosts");

    tcase_add_test(tc, test_count);
    tcase_add_test(tc, test_get);
    tcase_add_loop_test(tc, test_bad, 0, (int)DD_ARRAY_LEN(bad));
    tcase_add_test(tc, test_past_the_end);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
