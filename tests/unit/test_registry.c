/*
 * Unit tests for dd_registry: a schema is fetched once however many
 * threads ask for it at the same time, then served from memory; 404 with
 * error code 40403 is schema_unknown (and remembered), a 503 or no server
 * is retriable (and not remembered); a schema that is not Avro is bad_avro;
 * json_sr payloads lose their header. The registry is a small HTTP server
 * on a thread of the test, on a loopback port of its own.
 */
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_registry.h"
#include "check_run.h"

static int srv_fd, srv_port, srv_gets[8];
static pthread_mutex_t srv_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *srv_answer(int id, int *status)
{
    *status = 200;
    switch (id) {
    case 1:
        return "{\"schema\":\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"R\\\",\\\"fields\\\":"
               "[{\\\"name\\\":\\\"id\\\",\\\"type\\\":\\\"string\\\"}]}\"}";
    case 2:
        *status = 404;
        return "{\"error_code\":40403,\"message\":\"Schema 2 not found\"}";
    case 3:
        *status = 503;
        return "{\"error_code\":50302,\"message\":\"Store is not available\"}";
    case 4:
        return "{\"schema\":\"syntax = \\\"proto3\\\";\",\"schemaType\":\"PROTOBUF\"}";
    default:
        *status = 404;
        return "{\"error_code\":404,\"message\":\"HTTP 404 Not Found\"}";
    }
}

/* One connection: one GET /schemas/ids/N, answered after 200 ms. */
static void *srv_conn(void *arg)
{
    int fd = (int)(intptr_t)arg, id = 0, status;
    char req[2048], out[2048];
    ssize_t n = read(fd, req, sizeof(req) - 1);
    const char *body;

    if (n > 0) {
        req[n] = '\0';
        sscanf(req, "GET /schemas/ids/%d", &id);
        pthread_mutex_lock(&srv_mu);
        if (id >= 0 && id < 8) srv_gets[id]++;
        pthread_mutex_unlock(&srv_mu);
        usleep(200 * 1000);
        body = srv_answer(id, &status);
        n = snprintf(out, sizeof(out),
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, strlen(body), body);
        if (write(fd, out, (size_t)n) != n) perror("write");
    }
    close(fd);
    return NULL;
}

static void *srv_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_t t;
        int fd = accept(srv_fd, NULL, NULL);
        if (fd < 0) return NULL;
        pthread_create(&t, NULL, srv_conn, (void *)(intptr_t)fd);
        pthread_detach(t);
    }
}

static void srv_start(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    pthread_t t;

    srv_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(srv_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(srv_fd, 64), 0);
    getsockname(srv_fd, (struct sockaddr *)&a, &len);
    srv_port = ntohs(a.sin_port);
    pthread_create(&t, NULL, srv_main, NULL);
    pthread_detach(t);
}

static dd_registry_t *reg_new(dd_conf_registry_t *rc, char *url, size_t url_size, int port)
{
    dd_registry_t *reg = NULL;
    char err[300];

    snprintf(url, url_size, "http://127.0.0.1:%d/", port);
    *rc = (dd_conf_registry_t){.url = url, .timeout_ms = 2000};
    ck_assert_msg(dd_registry_new(&reg, rc, err, sizeof(err)) == 0, "%s", err);
    return reg;
}

typedef struct {
    dd_registry_t *reg;
    int rc;
} asker_t;

static void *asker(void *arg)
{
    asker_t *a = arg;
    const dd_avro_schema_t *s;
    dd_reason_t reason;
    char err[300];

    a->rc = dd_registry_schema(a->reg, 1, &s, &reason, err, sizeof(err));
    if (!a->rc && !s) a->rc = -100;
    return NULL;
}

