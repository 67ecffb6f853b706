/*
 * Unit tests for dd_grants: the message for a privilege the server denies,
 * and the documented GRANT statements. sql/grants.sql is what the test bed
 * grants (tests/integration/lib.sh) and docs/OPERATIONS.md quotes it: the
 * two must hold the same GRANT lines, in the same order; its [runtime] and
 * [outbox] lines are what dedupd checks (dd_grants_render), and the
 * walkthrough of docs/HANDLERS.md grants each of the [runtime] ones.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_buf.h"
#include "dd_common.h"
#include "dd_grants.h"
#include "check_run.h"

static char *read_all(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *text;
    long len;

    ck_assert_msg(fp != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    text = calloc(1, (size_t)len + 1);
    ck_assert_int_eq(fread(text, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    return text;
}

/* The lines of text starting with "GRANT ", one per line, into out. */
static void grant_lines(const char *text, char *out, size_t out_size)
{
    size_t used = 0;

    out[0] = '\0';
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        size_t len = strcspn(p, "\n");
        if (strncmp(p, "GRANT ", 6) != 0) continue;
        ck_assert_uint_lt(used + len + 2, out_size);
        memcpy(out + used, p, len);
        used += len;
        out[used++] = '\n';
        out[used] = '\0';
    }
}

START_TEST(test_doc_quotes_grants_sql)
{
    const char *dir = getenv("DD_TEST_SRC_DIR");
    char path[PATH_MAX], sql[8192], doc[8192];
    char *text;

    ck_assert_msg(dir != NULL, "DD_TEST_SRC_DIR is not set");
    snprintf(path, sizeof(path), "%s/sql/grants.sql", dir);
    text = read_all(path);
    grant_lines(text, sql, sizeof(sql));
    free(text);
    snprintf(path, sizeof(path), "%s/docs/OPERATIONS.md", dir);
    text = read_all(path);
    grant_lines(text, doc, sizeof(doc));
    free(text);
    ck_assert_msg(strstr(sql, "GRANT CREATE TEMPORARY TABLES ON `payments`.* TO 'dedupd'@'%';"),
                  "%s", sql);
    ck_assert_msg(strcmp(sql, doc) == 0,
                  "docs/OPERATIONS.md's GRANT lines differ from sql/grants.sql's:\n%s\n---\n%s",
                  doc, sql);
}
END_TEST

/* The GRANT lines of text's section "-- [name]", up to the next section. */
static void section_lines(const char *text, const char *name, char *out, size_t out_size)
{
    char head[64];
    const char *p = strstr(text, (snprintf(head, sizeof(head), "-- [%s]", name), head)), *end;

    ck_assert_msg(p != NULL, "no section %s", head);
    end = strstr(p + 1, "\n-- [");
    {
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char *part = strndup(p, n);
        grant_lines(part, out, out_size);
        free(part);
    }
}

/* What dedupd checks is what sql/grants.sql grants, line by line. */
START_TEST(test_grants_sql_is_the_declaration)
{
    static const char *const sections[] = {"runtime", "outbox"};
    const char *dir = getenv("DD_TEST_SRC_DIR");
    char path[PATH_MAX], sql[4096];
    char *text;

    ck_assert_msg(dir != NULL, "DD_TEST_SRC_DIR is not set");
    snprintf(path, sizeof(path), "%s/sql/grants.sql", dir);
    text = read_all(path);
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        dd_buf_t want = {0};
        ck_assert_int_eq(
            dd_grants_render(sections[i], "payments", "dedup_record", "'dedupd'@'%'", &want), 0);
        section_lines(text, sections[i], sql, sizeof(sql));
        ck_assert_msg(want.p && strcmp(sql, want.p) == 0,
                      "sql/grants.sql's [%s] lines differ from what dedupd checks "
                      "(src/db/dd_grants.c, dd_grants_needed):\n%s\n--- dedupd checks:\n%s",
                      sections[i], sql, want.p ? want.p : "");
        dd_buf_release(&want);
    }
    free(text);
    ck_assert_msg(dd_grants_probed(), "a privilege in dd_grants_needed has no probe");
}
END_TEST

