/*
 * The HTTP handler's parts that need no service (handlers/http/): what a
 * status means, Retry-After in both its forms, the templates of secrets,
 * keys and URLs, the configuration's errors and the response snapshot.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "http.h"

START_TEST(test_status_defaults)
{
    http_statuses s;
    long done[] = {200, 201, 202, 204, 299};
    long reject[] = {400, 404, 409, 410, 422};
    long retry[] = {408, 425, 429, 500, 502, 503, 504, 599, 401, 403, 302, 307, 100, 0, 600};

    http_statuses_default(&s);
    for (size_t i = 0; i < sizeof(done) / sizeof(done[0]); i++)
        ck_assert_msg(http_status_verdict(&s, done[i]) == HTTP_DONE, "%ld", done[i]);
    for (size_t i = 0; i < sizeof(reject) / sizeof(reject[0]); i++)
        ck_assert_msg(http_status_verdict(&s, reject[i]) == HTTP_REJECT, "%ld", reject[i]);
    for (size_t i = 0; i < sizeof(retry) / sizeof(retry[0]); i++)
        ck_assert_msg(http_status_verdict(&s, retry[i]) == HTTP_RETRY, "%ld", retry[i]);
}
END_TEST

START_TEST(test_status_set)
{
    http_statuses s;
    char err[256];

    http_statuses_default(&s);
    /* an exact code wins over its class, the class over `other` */
    ck_assert_int_eq(http_statuses_set(&s, NULL, 202, HTTP_RETRY, err, sizeof(err)), 0);
    ck_assert_int_eq(http_statuses_set(&s, "4XX", 0, HTTP_REJECT, err, sizeof(err)), 0);
    ck_assert_int_eq(http_status_verdict(&s, 202), HTTP_RETRY);
    ck_assert_int_eq(http_status_verdict(&s, 201), HTTP_DONE);
    ck_assert_int_eq(http_status_verdict(&s, 401), HTTP_REJECT);
    ck_assert_int_eq(http_status_verdict(&s, 429), HTTP_RETRY);
    s.other = HTTP_REJECT;
    ck_assert_int_eq(http_status_verdict(&s, 302), HTTP_REJECT);
    ck_assert_int_eq(http_statuses_set(&s, NULL, 99, HTTP_DONE, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "99 is not an HTTP status (100..599)");
    ck_assert_int_eq(http_statuses_set(&s, "6xx", 0, HTTP_DONE, err, sizeof(err)), -1);
    ck_assert_int_eq(http_statuses_set(&s, "2x", 0, HTTP_DONE, err, sizeof(err)), -1);
    ck_assert_int_eq(http_statuses_set(&s, NULL, 600, HTTP_DONE, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_retry_after)
{
    time_t now = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */

    ck_assert_int_eq(http_retry_after_ms("120", now), 120000);
    ck_assert_int_eq(http_retry_after_ms(" 5 ", now), 5000);
    ck_assert_int_eq(http_retry_after_ms("0", now), 0);
    ck_assert_int_eq(http_retry_after_ms("", now), -1);
    ck_assert_int_eq(http_retry_after_ms("-1", now), -1);
    ck_assert_int_eq(http_retry_after_ms("1.5", now), -1);
    ck_assert_int_eq(http_retry_after_ms("5 s", now), -1);
    ck_assert_int_eq(http_retry_after_ms("99999999999999999999", now), -1);
    /* the three forms of an HTTP-date (RFC 9110 5.6.7) */
    ck_assert_int_eq(http_retry_after_ms("Sun, 06 Nov 1994 08:49:40 GMT", now), 3000);
    ck_assert_int_eq(http_retry_after_ms("Sunday, 06-Nov-94 08:50:37 GMT", now), 60000);
    ck_assert_int_eq(http_retry_after_ms("Sun Nov  6 08:49:47 1994", now), 10000);
    /* a date in the past: no wait */
    ck_assert_int_eq(http_retry_after_ms("Sun, 06 Nov 1994 08:00:00 GMT", now), 0);
    ck_assert_int_eq(http_retry_after_ms("soon", now), -1);
}
END_TEST

START_TEST(test_tmpl_secrets)
{
    char err[512], dir[] = "/tmp/dd-http-unit.XXXXXX", path[600];
    char *v;
    FILE *f;

    setenv("DD_HTTP_UNIT_TOKEN", "s3cret", 1);
    unsetenv("DD_HTTP_UNIT_UNSET");
    v = http_tmpl_expand("Bearer ${env:DD_HTTP_UNIT_TOKEN}!", NULL, 0, err, sizeof(err));
    ck_assert_str_eq(v, "Bearer s3cret!");
    free(v);
    ck_assert_ptr_null(http_tmpl_expand("${env:DD_HTTP_UNIT_UNSET}", NULL, 0, err, sizeof(err)));
    ck_assert_str_eq(err, "${env:DD_HTTP_UNIT_UNSET}: the environment variable is not set");
    ck_assert_ptr_null(http_tmpl_expand("${key}", NULL, 0, err, sizeof(err)));
    ck_assert_msg(strstr(err, "unknown template ${key}"), "%s", err);
    v = http_tmpl_expand("/p/${key}?t=${env:DD_HTTP_UNIT_TOKEN}", NULL, 1, err, sizeof(err));
    ck_assert_str_eq(v, "/p/${key}?t=s3cret");
    free(v);
    ck_assert_ptr_null(http_tmpl_expand("a ${env:X", NULL, 0, err, sizeof(err)));
    /* a file: relative to the configuration's directory, one last line
     * break dropped; an error names the template, never the content */
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/token", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("from-file\r\n", f);
    fclose(f);
    v = http_tmpl_expand("X: ${file:token}", dir, 0, err, sizeof(err));
    ck_assert_str_eq(v, "X: from-file");
    free(v);
    ck_assert_ptr_null(http_tmpl_expand("${file:nothere}", dir, 0, err, sizeof(err)));
    ck_assert_msg(strncmp(err, "${file:nothere}: cannot read ", 29) == 0, "%s", err);
    ck_assert_int_eq(http_tmpl_has_secret("a${env:B}"), 1);
    ck_assert_int_eq(http_tmpl_has_secret("a${file:B}"), 1);
    ck_assert_int_eq(http_tmpl_has_secret("a${key}"), 0);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_tmpl_headers)
{
    char err[256];

    ck_assert_int_eq(http_tmpl_header_ok("Authorization: Bearer x", err, sizeof(err)), 0);
    ck_assert_int_eq(http_tmpl_header_ok("X-A:", err, sizeof(err)), 0);
    /* a secret with a line break must not smuggle a header in */
    ck_assert_int_eq(http_tmpl_header_ok("X-A: a\r\nX-B: b", err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "X-A holds a control byte"), "%s", err);
    ck_assert_int_eq(http_tmpl_header_ok("X-A: a\nb", err, sizeof(err)), -1);
    ck_assert_int_eq(http_tmpl_header_ok("No colon", err, sizeof(err)), -1);
    ck_assert_int_eq(http_tmpl_header_ok(": empty name", err, sizeof(err)), -1);
    ck_assert_int_eq(http_tmpl_header_ok("Bad Name: x", err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_tmpl_key)
{
    char out[1024], other[1024], err[256];
    char *url;

    ck_assert_int_eq(http_tmpl_key_value("pay:m1:o1", 0, out, sizeof(out), err, sizeof(err)), 0);
    ck_assert_str_eq(out, "pay:m1:o1");
    ck_assert_int_eq(http_tmpl_key_value("pay:m 1:o1", 0, out, sizeof(out), err, sizeof(err)), 0);
    ck_assert_str_eq(out, "pay:m 1:o1");
    /* a server strips spaces at a value's ends: "a " and "a" would meet */
    ck_assert_int_eq(http_tmpl_key_value("pay:o1 ", 0, out, sizeof(out), err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "key_encoding = \"percent\""), "%s", err);
    /* percent: visible ASCII, and two keys never one value */
    ck_assert_int_eq(http_tmpl_key_value("pay:o1 ", 1, out, sizeof(out), err, sizeof(err)), 0);
    ck_assert_str_eq(out, "pay:o1%20");
    ck_assert_int_eq(http_tmpl_key_value("pay:o1%20", 1, other, sizeof(other), err, sizeof(err)),
                     0);
    ck_assert_str_eq(other, "pay:o1%2520");
    ck_assert_int_eq(http_tmpl_key_value("k:\xc3\xa9", 1, out, sizeof(out), err, sizeof(err)), 0);
    ck_assert_str_eq(out, "k:%C3%A9");
    /* the URL: every byte but the unreserved ones encoded */
    url = http_tmpl_url("http://h/p/${key}?again=${key}", "pay:m/1 o?&%");
    ck_assert_str_eq(url, "http://h/p/pay%3Am%2F1%20o%3F%26%25?again=pay%3Am%2F1%20o%3F%26%25");
    free(url);
    url = http_tmpl_url("http://h/p/${key}", "a-b_c.d~e");
    ck_assert_str_eq(url, "http://h/p/a-b_c.d~e");
    free(url);
}
END_TEST

START_TEST(test_snapshot)
{
    char *s, start[16];

    s = http_snapshot(201, "{\"id\": 7}\n", 10, 1, 100);
    ck_assert_str_eq(s, "{\"id\": 7}\n");
    free(s);
    s = http_snapshot(204, NULL, 0, 1, 100);
    ck_assert_str_eq(s, "{\"status\":204}");
    free(s);
    s = http_snapshot(200, "OK\tdone", 7, 1, 100);
    ck_assert_str_eq(s, "{\"status\":200,\"body\":\"OK done\",\"truncated\":false}");
    free(s);
    /* JSON over the bound, or read only in part: its start, as a string */
    s = http_snapshot(200, "{\"a\":\"0123456789\"}", 18, 1, 8);
    ck_assert_str_eq(s, "{\"status\":200,\"body\":\"{\\\"a\\\":\\\"01\",\"truncated\":true}");
    free(s);
    s = http_snapshot(200, "{\"a\":1}", 7, 0, 100);
    ck_assert_str_eq(s, "{\"status\":200,\"body\":\"{\\\"a\\\":1}\",\"truncated\":true}");
    free(s);
    /* bytes that are not UTF-8, and two JSON texts, are not kept as JSON */
    s = http_snapshot(200, "\"\xff\"", 3, 1, 100);
    ck_assert_str_eq(s, "{\"status\":200,\"body\":\"\\\"?\\\"\",\"truncated\":false}");
    free(s);
    s = http_snapshot(200, "1 2", 3, 1, 100);
    ck_assert_str_eq(s, "{\"status\":200,\"body\":\"1 2\",\"truncated\":false}");
    free(s);
    http_body_start("h\xc3\xa9llo\x01world", 12, start, sizeof(start));
    ck_assert_str_eq(start, "h\xc3\xa9llo?world");
    http_body_start("abc\xc3\xa9", 5, start, 5); /* a character is never cut */
    ck_assert_str_eq(start, "abc");
}
END_TEST

/* Loads text as a configuration file and its handler.http group. */
static int conf_load(const char *text, http_conf *c, char *err, size_t err_size)
{
    char path[] = "/tmp/dd-http-conf.XXXXXX";
    int fd = mkstemp(path), rc = -1;
    config_t cfg;
    FILE *f;

    ck_assert_int_ge(fd, 0);
    ck_assert_ptr_nonnull(f = fdopen(fd, "w"));
    fputs(text, f);
    fclose(f);
    config_init(&cfg);
    if (config_read_file(&cfg, path) == CONFIG_TRUE) {
        rc = http_conf_load(c, config_lookup(&cfg, "handler.http"), err, err_size);
        /* the path is in the errors: compare without it */
        if (rc && strncmp(err, path, strlen(path)) == 0)
            memmove(err, err + strlen(path), strlen(err + strlen(path)) + 1);
    } else {
        snprintf(err, err_size, "libconfig: %s", config_error_text(&cfg));
    }
    config_destroy(&cfg);
    unlink(path);
    return rc;
}

START_TEST(test_conf)
{
    http_conf c;
    char err[512];

    setenv("DD_HTTP_UNIT_TOKEN", "s3cret", 1);
    ck_assert_msg(conf_load("handler = { http = {\n"
                            "  url = \"https://orders.test/api/p\";\n"
                            "  timeout = \"1m30s\"; connect_timeout = \"2m\";\n"
                            "  headers = [ \"Authorization: Bearer ${env:DD_HTTP_UNIT_TOKEN}\" ];\n"
                            "  reconcile_url = \"https://orders.test/api/p/${key}\";\n"
                            "  statuses = { retry = [ 409 ]; done = [ 202 ]; reject = [ \"5xx\" ]; "
                            "other = \"reject\"; };\n"
                            "  tls = { ca_file = \"ca.pem\"; };\n"
                            "}; };\n",
                            &c, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_str_eq(c.url, "https://orders.test/api/p");
    ck_assert_str_eq(c.reconcile_url, "https://orders.test/api/p/${key}");
    ck_assert_str_eq(c.hdrs->data, "Authorization: Bearer s3cret");
    ck_assert_str_eq(c.hdrs->next->data, "Content-Type: application/json");
    ck_assert_str_eq(c.key_header, "Idempotency-Key");
    ck_assert_str_eq(c.fence_header, "Dedupd-Fence");
    ck_assert_str_eq(c.method, "POST");
    ck_assert_int_eq(c.timeout_ms, 90000);
    ck_assert_int_eq(c.connect_timeout_ms, 90000); /* never longer than the whole */
    ck_assert_int_eq(http_status_verdict(&c.statuses, 409), HTTP_RETRY);
    ck_assert_int_eq(http_status_verdict(&c.statuses, 503), HTTP_REJECT);
    ck_assert_int_eq(http_status_verdict(&c.statuses, 429), HTTP_RETRY); /* its default stays */
    ck_assert_int_eq(http_status_verdict(&c.statuses, 302), HTTP_REJECT);
    ck_assert_str_eq(c.ca_file, "/tmp/ca.pem"); /* relative to the file's directory */
    http_conf_release(&c);
}
END_TEST

START_TEST(test_conf_errors)
{
    static const struct {
        const char *body, *err;
    } bad[] = {
        {"", ":1: handler.http.url: required: the service's URL"},
        {"url = \"ftp://x\";", ":1: handler.http.url: \"ftp://x\": an http:// or https:// URL "
                               "expected"},
        {"url = \"http://x\";\n tmeout = \"5s\";", ":2: handler.http.tmeout: unknown setting"},
        {"url = \"http://x\"; timeout = \"5 s\";",
         ":1: handler.http.timeout: expected a duration like \"500ms\" or \"5s\", from 1 ms to "
         "600 s"},
        {"url = \"http://x\"; headers = [ \"Idempotency-Key: mine\" ];",
         ":1: handler.http.headers: Idempotency-Key is set by the handler on every request"},
        {"url = \"http://x\"; headers = [ \"X: ${env:DD_HTTP_UNIT_UNSET}\" ];",
         ":1: handler.http.headers: element 1: ${env:DD_HTTP_UNIT_UNSET}: the environment "
         "variable is not set"},
        {"url = \"http://x\"; reconcile_url = \"http://x/p\";",
         ":1: handler.http.reconcile_url: names no ${key}: the URL must say which key is asked "
         "about"},
        {"url = \"http://x\"; statuses = { done = [ 200 ]; retry = [ 200 ]; };",
         ":1: handler.http.statuses: retry: 200 is listed twice"},
        {"url = \"http://x\"; statuses = { done = [ \"2xx\", \"2xx\" ]; };",
         ":1: handler.http.statuses: done: 2xx is listed twice"},
        {"url = \"http://x\"; statuses = { reject = [ 700 ]; };",
         ":1: handler.http.statuses: reject: 700 is not an HTTP status (100..599)"},
        {"url = \"http://x\"; statuses = { other = \"done\"; };",
         ":1: handler.http.statuses.other: \"done\": expected \"reject\" or \"retry\""},
        {"url = \"http://x\"; check = \"GET\";",
         ":1: handler.http.check: \"GET\": expected \"OPTIONS\", \"HEAD\" or \"none\""},
        {"url = \"http://x\"; tls = { key_file = \"k.pem\"; };",
         ":1: handler.http.tls.key_file: needs tls.cert_file, the client certificate"},
        {"url = \"http://x\"; key_header = \"Bad Name\";",
         ":1: handler.http.key_header: \"Bad Name\" is not a header name"},
        {"url = \"http://x\"; resolve = [ \"orders.test:443\" ];",
         ":1: handler.http.resolve: element 1: \"orders.test:443\": expected "
         "\"host:port:address\""},
    };
    char text[1024], err[512];
    http_conf c;

    unsetenv("DD_HTTP_UNIT_UNSET");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text), "handler = { http = { %s }; };\n", bad[i].body);
        ck_assert_int_eq(conf_load(text, &c, err, sizeof(err)), -1);
        ck_assert_msg(strcmp(err, bad[i].err) == 0, "%s\n  got: %s\n want: %s", bad[i].body, err,
                      bad[i].err);
    }
}
END_TEST

START_TEST(test_url_shown)
{
    static const char *const cases[][2] = {
        {"https://orders.test/p", "https://orders.test/p"},
        {"https://u:p@orders.test/p", "https://***@orders.test/p"},
        {"http://u:p@x@h:8080/a@b?c@d", "http://***@h:8080/a@b?c@d"},
        {"http://h/p?u=a@b", "http://h/p?u=a@b"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s = http_conf_shown(cases[i][0]);
        ck_assert_str_eq(s, cases[i][1]);
        free(s);
    }
}
END_TEST

START_TEST(test_duration)
{
    ck_assert_int_eq(http_conf_duration_ms("250ms"), 250);
    ck_assert_int_eq(http_conf_duration_ms("5s"), 5000);
    ck_assert_int_eq(http_conf_duration_ms("1m30s"), 90000);
    ck_assert_int_eq(http_conf_duration_ms("1h"), 3600000);
    ck_assert_int_eq(http_conf_duration_ms("5"), -1);
    ck_assert_int_eq(http_conf_duration_ms("s"), -1);
    ck_assert_int_eq(http_conf_duration_ms(""), -1);
    ck_assert_int_eq(http_conf_duration_ms("5d"), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_handler");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_status_defaults);
    tcase_add_test(tc, test_status_set);
    tcase_add_test(tc, test_retry_after);
    tcase_add_test(tc, test_tmpl_secrets);
    tcase_add_test(tc, test_tmpl_headers);
    tcase_add_test(tc, test_tmpl_key);
    tcase_add_test(tc, test_snapshot);
    tcase_add_test(tc, test_conf);
    tcase_add_test(tc, test_conf_errors);
    tcase_add_test(tc, test_url_shown);
    tcase_add_test(tc, test_duration);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
