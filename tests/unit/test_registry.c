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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_registry.h"
#include "check_run.h"

static int srv_fd, srv_port, srv_gets[16], srv_subject_gets[4];
static pthread_mutex_t srv_mu = PTHREAD_MUTEX_INITIALIZER;

#define R1                                                                                         \
    "{\"schema\":\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"R\\\",\\\"fields\\\":"            \
    "[{\\\"name\\\":\\\"id\\\",\\\"type\\\":\\\"string\\\"}]}\"}"

/* Schema references: id 8 is a Payment whose amount is a Money of subject
 * "money" version 1, which names the Currency of subject "currency"
 * version 3; id 9 uses Money too; id 10 refers to itself through them. */
#define CURRENCY                                                                                   \
    "{\"schema\":\"{\\\"type\\\":\\\"enum\\\",\\\"name\\\":\\\"x.Currency\\\","                    \
    "\\\"symbols\\\":[\\\"EUR\\\",\\\"USD\\\"]}\"}"
#define MONEY                                                                                      \
    "{\"schema\":\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"x.Money\\\",\\\"fields\\\":["     \
    "{\\\"name\\\":\\\"units\\\",\\\"type\\\":\\\"long\\\"},{\\\"name\\\":\\\"cur\\\","            \
    "\\\"type\\\":"                                                                                \
    "\\\"x.Currency\\\"}]}\",\"references\":[{\"name\":\"x.Currency\",\"subject\":\"currency\","   \
    "\"version\":3}]}"
#define PAYMENT(refs)                                                                              \
    "{\"schema\":\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"P\\\",\\\"fields\\\":[{"          \
    "\\\"name\\\":"                                                                                \
    "\\\"amount\\\",\\\"type\\\":\\\"x.Money\\\"}]}\",\"references\":" refs "}"

static const char *srv_answer(const char *path, int *status)
{
    int id = -1, v = 0;
    char subject[64] = "";

    *status = 200;
    if (sscanf(path, "/subjects/%63[^/]/versions/%d", subject, &v) == 2) {
        pthread_mutex_lock(&srv_mu);
        srv_subject_gets[strcmp(subject, "money") == 0 ? 0 : strcmp(subject, "currency") == 0]++;
        pthread_mutex_unlock(&srv_mu);
        if (strcmp(subject, "money") == 0 && v == 1) return MONEY;
        if (strcmp(subject, "currency") == 0 && v == 3) return CURRENCY;
        if (strcmp(subject, "loop") == 0)
            return "{\"schema\":\"\\\"int\\\"\",\"references\":[{\"name\":\"l\",\"subject\":"
                   "\"loop\",\"version\":1}]}";
        *status = 404;
        return "{\"error_code\":40401,\"message\":\"Subject not found.\"}";
    }
    sscanf(path, "/schemas/ids/%d", &id);
    switch (id) {
    case 1:
        return R1;
    case 2:
        *status = 404;
        return "{\"error_code\":40403,\"message\":\"Schema 2 not found\"}";
    case 3:
        *status = 503;
        return "{\"error_code\":50302,\"message\":\"Store is not available\"}";
    case 4:
        return "{\"schema\":\"syntax = \\\"proto3\\\";\",\"schemaType\":\"PROTOBUF\"}";
    case 6: /* a maintenance page, answered 200 */
        return "<html><body>Down for maintenance</body></html>";
    case 7: /* a member twice in the answer: which schema is it? */
        return "{\"schema\":\"\\\"int\\\"\",\"schema\":\"\\\"string\\\"\"}";
    case 8:
        return PAYMENT("[{\"name\":\"x.Money\",\"subject\":\"money\",\"version\":1}]");
    case 9:
        return PAYMENT("[{\"name\":\"x.Money\",\"subject\":\"money\",\"version\":1}]");
    case 10:
        return PAYMENT("[{\"name\":\"l\",\"subject\":\"loop\",\"version\":1}]");
    case 11: /* a member twice in the schema: scale 2 or 0? */
        return "{\"schema\":\"{\\\"type\\\":\\\"bytes\\\",\\\"logicalType\\\":\\\"decimal\\\","
               "\\\"precision\\\":4,\\\"scale\\\":2,\\\"scale\\\":0}\"}";
    case 12:
        return PAYMENT("[{\"name\":\"x.Money\",\"subject\":\"nope\",\"version\":1}]");
    default:
        *status = 404;
        return "{\"error_code\":404,\"message\":\"HTTP 404 Not Found\"}";
    }
}

