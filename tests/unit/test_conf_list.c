/*
 * The engine of lists of groups over the top-level settings
 * (dd_conf_list.c), through its two registrations, `routes` and
 * mysql.shards. What an element may set is the schema's per flag: these
 * tests walk the table, so an item flagged tomorrow is covered without
 * changing them, and one not flagged is refused inside an element with
 * FILE:LINE.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_conf_int.h"
#include "check_run.h"
#include "conf_fixture.h"

#define HEAD "kafka = { brokers = \"b:9092\"; group = \"g\"; };\n"
#define ROUTE_A                                                                                    \
    "  { name = \"a\"; topics = [\"a\"]; key = \"k:${id}\"; table = \"ta\"; "                      \
    "handler = { path = \"h.so\"; }; }\n"

static void setup(void)
{
    conf_fixture_setup("conf_list");
}

static void teardown(void)
{
    conf_fixture_teardown();
}

/* The last part of a path: "mysql.shard_check" -> "shard_check". */
static const char *leaf(const char *path)
{
    const char *dot = strrchr(path, '.');

    return dot ? dot + 1 : path;
}

static int is_scalar(const dd_conf_item_t *it)
{
    return it->type == DD_CT_STRING || it->type == DD_CT_INT || it->type == DD_CT_BOOL ||
           it->type == DD_CT_DURATION || it->type == DD_CT_ENUM;
}

/* Every item that is not a shard's, set inside an element of mysql.shards,
 * is an unknown setting there, named with the element's line. */
START_TEST(test_shard_refuses_unflagged)
{
    char text[2048], want[PATH_MAX + 256];
    int tried = 0, err;

    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        const char *name = leaf(it->path);

        if ((it->per & DD_PER_SHARD) || !is_scalar(it) ||
            dd_conf_list_item_idx(&dd_conf_shard_list, name) >= 0)
            continue;
        snprintf(text, sizeof(text),
                 HEAD "mysql = {\n  database = \"d\";\n  shards = (\n    { host = \"h0\"; },\n"
                      "    { %s = 1; }\n  );\n};\nroutes = (\n" ROUTE_A ");\n",
                 name);
        ck_assert_ptr_null(load(text, &err));
        ck_assert_int_eq(err, DD_ERR_CONFIG);
        snprintf(want, sizeof(want), "%s:6: shard 1: unknown setting %s", confpath, name);
        ck_assert_str_eq(errstr, want);
        tried++;
    }
    ck_assert_int_gt(tried, 10); /* mysql.shard_check among them */
}
END_TEST

/* The text of a value of item it other than its default, and the value
 * the loader stores for it. 0: no such value for this type here. */
static int other_value(const dd_conf_item_t *it, char *out, size_t out_size, int64_t *stored)
{
    int64_t def = 0;

    switch (it->type) {
    case DD_CT_BOOL:
        def = it->def && strcmp(it->def, "true") == 0;
        snprintf(out, out_size, "%s", def ? "false" : "true");
        *stored = !def;
        return 1;
    case DD_CT_INT:
        *stored = it->max;
        snprintf(out, out_size, "%lld", (long long)it->max);
        return 1;
    case DD_CT_DURATION:
        if (it->min % DD_MS_SEC || it->min == 0) return 0;
        *stored = it->min / it->unit_ms;
        snprintf(out, out_size, "\"%llds\"", (long long)(it->min / DD_MS_SEC));
        return 1;
    default:
        return 0;
    }
}

static int64_t field_value(const void *e, const dd_conf_item_t *it)
{
    const char *p = (const char *)e + it->elem_off;

    if (it->type != DD_CT_BOOL && it->size == sizeof(int64_t)) return *(const int64_t *)p;
    return *(const int *)p;
}

/* "a.b" and value v as libconfig settings: "a = { b = v; }", the handler
 * group keeping its path. */
static void elem_setting(const char *epath, const char *v, char *out, size_t out_size)
{
    const char *dot = strchr(epath, '.');

    if (!dot)
        snprintf(out, out_size, "%s = %s; handler = { path = \"h.so\"; };", epath, v);
    else if (strncmp(epath, "handler.", 8) == 0)
        snprintf(out, out_size, "handler = { path = \"h.so\"; %s = %s; };", dot + 1, v);
    else
        snprintf(out, out_size, "%.*s = { %s = %s; }; handler = { path = \"h.so\"; };",
                 (int)(dot - epath), epath, dot + 1, v);
}

/* Every per-route item the engine can give a value here is read from an
 * element of `routes` into that route only, by its flag and offsets
 * alone. */