/* The walkthrough's runtime user gets every privilege dedupd checks. */
START_TEST(test_walkthrough_grants)
{
    const char *dir = getenv("DD_TEST_SRC_DIR");
    char path[PATH_MAX];
    dd_buf_t want = {0};
    char *text;

    ck_assert_msg(dir != NULL, "DD_TEST_SRC_DIR is not set");
    snprintf(path, sizeof(path), "%s/docs/HANDLERS.md", dir);
    text = read_all(path);
    ck_assert_int_eq(dd_grants_render("runtime", "shop", "dedup_record", "'dedupd'@'%'", &want), 0);
    for (char *line = want.p, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        *next++ = '\0';
        ck_assert_msg(strstr(text, line), "docs/HANDLERS.md, step 5, does not grant %s", line);
    }
    dd_buf_release(&want);
    free(text);
}
END_TEST

START_TEST(test_explain_table)
{
    char out[1024];

    ck_assert_int_eq(
        dd_grants_explain("dedupd_rt@%", "payments", "dedup_record", "INSERT", 0, "claim keys",
                          "INSERT INTO %s (biz_key, ...) VALUES ...", 1142,
                          "INSERT command denied to user 'dedupd_rt'@'localhost' for table "
                          "`payments`.`dedup_record`",
                          out, sizeof(out)),
        1);
    ck_assert_str_eq(out, "the database user 'dedupd_rt'@'%' lacks INSERT on "
                          "payments.dedup_record (needed to claim keys: INSERT INTO "
                          "dedup_record (biz_key, ...) VALUES ...): GRANT INSERT ON "
                          "`payments`.`dedup_record` TO 'dedupd_rt'@'%' (docs/OPERATIONS.md, "
                          "\"Database users and privileges\")");
}
END_TEST

/* The server's words win: a column, or the privilege it names. */
START_TEST(test_explain_column)
{
    char out[1024];

    ck_assert_int_eq(dd_grants_explain("rt@10.0.0.%", "p", "t", "UPDATE", 0, "record outcomes",
                                       "UPDATE %s SET ...", 1143,
                                       "SELECT command denied to user 'rt'@'10.0.0.7' for "
                                       "column 'expire_at' in table 't'",
                                       out, sizeof(out)),
                     1);
    ck_assert_msg(strstr(out, "the database user 'rt'@'10.0.0.%' lacks SELECT on column "
                              "expire_at of p.t (needed to record outcomes: UPDATE t SET ...): "
                              "GRANT SELECT ON `p`.`t` TO 'rt'@'10.0.0.%'"),
                  "%s", out);
}
END_TEST

START_TEST(test_explain_database)
{
    char out[1024];

    ck_assert_int_eq(dd_grants_explain("rt@%", "payments", "dedup_record",
                                       "CREATE TEMPORARY TABLES", 1, "hold the replay's set",
                                       "CREATE TEMPORARY TABLE dd_replay_key (...)", 1044,
                                       "Access denied for user 'rt'@'%' to database 'payments'",
                                       out, sizeof(out)),
                     1);
    ck_assert_msg(strstr(out, "lacks CREATE TEMPORARY TABLES on payments.* (needed to hold "
                              "the replay's set: CREATE TEMPORARY TABLE dd_replay_key (...)): "
                              "GRANT CREATE TEMPORARY TABLES ON `payments`.* TO 'rt'@'%'"),
                  "%s", out);
    /* Not a privilege error: nothing to explain. */
    out[0] = '\0';
    ck_assert_int_eq(dd_grants_explain("rt@%", "p", "t", "SELECT", 0, "x", "y", 1146,
                                       "Table 'p.t' doesn't exist", out, sizeof(out)),
                     0);
    ck_assert_str_eq(out, "");
}
END_TEST

static Suite *grants_suite(void)
{
    Suite *s = suite_create("grants");
    TCase *tc = tcase_create("grants");

    tcase_add_test(tc, test_doc_quotes_grants_sql);
    tcase_add_test(tc, test_grants_sql_is_the_declaration);
    tcase_add_test(tc, test_walkthrough_grants);
    tcase_add_test(tc, test_explain_table);
    tcase_add_test(tc, test_explain_column);
    tcase_add_test(tc, test_explain_database);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return dd_check_run(grants_suite());
}