START_TEST(test_once_per_id)
{
    dd_conf_registry_t rc;
    char url[64];
    dd_registry_t *reg;
    asker_t a[8];
    pthread_t t[8];

    srv_start();
    reg = reg_new(&rc, url, sizeof(url), srv_port);
    for (int i = 0; i < 8; i++) {
        a[i] = (asker_t){reg, -99};
        pthread_create(&t[i], NULL, asker, &a[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(a[i].rc, 0);
    }
    asker(&a[0]); /* from memory */
    ck_assert_int_eq(a[0].rc, 0);
    ck_assert_int_eq(srv_gets[1], 1);
    ck_assert_uint_eq(dd_registry_fetches(reg), 1);
    dd_registry_destroy(reg);
}
END_TEST

START_TEST(test_answers)
{
    const dd_avro_schema_t *s;
    dd_conf_registry_t rc;
    dd_reason_t reason = DD_REASON_CNT;
    char url[64], err[300];
    dd_registry_t *reg;

    srv_start();
    reg = reg_new(&rc, url, sizeof(url), srv_port);
    for (int i = 0; i < 2; i++) { /* the second time from memory */
        ck_assert_int_eq(dd_registry_schema(reg, 2, &s, &reason, err, sizeof(err)),
                         DD_ERR_PERMANENT);
        ck_assert_int_eq(reason, DD_REASON_SCHEMA_UNKNOWN);
        ck_assert_str_eq(err, "the schema registry has no schema of id 2 (Schema 2 not found)");
    }
    ck_assert_int_eq(srv_gets[2], 1);
    for (int i = 0; i < 2; i++) { /* asked again each time */
        ck_assert_int_eq(dd_registry_schema(reg, 3, &s, &reason, err, sizeof(err)),
                         DD_ERR_RETRIABLE);
        ck_assert_msg(strstr(err, "answered HTTP 503") && strstr(err, "Store is not available"),
                      "%s", err);
    }
    ck_assert_int_eq(srv_gets[3], 2);
    ck_assert_int_eq(dd_registry_schema(reg, 4, &s, &reason, err, sizeof(err)), DD_ERR_PERMANENT);
    ck_assert_int_eq(reason, DD_REASON_BAD_AVRO);
    ck_assert_str_eq(err, "schema id 4 is a PROTOBUF schema, not an Avro one");
    /* a 404 without the registry's error code: a wrong URL, not an unknown id */
    ck_assert_int_eq(dd_registry_schema(reg, 5, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    dd_registry_destroy(reg);
}
END_TEST

START_TEST(test_no_server)
{
    const dd_avro_schema_t *s;
    dd_conf_registry_t rc;
    dd_reason_t reason;
    char url[64], err[300];
    dd_registry_t *reg = reg_new(&rc, url, sizeof(url), 1);

    ck_assert_int_eq(dd_registry_schema(reg, 1, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_msg(strstr(err, "the schema registry did not answer GET http://127.0.0.1:1/schemas/"
                              "ids/1"),
                  "%s", err);
    dd_registry_destroy(reg);
}
END_TEST

START_TEST(test_decode_formats)
{
    dd_registry_text_t out;
    dd_reason_t reason;
    char err[300];

    ck_assert_int_eq(dd_registry_decode(NULL, DD_FORMAT_JSON_SR, "\0\0\0\0\1{\"a\":1}", 12, 100,
                                        &out, &reason, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(out.len, 7);
    ck_assert_int_eq(memcmp(out.text, "{\"a\":1}", 7), 0);
    ck_assert_ptr_null(out.owned);
    ck_assert_int_eq(dd_registry_decode(NULL, DD_FORMAT_JSON_SR, "{\"a\":1}", 7, 100, &out, &reason,
                                        err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_int_eq(reason, DD_REASON_BAD_JSON);
    ck_assert_int_eq(dd_registry_decode(NULL, DD_FORMAT_AVRO, "\1\0\0\0\1", 5, 100, &out, &reason,
                                        err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_int_eq(reason, DD_REASON_BAD_AVRO);
    ck_assert_int_eq(dd_registry_decode(NULL, DD_FORMAT_AVRO, "\0\0\0\0\1abc", 8, 7, &out, &reason,
                                        err, sizeof(err)),
                     DD_ERR_PERMANENT);
    ck_assert_int_eq(reason, DD_REASON_PAYLOAD_TOO_LARGE);
    ck_assert_str_eq(err, "payload is 8 bytes, at most 7 allowed");
}
END_TEST

static Suite *registry_suite(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("registry");

    tcase_add_test(tc, test_once_per_id);
    tcase_add_test(tc, test_answers);
    tcase_add_test(tc, test_no_server);
    tcase_add_test(tc, test_decode_formats);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(registry_suite());
}