START_TEST(test_route_items_by_flag)
{
    char text[4096], v[64], set[256];
    int tried = 0;

    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        int64_t want;
        dd_conf_t *conf;

        if (!(it->per & DD_PER_ROUTE) || !other_value(it, v, sizeof(v), &want)) continue;
        elem_setting(it->elem, v, set, sizeof(set));
        snprintf(text, sizeof(text),
                 HEAD "mysql = { database = \"d\"; };\nroutes = (\n" ROUTE_A ",\n"
                      "  { name = \"b\"; topics = [\"b\"]; key = \"k:${id}\"; table = \"tb\"; "
                      "%s }\n);\n",
                 set);
        conf = load_ok(text);
        ck_assert_int_eq(conf->route_cnt, 2);
        ck_assert_msg(field_value(&conf->routes[1], it) == want, "%s: got %lld, want %lld",
                      it->path, (long long)field_value(&conf->routes[1], it), (long long)want);
        ck_assert_msg(field_value(&conf->routes[0], it) != want || !it->def, "%s leaked", it->path);
        dd_conf_destroy(conf);
        tried++;
    }
    ck_assert_int_gt(tried, 4);
}
END_TEST

/* The same items at the top level are the default route's, routes[0]. */
START_TEST(test_route_items_top_level)
{
    char text[4096], v[64], set[256];

    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        const char *dot = strchr(it->path, '.');
        int64_t want;
        dd_conf_t *conf;

        if (!(it->per & DD_PER_ROUTE) || !dot || (it->flags & DD_CF_ROUTE_ONLY) ||
            !other_value(it, v, sizeof(v), &want))
            continue;
        if (strncmp(it->path, "handler.", 8) == 0)
            snprintf(set, sizeof(set), "handler = { path = \"h.so\"; %s = %s; };\n", dot + 1, v);
        else
            snprintf(set, sizeof(set), "%.*s = { %s = %s; %s};\nhandler = { path = \"h.so\"; };\n",
                     (int)(dot - it->path), it->path, dot + 1, v,
                     strncmp(it->path, "dedup.", 6) == 0 ? "key = \"k:${id}\"; " : "");
        snprintf(text, sizeof(text),
                 "kafka = { brokers = \"b:9092\"; group = \"g\"; topics = [\"t\"]; };\n"
                 "mysql = { database = \"d\"; };\n%s%s",
                 strncmp(it->path, "dedup.", 6) ? "dedup = { key = \"k:${id}\"; };\n" : "", set);
        conf = load_ok(text);
        ck_assert_int_eq(conf->route_cnt, 1);
        ck_assert_str_eq(conf->routes[0].name, "default");
        ck_assert_msg(field_value(&conf->routes[0], it) == want, "%s", it->path);
        dd_conf_destroy(conf);
    }
}
END_TEST

/* Every per-shard item is read from an element into that shard; the
 * others inherit the mysql group's value. */
START_TEST(test_shard_items_by_flag)
{
    char text[4096], v[64];
    int tried = 0;

    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        int64_t want;
        dd_conf_t *conf;

        if (!(it->per & DD_PER_SHARD) || strchr(it->elem, '.') ||
            !other_value(it, v, sizeof(v), &want))
            continue;
        snprintf(text, sizeof(text),
                 HEAD "mysql = {\n  database = \"d\";\n  shards = (\n    { host = \"h0\"; },\n"
                      "    { host = \"h1\"; %s = %s; }\n  );\n};\n"
                      "routes = (\n" ROUTE_A ");\n",
                 it->elem, v);
        conf = load_ok(text);
        ck_assert_int_eq(conf->shard_cnt, 2);
        ck_assert_msg(field_value(&conf->shards[1], it) == want, "%s", it->path);
        ck_assert_msg(field_value(&conf->shards[0], it) != want, "%s leaked", it->path);
        dd_conf_destroy(conf);
        tried++;
    }
    ck_assert_int_gt(tried, 2);
}
END_TEST

/* Each flagged item has its list, and no place of its own in dd_conf_t. */
START_TEST(test_flags_name_a_list)
{
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        if (!it->per) continue;
        ck_assert_msg(dd_conf_list_of(it) != NULL, "%s", it->path);
        ck_assert_msg(it->off == 0 && it->elem, "%s", it->path);
        ck_assert_int_eq(dd_conf_list_item_idx(dd_conf_list_of(it), it->elem), i);
    }
    ck_assert_int_lt(dd_conf_list_item_idx(&dd_conf_shard_list, "shard_check"), 0);
    ck_assert_int_lt(dd_conf_list_item_idx(&dd_conf_route_list, "workers"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conf_list");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_shard_refuses_unflagged);
    tcase_add_test(tc, test_route_items_by_flag);
    tcase_add_test(tc, test_route_items_top_level);
    tcase_add_test(tc, test_shard_items_by_flag);
    tcase_add_test(tc, test_flags_name_a_list);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
