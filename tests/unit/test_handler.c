/*
 * Unit tests for dd_handler: loading plugins and refusing bad ones.
 *
 * The th_*.so test handlers are built next to this test (DD_TEST_HANDLER_DIR).
 * No database is needed: the calls exercised here never reach the server, and
 * an unconnected MYSQL handle is enough to see the broken-transaction check.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_handler.h"
#include "check_run.h"

static char path_buf[4096];

static const char *th_path(const char *name)
{
    const char *dir = getenv("DD_TEST_HANDLER_DIR");

    ck_assert_msg(dir != NULL, "DD_TEST_HANDLER_DIR is not set");
    snprintf(path_buf, sizeof(path_buf), "%s/%s.so", dir, name);
    return path_buf;
}

/* Loads name and expects failure; returns the error text. */
static void load_fails(const char *path, char *err, size_t errlen)
{
    dd_handler_t *h = (dd_handler_t *)0x1;

    ck_assert_int_ne(dd_handler_load(&h, path, NULL, 0, err, errlen), 0);
    ck_assert_ptr_null(h);
    ck_assert_msg(strstr(err, path) != NULL, "error does not name the file: %s", err);
}

START_TEST(test_load_scripted)
{
    dd_handler_t *h = NULL;
    char err[512] = "";

    ck_assert_int_eq(dd_handler_load(&h, th_path("th_scripted"), NULL, 0, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(dd_handler_name(h), "th_scripted");
    dd_handler_destroy(h);
}
END_TEST

START_TEST(test_wrong_abi)
{
    char err[512] = "";

    load_fails(th_path("th_wrong_abi"), err, sizeof(err));
    ck_assert_msg(strstr(err, "ABI version 999") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "supports versions 1 to 7") != NULL, "%s", err);
}
END_TEST

START_TEST(test_no_symbol)
{
    char err[512] = "";

    load_fails(th_path("th_no_symbol"), err, sizeof(err));
    ck_assert_msg(strstr(err, "dedupd_handler_v1") != NULL, "%s", err);
}
END_TEST

START_TEST(test_no_handle)
{
    char err[512] = "";

    load_fails(th_path("th_no_handle"), err, sizeof(err));
    ck_assert_msg(strstr(err, "handle") != NULL, "%s", err);
}
END_TEST

START_TEST(test_missing_file)
{
    char err[512] = "";

    load_fails("/nonexistent/dedupd/handler.so", err, sizeof(err));
}
END_TEST

START_TEST(test_small_errstr)
{
    dd_handler_t *h = NULL;
    char err[16];

    memset(err, 'x', sizeof(err));
    ck_assert_int_ne(dd_handler_load(&h, th_path("th_wrong_abi"), NULL, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(strlen(err), sizeof(err) - 1);
}
END_TEST

START_TEST(test_destroy_null)
{
    dd_handler_destroy(NULL);
}
END_TEST

/* Builds a message whose payload is {"th": action}. */
static dedupd_status handle_action(dd_handler_t *h, MYSQL *db, const char *action,
                                   dedupd_result *res, int *broken)
{
    char payload[128];
    cJSON *json;
    dedupd_msg msg = {.topic = "t", .partition = 0, .offset = 7, .biz_key = "k1"};
    dedupd_status st;

    snprintf(payload, sizeof(payload), "{\"th\":\"%s\"}", action);
    json = cJSON_Parse(payload);
    msg.payload = payload;
    msg.payload_len = strlen(payload);
    msg.json = json;
    st = dd_handler_handle(h, db, NULL, &msg, res, broken);
    cJSON_Delete(json);
    return st;
}

START_TEST(test_handle_without_db)
{
    dd_handler_t *h = NULL;
    MYSQL *db = mysql_init(NULL);
    dedupd_result res;
    char err[512] = "";
    int broken = 0;

    ck_assert_int_eq(dd_handler_load(&h, th_path("th_scripted"), NULL, 0, err, sizeof(err)), 0);
    /* "reject" writes its effect first (integration tests look for writes
     * that were not rolled back); without a server that write fails: RETRY
     * with the server's error, and no response. */
    ck_assert_int_eq(handle_action(h, db, "reject", &res, &broken), DEDUPD_RETRY);
    ck_assert_ptr_nonnull(strstr(res.error, "th_effect insert"));
    ck_assert_ptr_null(res.response);
    /* An unconnected handle is not inside a transaction. */
    ck_assert_int_eq(broken, 1);

    ck_assert_int_eq(handle_action(h, db, "retry:1", &res, &broken), DEDUPD_RETRY);
    ck_assert_ptr_nonnull(strstr(res.error, "th_effect insert"));
    ck_assert_ptr_null(res.response);

    ck_assert_int_eq(handle_action(h, db, "no-such-action", &res, &broken), DEDUPD_REJECT);
    ck_assert_ptr_nonnull(strstr(res.error, "unknown th action"));
    mysql_close(db);
    dd_handler_destroy(h);
}
END_TEST

/* The response of one handle() call of h, into out. */
static void instance_call(dd_handler_t *h, MYSQL *db, char *out, size_t out_size)
{
    dedupd_msg msg = {.topic = "t", .payload = "{}", .payload_len = 2, .biz_key = "k"};
    dedupd_result res;
    int broken = 0;

    ck_assert_int_eq(dd_handler_handle(h, db, NULL, &msg, &res, &broken), DEDUPD_OK);
    ck_assert_ptr_nonnull(res.response);
    snprintf(out, out_size, "%s", res.response);
    free(res.response);
}

/* One file loaded twice (two routes naming it) is two instances: each its
 * own init and state; the loader's reference count keeps the file mapped
 * while either is alive, so destroying one leaves the other working. */
START_TEST(test_same_file_two_instances)
{
    dd_handler_t *a = NULL, *b = NULL;
    MYSQL *db = mysql_init(NULL);
    char err[512] = "", path[4096], out[64];

    snprintf(path, sizeof(path), "%s", th_path("th_instance"));
    ck_assert_int_eq(dd_handler_load(&a, path, NULL, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(dd_handler_load(&b, path, NULL, 0, err, sizeof(err)), 0);
    instance_call(a, db, out, sizeof(out));
    ck_assert_str_eq(out, "{\"instance\":1,\"calls\":1}");
    instance_call(b, db, out, sizeof(out));
    ck_assert_str_eq(out, "{\"instance\":2,\"calls\":1}");
    instance_call(a, db, out, sizeof(out));
    ck_assert_str_eq(out, "{\"instance\":1,\"calls\":2}");
    dd_handler_destroy(a); /* its fini, and one reference of the file */
    instance_call(b, db, out, sizeof(out));
    ck_assert_str_eq(out, "{\"instance\":2,\"calls\":2}");
    dd_handler_destroy(b);
    mysql_close(db);
}
END_TEST

/* A descriptor of the ABI 1 layout loads, and its (missing) handle_batch is
 * never read: the word after it is a non-NULL canary. */
START_TEST(test_abi_v1_loads)
{
    dd_handler_t *h = NULL;
    char err[512] = "";

    ck_assert_int_eq(dd_handler_load(&h, th_path("th_abi_v1"), NULL, 0, err, sizeof(err)), 0);
    ck_assert_str_eq(dd_handler_name(h), "th_abi_v1");
    ck_assert_int_eq(dd_handler_has_batch(h), 0);
    dd_handler_destroy(h);
}
END_TEST

/* Descriptors of every ABI version load: v1 and v2 built against the
 * frozen headers (tests/abi/), followed by canaries a reader of the newer
 * fields would take for function pointers; v3 with handle_conn and
 * handle_batch_conn instead of handle and handle_batch, and init_host. */
START_TEST(test_abi_versions_load)
{
    static const struct {
        const char *name;
        int batch;
    } want[] = {{"th_abi_v1", 0}, {"th_abi_v2", 1}, {"th_v3", 1}};
    char err[512] = "";

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        dd_handler_t *h = NULL;

        ck_assert_msg(dd_handler_load(&h, th_path(want[i].name), NULL, 0, err, sizeof(err)) == 0,
                      "%s: %s", want[i].name, err);
        ck_assert_str_eq(dd_handler_name(h), want[i].name);
        ck_assert_int_eq(dd_handler_has_batch(h), want[i].batch);
        /* the fields of ABI 4 (canaries in v1 and v2) are never read */
        ck_assert_int_eq(dd_handler_mode(h), DEDUPD_MODE_LOCAL);
        ck_assert_int_eq(dd_handler_has_reconcile(h), 0);
        ck_assert_int_eq(dd_handler_has_finish(h), 0);
        dd_handler_destroy(h);
    }
}
END_TEST

/* External mode: a descriptor without handle() loads; act() and
 * reconcile() answers are checked like handle()'s. */
START_TEST(test_external)
{
    dd_handler_t *h = NULL;
    dedupd_msg msg = {.topic = "t", .biz_key = "ok", .fence = 3};
    dedupd_result res;
    char err[512] = "";

    ck_assert_msg(dd_handler_load(&h, th_path("th_external"), NULL, 0, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(dd_handler_mode(h), DEDUPD_MODE_EXTERNAL);
    ck_assert_int_eq(dd_handler_has_reconcile(h), 1);
    ck_assert_int_eq(dd_handler_has_finish(h), 0);
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_OK);
    ck_assert_str_eq(res.response, "{\"fence\":3}");
    free(res.response);
    msg.biz_key = "later";
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_RETRY);
    ck_assert_str_eq(res.error, "not now");
    /* host->emit outside handle(): a clear error, outbox on or off. */
    msg.biz_key = "emit";
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_RETRY);
    ck_assert_msg(strstr(res.error, "emit: called outside handle() and handle_batch()"), "%s",
                  res.error);
    {
        const char *ns[] = {"0123456789abcdef0123456789abcdef"};
        ck_assert_int_eq(dd_handler_set_outbox(h, "dedup_record", ns, 1, 1000000), 0);
    }
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_RETRY);
    ck_assert_msg(strstr(res.error, "emit: called outside handle() and handle_batch()"), "%s",
                  res.error);
    dd_handler_set_outbox(h, NULL, NULL, 0, 0);
    msg.biz_key = "bad";
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_REJECT);
    ck_assert_str_eq(res.error, "handler th_external returned invalid status 42 from act");
    /* An OK whose effect happened keeps its status; a response over the
     * bound is dropped, and the error says why. */
    dd_handler_set_max_response(h, 5);
    msg.biz_key = "ok";
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_OK);
    ck_assert_ptr_null(res.response);
    ck_assert_ptr_nonnull(strstr(res.error, "response of 11 bytes"));
    dd_handler_set_max_response(h, 0);
    /* host->retry_after (ABI 7): the wait act() asked for, for this call
     * only. */
    msg.biz_key = "wait";
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_RETRY);
    ck_assert_int_eq(dd_handler_retry_after_ms(), 5000);
    msg.biz_key = "later";
    ck_assert_int_eq(dd_handler_act(h, &msg, &res), DEDUPD_RETRY);
    ck_assert_int_eq(dd_handler_retry_after_ms(), -1);

    ck_assert_int_eq(dd_handler_reconcile(h, "done", 4, &res), DEDUPD_DONE);
    ck_assert_str_eq(res.response, "{\"fence\":4}");
    free(res.response);
    ck_assert_int_eq(dd_handler_reconcile(h, "other", 4, &res), DEDUPD_NOT_DONE);
    ck_assert_ptr_null(res.response);
    ck_assert_int_eq(dd_handler_reconcile(h, "weird", 4, &res), DEDUPD_UNKNOWN);
    ck_assert_str_eq(res.error, "handler th_external returned invalid outcome 9 from reconcile");
    ck_assert_int_eq(dd_handler_reconcile(h, "wait", 4, &res), DEDUPD_UNKNOWN);
    ck_assert_int_eq(dd_handler_retry_after_ms(), 3000);
    /* Without finish(), the finish step is an OK that calls nothing. */
    res = (dedupd_result){.response = NULL};
    ck_assert_int_eq(dd_handler_finish(h, NULL, &msg, &res, NULL), DEDUPD_OK);
    dd_handler_destroy(h);
}
END_TEST

