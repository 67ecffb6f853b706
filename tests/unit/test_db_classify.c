/*
 * Unit tests for dd_db_classify (dd_db.c): which server and client errors
 * make dedupd roll back and replay the batch, and which stop it.
 */
#include <check.h>

#include "dd_common.h"
#include "dd_db.h"
#include "check_run.h"

/* Errors a reconnect or a replay of the batch gets past. */
static const unsigned int retriable[] = {
    1205, /* lock wait timeout */
    1213, /* deadlock, or a Galera certification failure */
    1047, /* Galera node not ready */
    1180, /* error during COMMIT */
    1290, /* read-only while a fail-over runs */
    2006, /* server has gone away */
    2013, /* lost connection during a query */
    4031, /* disconnected by the server */
};

/* Errors no retry fixes: the configuration or the schema is wrong. */
static const unsigned int fatal[] = {
    1045, /* access denied */
    1146, /* unknown table */
    1054, /* unknown column */
    1064, /* syntax error */
    1062, /* duplicate key */
};

START_TEST(test_ok)
{
    ck_assert_int_eq(dd_db_classify(0), DD_OK);
}
END_TEST

START_TEST(test_retriable)
{
    ck_assert_msg(dd_db_classify(retriable[_i]) == DD_ERR_RETRIABLE, "error %u should be retriable",
                  retriable[_i]);
}
END_TEST

START_TEST(test_fatal)
{
    ck_assert_msg(dd_db_classify(fatal[_i]) == DD_ERR_FATAL, "error %u should be fatal", fatal[_i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db_classify");
    TCase *tc = tcase_create("db_classify");

    tcase_add_test(tc, test_ok);
    tcase_add_loop_test(tc, test_retriable, 0, (int)DD_ARRAY_LEN(retriable));
    tcase_add_loop_test(tc, test_fatal, 0, (int)DD_ARRAY_LEN(fatal));
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