/* ids 13 and 15: the headers, then the body a byte every 100 ms, for a
 * minute. */
static void srv_trickle(int fd)
{
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "Content-Length: 100000\r\n\r\n";

    if (write(fd, head, strlen(head)) < 0) return;
    for (int i = 0; i < 600; i++) {
        usleep(100 * 1000);
        if (write(fd, " ", 1) != 1) return;
    }
}

/* id 14: an answer of 9 MB. */
static void srv_huge(int fd)
{
    static char chunk[65536];
    char head[200];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n",
                     144 * 65536);

    memset(chunk, ' ', sizeof(chunk));
    if (write(fd, head, (size_t)n) != n) return;
    for (int i = 0; i < 144; i++)
        if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk)) return;
}

/* One connection: one GET, answered after 200 ms. */
static void *srv_conn(void *arg)
{
    int fd = (int)(intptr_t)arg, id = -1, status;
    char req[2048], path[512] = "", out[4096];
    ssize_t n = read(fd, req, sizeof(req) - 1);
    const char *body;

    if (n > 0) {
        req[n] = '\0';
        sscanf(req, "GET %511s", path);
        sscanf(path, "/schemas/ids/%d", &id);
        pthread_mutex_lock(&srv_mu);
        if (id >= 0 && id < 16) srv_gets[id]++;
        pthread_mutex_unlock(&srv_mu);
        usleep(200 * 1000);
        if (id == 13 || id == 15) {
            srv_trickle(fd);
        } else if (id == 14) {
            srv_huge(fd);
        } else {
            body = srv_answer(path, &status);
            n = snprintf(out, sizeof(out),
                         "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: "
                         "%zu\r\nConnection: close\r\n\r\n%s",
                         status, strlen(body), body);
            if (write(fd, out, (size_t)n) != n) perror("write");
        }
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

    signal(SIGPIPE, SIG_IGN);
    srv_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(srv_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(srv_fd, 64), 0);
    getsockname(srv_fd, (struct sockaddr *)&a, &len);
    srv_port = ntohs(a.sin_port);
    pthread_create(&t, NULL, srv_main, NULL);
    pthread_detach(t);
}

static int srv_got(int id)
{
    int n;

    pthread_mutex_lock(&srv_mu);
    n = srv_gets[id];
    pthread_mutex_unlock(&srv_mu);
    return n;
}

static dd_registry_t *reg_new_opts(dd_conf_registry_t *rc, char *url, size_t url_size, int port,
                                   const dd_registry_opts_t *opts)
{
    dd_registry_t *reg = NULL;
    char err[300];

    snprintf(url, url_size, "http://127.0.0.1:%d/", port);
    *rc = (dd_conf_registry_t){.url = url, .timeout_ms = 2000};
    ck_assert_msg(dd_registry_new(&reg, rc, opts, err, sizeof(err)) == 0, "%s", err);
    return reg;
}

static dd_registry_t *reg_new(dd_conf_registry_t *rc, char *url, size_t url_size, int port)
{
    return reg_new_opts(rc, url, url_size, port, NULL);
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

/* An answer that is not a registry's (a maintenance page answering 200, a
 * member twice) is a fault: retried, never remembered, never a verdict on
 * the message. A schema with a member twice is a verdict: bad_avro. */
START_TEST(test_bad_answers)
{
    const dd_avro_schema_t *s;
    dd_conf_registry_t rc;
    dd_reason_t reason = DD_REASON_CNT;
    uint64_t faults[DD_REGISTRY_FAULT_CNT];
    char url[64], err[300];
    dd_registry_t *reg;

    srv_start();
    reg = reg_new(&rc, url, sizeof(url), srv_port);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(dd_registry_schema(reg, 6, &s, &reason, err, sizeof(err)),
                         DD_ERR_RETRIABLE);
        ck_assert_msg(strstr(err, "schema id 6: the schema registry answered GET "
                                  "http://127.0.0.1:") &&
                          strstr(err, "/schemas/ids/6 with HTTP 200 but not with a registry's "
                                      "answer (not strict JSON: "),
                      "%s", err);
    }
    ck_assert_int_eq(srv_got(6), 2);
    ck_assert_int_eq(dd_registry_schema(reg, 7, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_msg(strstr(err, "duplicate member name \"schema\""), "%s", err);
    ck_assert_int_eq(dd_registry_schema(reg, 11, &s, &reason, err, sizeof(err)), DD_ERR_PERMANENT);
    ck_assert_int_eq(reason, DD_REASON_BAD_AVRO);
    ck_assert_str_eq(err, "schema id 11 is no valid Avro schema: the schema is not JSON: "
                          "duplicate member name \"scale\" (first at byte 54) at byte 64");
    dd_registry_faults(reg, faults);
    ck_assert_uint_eq(faults[DD_REGISTRY_FAULT_BAD_ANSWER], 3);
    ck_assert_uint_eq(faults[DD_REGISTRY_FAULT_UNREACHABLE], 0);
    dd_registry_destroy(reg);
}
END_TEST

/* Schema references, nested: each subject and version fetched once for
 * every schema that uses it; a cycle is a verdict, a reference the
 * registry lacks a fault. */
START_TEST(test_references)
{
    const dd_avro_schema_t *s;
    dd_conf_registry_t rc;
    dd_registry_text_t out;
    dd_reason_t reason = DD_REASON_CNT;
    char url[64], err[300];
    dd_registry_t *reg;

    srv_start();
    reg = reg_new(&rc, url, sizeof(url), srv_port);
    ck_assert_int_eq(dd_registry_decode(reg, DD_FORMAT_AVRO, "\0\0\0\0\x08\x96\x01\x02", 8, 100,
                                        &out, &reason, err, sizeof(err)),
                     0);
    ck_assert_str_eq(out.owned, "{\"amount\":{\"units\":75,\"cur\":\"USD\"}}");
    free(out.owned);
    ck_assert_int_eq(dd_registry_schema(reg, 9, &s, &reason, err, sizeof(err)), 0);
    ck_assert_int_eq(srv_subject_gets[0], 1); /* money */
    ck_assert_int_eq(srv_subject_gets[1], 1); /* currency */
    ck_assert_int_eq(dd_registry_schema(reg, 10, &s, &reason, err, sizeof(err)), DD_ERR_PERMANENT);
    ck_assert_int_eq(reason, DD_REASON_BAD_AVRO);
    ck_assert_str_eq(err, "schema id 10: its references form a cycle through version 1 of "
                          "subject loop");
    ck_assert_int_eq(dd_registry_schema(reg, 12, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_msg(strstr(err, "schema id 12 refers to version 1 of subject nope, and the schema "
                              "registry answered HTTP 404") &&
                      strstr(err, "Subject not found."),
                  "%s", err);
    dd_registry_destroy(reg);
}
END_TEST

/* Waits (bounded) until the registry settles one more fetch than seen. */
static void wait_settled(dd_registry_t *reg, uint64_t seen)
{
    for (int i = 0; i < 1000 && dd_registry_settled(reg) == seen; i++)
        usleep(10 * 1000);
    ck_assert_uint_gt(dd_registry_settled(reg), seen);
}

/* Asks for id without waiting: it is being fetched; waits for that. */
static void fetched(dd_registry_t *reg, uint32_t id)
{
    const dd_avro_schema_t *s;
    uint64_t seen = dd_registry_settled(reg);
    dd_reason_t reason;
    char err[300];

    ck_assert_int_eq(dd_registry_schema(reg, id, &s, &reason, err, sizeof(err)),
                     DD_REGISTRY_PENDING);
    wait_settled(reg, seen);
}

/* A caller that does not wait is told the schema is being fetched; a
 * failed id is fetched again only after the backoff. */
START_TEST(test_nowait)
{
    dd_registry_opts_t opts = {.nowait = 1, .backoff_initial_ms = 1500, .backoff_max_ms = 1500};
    const dd_avro_schema_t *s;
    dd_conf_registry_t rc;
    dd_reason_t reason;
    char url[64], err[300];
    dd_registry_t *reg;
    int64_t t0;

    srv_start();
    reg = reg_new_opts(&rc, url, sizeof(url), srv_port, &opts);
    t0 = dd_now_ms();
    ck_assert_int_eq(dd_registry_schema(reg, 1, &s, &reason, err, sizeof(err)),
                     DD_REGISTRY_PENDING);
    ck_assert_int_lt(dd_now_ms() - t0, 150); /* the server answers after 200 ms */
    ck_assert_str_eq(err, "schema id 1 is being fetched");
    wait_settled(reg, 0);
    ck_assert_int_eq(dd_registry_schema(reg, 1, &s, &reason, err, sizeof(err)), 0);
    fetched(reg, 3);
    ck_assert_int_eq(dd_registry_schema(reg, 3, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_msg(strstr(err, "answered HTTP 503"), "%s", err);
    ck_assert_int_eq(dd_registry_schema(reg, 3, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_int_eq(srv_got(3), 1); /* not before the backoff */
    usleep(1600 * 1000);
    fetched(reg, 3);
    ck_assert_int_eq(srv_got(3), 2);
    dd_registry_destroy(reg);
}
END_TEST

/* An answer trickling in a byte at a time ends at schema_registry.timeout,
 * and one past DD_REGISTRY_MAX_BODY bytes at that size; destroying the
 * registry ends a fetch under way within about a second. */
START_TEST(test_slow_and_large)
{
    dd_registry_opts_t opts = {.nowait = 1, .backoff_initial_ms = 60000, .backoff_max_ms = 60000};
    uint64_t faults[DD_REGISTRY_FAULT_CNT];
    const dd_avro_schema_t *s;
    dd_conf_registry_t rc;
    dd_reason_t reason;
    char url[64], err[300];
    dd_registry_t *reg;
    int64_t t0;

    srv_start();
    reg = reg_new_opts(&rc, url, sizeof(url), srv_port, &opts);
    rc.timeout_ms = 1000;
    t0 = dd_now_ms();
    fetched(reg, 13);
    ck_assert_int_lt(dd_now_ms() - t0, 2500);
    ck_assert_int_eq(dd_registry_schema(reg, 13, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_msg(strstr(err, "the schema registry did not answer GET"), "%s", err);
    rc.timeout_ms = 20000; /* 9 MB, under sanitizers too */
    fetched(reg, 14);
    ck_assert_int_eq(dd_registry_schema(reg, 14, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_msg(strstr(err, "/schemas/ids/14 is longer than 8388608 bytes"), "%s", err);
    dd_registry_faults(reg, faults);
    ck_assert_uint_eq(faults[DD_REGISTRY_FAULT_UNREACHABLE], 1);
    ck_assert_uint_eq(faults[DD_REGISTRY_FAULT_BAD_ANSWER], 1);
    rc.timeout_ms = 60000;
    ck_assert_int_eq(dd_registry_schema(reg, 15, &s, &reason, err, sizeof(err)),
                     DD_REGISTRY_PENDING);
    usleep(500 * 1000);
    t0 = dd_now_ms();
    dd_registry_destroy(reg);
    ck_assert_int_lt(dd_now_ms() - t0, 2500);
}
END_TEST

static int verify_answer;

static int verify_stub(void *opaque, uint32_t id, const unsigned char *fp, char *errstr,
                       size_t errstr_size)
{
    (void)opaque, (void)id, (void)fp;
    snprintf(errstr, errstr_size, "%s",
             verify_answer == DD_ERR_PERMANENT ? "recorded 00ff" : "down");
    return verify_answer;
}

/* A schema whose fingerprint differs from the database's record of its id
 * is never used and never remembered; nor is one the database could not
 * be asked about. */
START_TEST(test_verify)
{
    dd_registry_opts_t opts = {.verify = verify_stub};
    uint64_t faults[DD_REGISTRY_FAULT_CNT];
    const dd_avro_schema_t *s;
    dd_conf_registry_t rc;
    dd_reason_t reason;
    char url[64], err[300];
    dd_registry_t *reg;

    srv_start();
    reg = reg_new_opts(&rc, url, sizeof(url), srv_port, &opts);
    verify_answer = DD_ERR_PERMANENT;
    ck_assert_int_eq(dd_registry_schema(reg, 1, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(err, "schema id 1: the schema registry serves another schema than the one "
                          "this database recorded for the id (recorded 00ff); it is not used");
    verify_answer = DD_ERR_RETRIABLE;
    ck_assert_int_eq(dd_registry_schema(reg, 1, &s, &reason, err, sizeof(err)), DD_ERR_RETRIABLE);
    ck_assert_str_eq(err, "schema id 1: cannot check it against the database's record of schema "
                          "ids: down");
    verify_answer = 0;
    ck_assert_int_eq(dd_registry_schema(reg, 1, &s, &reason, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(srv_got(1), 3);
    dd_registry_faults(reg, faults);
    ck_assert_uint_eq(faults[DD_REGISTRY_FAULT_CHANGED], 1);
    ck_assert_uint_eq(faults[DD_REGISTRY_FAULT_UNVERIFIED], 1);
    dd_registry_destroy(reg);
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
    tcase_add_test(tc, test_bad_answers);
    tcase_add_test(tc, test_references);
    tcase_add_test(tc, test_nowait);
    tcase_add_test(tc, test_slow_and_large);
    tcase_add_test(tc, test_verify);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(registry_suite());
}