/* check() (ABI 7) answers `dedupd check`; a handler without it, or of an
 * older ABI, has none; host->retry_after refuses outside act/reconcile. */
START_TEST(test_probe)
{
    dd_handler_t *h = NULL;
    char err[512] = "", report[256];

    ck_assert_msg(dd_handler_load(&h, th_path("th_external"), NULL, 0, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(dd_handler_probe(h, report, sizeof(report)), DEDUPD_CHECK_WARN);
    ck_assert_str_eq(report, "reached nothing; retry_after here: -1");
    dd_handler_destroy(h);
    /* built against ABI 6: a canary lies where check() is now */
    ck_assert_msg(dd_handler_load(&h, th_path("th_abi_v6"), NULL, 0, err, sizeof(err)) == 0, "%s",
                  err);
    ck_assert_int_eq(dd_handler_probe(h, report, sizeof(report)), -1);
    dd_handler_destroy(h);
}
END_TEST

START_TEST(test_external_needs_act)
{
    char err[512] = "";

    load_fails(th_path("th_external_no_act"), err, sizeof(err));
    ck_assert_msg(strstr(err, "no act function (external mode)") != NULL, "%s", err);
}
END_TEST

START_TEST(test_unknown_mode)
{
    char err[512] = "";

    load_fails(th_path("th_bad_mode"), err, sizeof(err));
    ck_assert_msg(strstr(err, "mode 7") != NULL, "%s", err);
}
END_TEST

/* n messages {"th": actions[i]} through dd_handler_handle_batch. */
static dedupd_status batch_actions(dd_handler_t *h, MYSQL *db, const char *const *actions, size_t n,
                                   dedupd_result *res, int *broken)
{
    dedupd_msg msgs[8];
    const dedupd_msg *msgv[8];
    cJSON *json[8];
    dedupd_status st;

    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        json[i] = cJSON_CreateObject();
        cJSON_AddStringToObject(json[i], "th", actions[i]);
        msgs[i] = (dedupd_msg){.topic = "t", .offset = (int64_t)i, .json = json[i], .biz_key = "k"};
        msgv[i] = &msgs[i];
    }
    st = dd_handler_handle_batch(h, db, NULL, msgv, n, res, broken);
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(json[i]);
    return st;
}

START_TEST(test_handle_batch)
{
    static const char *const ok[] = {"ok", "ok", "ok"};
    static const char *const decline[] = {"ok", "decline", "ok"};
    static const char *const bad[] = {"status7", "ok"};
    dd_handler_t *h = NULL;
    MYSQL *db = mysql_init(NULL);
    dedupd_result res[3];
    char err[512] = "";
    int broken = 0;

    ck_assert_int_eq(dd_handler_load(&h, th_path("th_batch"), NULL, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(dd_handler_has_batch(h), 1);

    ck_assert_int_eq(batch_actions(h, db, ok, 3, res, &broken), DEDUPD_OK);
    ck_assert_str_eq(res[0].response, "{\"i\":0}");
    ck_assert_str_eq(res[2].response, "{\"i\":2}");
    ck_assert_int_eq(broken, 1); /* an unconnected handle is not in a transaction */
    for (size_t i = 0; i < 3; i++)
        free(res[i].response);

    /* Declined: the responses it made are freed (ASan checks), reason kept. */
    ck_assert_int_eq(batch_actions(h, db, decline, 3, res, &broken), DEDUPD_REJECT);
    ck_assert_str_eq(res[0].error, "th_batch declines");
    for (size_t i = 0; i < 3; i++)
        ck_assert_ptr_null(res[i].response);

    ck_assert_int_eq(batch_actions(h, db, bad, 2, res, &broken), DEDUPD_REJECT);
    ck_assert_ptr_nonnull(strstr(res[0].error, "invalid status 7"));
    ck_assert_ptr_null(res[0].response);
    mysql_close(db);
    dd_handler_destroy(h);
}
END_TEST

/* A response over the bound: handle() turns OK into REJECT with both
 * sizes; handle_batch() declines (the message then goes through handle()). */
START_TEST(test_response_bound)
{
    static const char *const ok[] = {"ok", "ok"};
    dd_handler_t *h = NULL;
    MYSQL *db = mysql_init(NULL);
    dedupd_result res[2];
    dedupd_msg msg = {.topic = "t", .biz_key = "k"};
    char err[512] = "";
    int broken = 0;

    ck_assert_int_eq(dd_handler_load(&h, th_path("th_batch"), NULL, 0, err, sizeof(err)), 0);
    dd_handler_set_max_response(h, 15); /* {"single":true} is 15 bytes, {"i":0} 7 */
    ck_assert_int_eq(dd_handler_handle(h, db, NULL, &msg, res, &broken), DEDUPD_OK);
    ck_assert_str_eq(res[0].response, "{\"single\":true}");
    free(res[0].response);
    ck_assert_int_eq(batch_actions(h, db, ok, 2, res, &broken), DEDUPD_OK);
    free(res[0].response);
    free(res[1].response);

    dd_handler_set_max_response(h, 14);
    ck_assert_int_eq(dd_handler_handle(h, db, NULL, &msg, res, &broken), DEDUPD_REJECT);
    ck_assert_ptr_null(res[0].response);
    ck_assert_str_eq(res[0].error, "handler th_batch returned a response of 15 bytes, more "
                                   "than handler.max_response_bytes (14)");

    dd_handler_set_max_response(h, 6);
    ck_assert_int_eq(batch_actions(h, db, ok, 2, res, &broken), DEDUPD_REJECT);
    ck_assert_ptr_nonnull(strstr(res[0].error, "response of 7 bytes"));
    ck_assert_ptr_null(res[0].response);
    ck_assert_ptr_null(res[1].response);
    mysql_close(db);
    dd_handler_destroy(h);
}
END_TEST

/* The ledger's amount check, on an unconnected handle: a valid payment gets
 * as far as the database (RETRY, no server), an invalid one is REJECTed
 * with the reason. At most 2 decimals, positive, at most 1e12. */
static dedupd_status ledger_amount(dd_handler_t *h, MYSQL *db, const char *amount,
                                   dedupd_result *res)
{
    char payload[256];
    cJSON *json;
    dedupd_msg msg = {.topic = "t", .partition = 0, .offset = 7, .biz_key = "pay:m1:o1"};
    dedupd_status st;
    int broken = 0;

    snprintf(payload, sizeof(payload),
             "{\"merchant_id\":\"m1\",\"order_no\":\"o1\",\"txn_id\":\"t1\",\"amount\":%s,"
             "\"currency\":\"EUR\",\"status\":\"PAID\"}",
             amount);
    json = cJSON_Parse(payload);
    ck_assert_ptr_nonnull(json);
    msg.payload = payload;
    msg.payload_len = strlen(payload);
    msg.json = json;
    memset(res, 0, sizeof(*res));
    st = dd_handler_handle(h, db, NULL, &msg, res, &broken);
    cJSON_Delete(json);
    free(res->response);
    return st;
}

START_TEST(test_ledger_amounts)
{
    static const char *const ok[] = {"12.34", "0.01",       "0.07", "19.99",
                                     "100",   "1234567.89", "1e12", "999999999999.99",
                                     "0.1",   "5e-2"};
    static const struct {
        const char *amount, *why;
    } bad[] = {{"12.345", "at most 2 decimals"},
               {"0.001", "at most 2 decimals"},
               {"0.30000000000000004", "at most 2 decimals"},
               {"19.999999", "at most 2 decimals"},
               {"0", "positive"},
               {"-5", "positive"},
               {"1000000000000.01", "at most 1000000000000"},
               {"\"12.34\"", "must be a number"}};
    const char *path = getenv("DD_LEDGER_SO");
    dd_handler_t *h = NULL;
    MYSQL *db = mysql_init(NULL);
    dedupd_result res;
    char err[512] = "";

    ck_assert_msg(path != NULL, "DD_LEDGER_SO is not set");
    ck_assert_int_eq(dd_handler_load(&h, path, NULL, 0, err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ck_assert_msg(ledger_amount(h, db, ok[i], &res) == DEDUPD_RETRY, "amount %s: %s", ok[i],
                      res.error);
        ck_assert_msg(strstr(res.error, "amount") == NULL, "amount %s: %s", ok[i], res.error);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(ledger_amount(h, db, bad[i].amount, &res) == DEDUPD_REJECT, "amount %s",
                      bad[i].amount);
        ck_assert_msg(strstr(res.error, bad[i].why) != NULL, "amount %s: %s", bad[i].amount,
                      res.error);
    }
    mysql_close(db);
    dd_handler_destroy(h);
}
END_TEST

static Suite *handler_suite(void)
{
    Suite *s = suite_create("handler");
    TCase *tc = tcase_create("load");

    tcase_add_test(tc, test_load_scripted);
    tcase_add_test(tc, test_wrong_abi);
    tcase_add_test(tc, test_no_symbol);
    tcase_add_test(tc, test_no_handle);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_small_errstr);
    tcase_add_test(tc, test_destroy_null);
    tcase_add_test(tc, test_handle_without_db);
    tcase_add_test(tc, test_same_file_two_instances);
    tcase_add_test(tc, test_abi_v1_loads);
    tcase_add_test(tc, test_abi_versions_load);
    tcase_add_test(tc, test_external);
    tcase_add_test(tc, test_probe);
    tcase_add_test(tc, test_external_needs_act);
    tcase_add_test(tc, test_unknown_mode);
    tcase_add_test(tc, test_handle_batch);
    tcase_add_test(tc, test_response_bound);
    tcase_add_test(tc, test_ledger_amounts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(handler_suite());
}
