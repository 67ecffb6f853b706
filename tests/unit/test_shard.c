/*
 * Unit tests for the routing function of database shards (dd_shard.c):
 * CRC-32 vectors computed with zlib (python3 -c 'import zlib;
 * print(zlib.crc32(b"m1") % 3)'), modulo over digit strings too long for
 * any integer type, and map files with their errors and line numbers.
 */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_shard.h"
#include "check_run.h"

static char mappath[PATH_MAX];
static char errstr[PATH_MAX + 512];

static void setup(void)
{
    snprintf(mappath, sizeof(mappath), "/tmp/dd_test_shard.XXXXXX");
    ck_assert_int_ge(mkstemp(mappath), 0);
    errstr[0] = '\0';
}

static void teardown(void)
{
    unlink(mappath);
}

static void write_map(const char *text)
{
    FILE *fp = fopen(mappath, "w");

    ck_assert_ptr_nonnull(fp);
    fputs(text, fp);
    fclose(fp);
}

/* The map file holds text[0..len), NUL bytes included. */
static void write_map_n(const char *text, size_t len)
{
    FILE *fp = fopen(mappath, "w");

    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(text, 1, len, fp), len);
    fclose(fp);
}

static int pick(int by, const dd_shard_map_t *map, int cnt, const char *key, const char **why)
{
    return dd_shard_pick(by, map, cnt, key, strlen(key), why);
}

START_TEST(test_hash_vectors)
{
    static const struct {
        const char *key;
        uint32_t crc;
        int mod3, mod64;
    } v[] = {
        {"m1", 3226732335u, 0, 3226732335u % 64},
        {"m2", 1499289237u, 0, 1499289237u % 64},
        {"m3", 777676291u, 1, 777676291u % 64},
        {"m4", 2956915616u, 2, 32},
        {"m5", 3342451510u, 1, 54},
        {"abc", 891568578u, 0, 2},
        {"pay:m1:o1", 1703476545u, 0, 1},
        {"", 0u, 0, 0},
    };
    const char *why;

    for (size_t i = 0; i < DD_ARRAY_LEN(v); i++) {
        ck_assert_uint_eq(dd_shard_crc32(v[i].key, strlen(v[i].key)), v[i].crc);
        ck_assert_int_eq(pick(DD_SHARD_HASH, NULL, 3, v[i].key, &why), v[i].mod3);
        ck_assert_ptr_null(why);
        ck_assert_int_eq(pick(DD_SHARD_HASH, NULL, 64, v[i].key, &why), v[i].mod64);
        ck_assert_int_eq(pick(DD_SHARD_HASH, NULL, 1, v[i].key, &why), 0);
    }
}
END_TEST

START_TEST(test_modulo)
{
    char big[200];
    const char *why;

    ck_assert_int_eq(pick(DD_SHARD_MODULO, NULL, 3, "0", &why), 0);
    ck_assert_int_eq(pick(DD_SHARD_MODULO, NULL, 3, "7", &why), 1);
    ck_assert_int_eq(pick(DD_SHARD_MODULO, NULL, 3, "0005", &why), 2);
    ck_assert_ptr_null(why);
    /* 2^64 and beyond: exact over the digits */
    ck_assert_int_eq(pick(DD_SHARD_MODULO, NULL, 3, "18446744073709551616", &why), 1);
    memset(big, '9', 60);
    big[60] = '\0';
    ck_assert_int_eq(pick(DD_SHARD_MODULO, NULL, 7, big, &why), 0);
    ck_assert_int_eq(
        pick(DD_SHARD_MODULO, NULL, 64, "00000000001234567890123456789012345678901234567890", &why),
        18);
    ck_assert_ptr_null(why);
    static const char *const bad[] = {"", "-1", "+1", "1.0", "1e3", " 1", "1 ", "12a", "0x10"};
    for (size_t i = 0; i < DD_ARRAY_LEN(bad); i++) {
        ck_assert_int_eq(pick(DD_SHARD_MODULO, NULL, 3, bad[i], &why), -1);
        ck_assert_str_eq(why, DD_SHARD_REASON_INVALID);
    }
}
END_TEST

START_TEST(test_map)
{
    dd_shard_map_t *map = NULL;
    const char *why;

    write_map("# merchants by id\n"
              "\n"
              "100 199 2   # the big ones\n"
              "0 99 0\n"
              "  200\t18446744073709551615 1\n");
    ck_assert_msg(dd_shard_map_load(&map, mappath, 3, errstr, sizeof(errstr)) == 0, "%s", errstr);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 3, "0", &why), 0);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 3, "99", &why), 0);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 3, "100", &why), 2);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 3, "00199", &why), 2);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 3, "18446744073709551615", &why), 1);
    ck_assert_ptr_null(why);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 3, "18446744073709551616", &why), -1);
    ck_assert_str_eq(why, DD_SHARD_REASON_INVALID);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 3, "m1", &why), -1);
    ck_assert_str_eq(why, DD_SHARD_REASON_INVALID);
    dd_shard_map_destroy(map);

    write_map("10 20 0\n30 40 1\n");
    ck_assert_int_eq(dd_shard_map_load(&map, mappath, 2, errstr, sizeof(errstr)), 0);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 2, "25", &why), -1);
    ck_assert_str_eq(why, DD_SHARD_REASON_UNMAPPED);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 2, "5", &why), -1);
    ck_assert_str_eq(why, DD_SHARD_REASON_UNMAPPED);
    ck_assert_int_eq(pick(DD_SHARD_MAP, map, 2, "41", &why), -1);
    ck_assert_str_eq(why, DD_SHARD_REASON_UNMAPPED);
    dd_shard_map_destroy(map);
}
END_TEST

static const struct {
    const char *text;
    const char *want; /* %s: the path */
} bad_maps[] = {
    {"0 9 0\n# x\n5 20 1\n", "%s:3: the range 5-20 overlaps the range 0-9 of line 1"},
    {"50 60 1\n0 50 0\n", "%s:2: the range 0-50 overlaps the range 50-60 of line 1"},
    {"0 9 3\n", "%s:1: shard 3 does not exist: the configuration has 3 (0..2)"},
    {"\n9 0 1\n", "%s:2: LOW is above HIGH"},
    {"0 9\n", "%s:1: expected \"LOW HIGH SHARD\": three non-negative integers, the range's up to "
              "18446744073709551615"},
    {"0 18446744073709551616 1\n", "%s:1: expected \"LOW HIGH SHARD\": three non-negative "
                                   "integers, the range's up to 18446744073709551615"},
    {"0 9 1 2\n", "%s:1: expected \"LOW HIGH SHARD\": three non-negative integers, the range's "
                  "up to 18446744073709551615"},
    {"-1 9 1\n", "%s:1: expected \"LOW HIGH SHARD\": three non-negative integers, the range's "
                 "up to 18446744073709551615"},
};

START_TEST(test_bad_maps)
{
    dd_shard_map_t *map = (dd_shard_map_t *)1;
    char want[PATH_MAX + 512];

    write_map(bad_maps[_i].text);
    snprintf(want, sizeof(want), bad_maps[_i].want, mappath);
    ck_assert_int_eq(dd_shard_map_load(&map, mappath, 3, errstr, sizeof(errstr)), DD_ERR_CONFIG);
    ck_assert_ptr_null(map);
    ck_assert_str_eq(errstr, want);
}
END_TEST

/* A NUL byte ends a C string: what follows it was once skipped unread. */
START_TEST(test_map_nul)
{
    static const char junk[] = "0 10 0 \0 junk\n";
    static const char late[] = "0 10 0\n# a comment \0 x\n";
    dd_shard_map_t *map = (dd_shard_map_t *)1;
    char want[PATH_MAX + 512];

    write_map_n(junk, sizeof(junk) - 1);
    ck_assert_int_eq(dd_shard_map_load(&map, mappath, 3, errstr, sizeof(errstr)), DD_ERR_CONFIG);
    ck_assert_ptr_null(map);
    snprintf(want, sizeof(want), "%s:1: NUL byte at column 8", mappath);
    ck_assert_str_eq(errstr, want);
    write_map_n(late, sizeof(late) - 1);
    ck_assert_int_eq(dd_shard_map_load(&map, mappath, 3, errstr, sizeof(errstr)), DD_ERR_CONFIG);
    snprintf(want, sizeof(want), "%s:2: NUL byte at column 13", mappath);
    ck_assert_str_eq(errstr, want);
}
END_TEST

/* A map without a range would dead-letter every message. */
START_TEST(test_map_empty)
{
    static const char *const empty[] = {"", "# only comments\n\n   # and blanks\n", "\n\n"};
    dd_shard_map_t *map = (dd_shard_map_t *)1;
    char want[PATH_MAX + 512];

    snprintf(want, sizeof(want),
             "%s has no range, only blank lines and comments: every message would be "
             "dead-lettered shard_unmapped",
             mappath);
    for (size_t i = 0; i < DD_ARRAY_LEN(empty); i++) {
        write_map(empty[i]);
        ck_assert_int_eq(dd_shard_map_load(&map, mappath, 3, errstr, sizeof(errstr)),
                         DD_ERR_CONFIG);
        ck_assert_ptr_null(map);
        ck_assert_str_eq(errstr, want);
    }
}
END_TEST

/* The digest of text as a map for 3 shards. */
static void map_digest(const char *text, char out[65])
{
    dd_shard_map_t *map = NULL;

    write_map(text);
    ck_assert_msg(dd_shard_map_load(&map, mappath, 3, errstr, sizeof(errstr)) == 0, "%s", errstr);
    ck_assert_uint_eq(strlen(map->digest), 64);
    memcpy(out, map->digest, 65);
    dd_shard_map_destroy(map);
}

/* The digest is what the map decides: the same for files that place every
 * key alike, another as soon as one key moves or falls out. */
START_TEST(test_map_digest)
{
    static const char *const same[] = {
        "0 99 0\n100 199 1\n",
        "# comment\n100   199\t1 # the big ones\n\n0 99 0\n",
        "0 49 0\n50 99 0\n100 199 1\n",
        "000 099 0\n100 150 1\n151 199 1\n",
    };
    static const char *const other[] = {
        "0 99 0\n100 199 2\n", /* a range to another shard */
        "0 98 0\n100 199 1\n", /* a key unmapped */
        "0 99 0\n100 200 1\n", /* a key mapped */
        "0 99 1\n100 199 0\n", /* two ranges swapped */
        "0 99 0\n",            /* a range gone */
    };
    char first[65], d[65];

    map_digest(same[0], first);
    for (size_t i = 1; i < DD_ARRAY_LEN(same); i++) {
        map_digest(same[i], d);
        ck_assert_msg(strcmp(first, d) == 0, "map %zu", i);
    }
    for (size_t i = 0; i < DD_ARRAY_LEN(other); i++) {
        map_digest(other[i], d);
        ck_assert_msg(strcmp(first, d) != 0, "map %zu", i);
    }
    /* the vector of docs/SHARDS.md: sha256sum of the canonical lines */
    map_digest("0 18446744073709551615 2\n", d);
    ck_assert_str_eq(d, "464ecfd28454c2e37d3142eb7f38550056f5624725c1da92d68848b9140392e9");
}
END_TEST

START_TEST(test_missing_map)
{
    dd_shard_map_t *map = NULL;

    ck_assert_int_eq(dd_shard_map_load(&map, "/nonexistent/shards.map", 3, errstr, sizeof(errstr)),
                     DD_ERR_CONFIG);
    ck_assert_str_eq(errstr, "cannot read /nonexistent/shards.map: No such file or directory");
}
END_TEST

/* A FIFO would block the load until a writer came; a directory is no map. */
START_TEST(test_map_not_a_file)
{
    dd_shard_map_t *map = NULL;
    char want[PATH_MAX + 512];

    unlink(mappath);
    ck_assert_int_eq(mkfifo(mappath, 0600), 0);
    ck_assert_int_eq(dd_shard_map_load(&map, mappath, 3, errstr, sizeof(errstr)), DD_ERR_CONFIG);
    snprintf(want, sizeof(want), "cannot read %s: not a regular file", mappath);
    ck_assert_str_eq(errstr, want);
    ck_assert_int_eq(dd_shard_map_load(&map, "/tmp", 3, errstr, sizeof(errstr)), DD_ERR_CONFIG);
    ck_assert_str_eq(errstr, "cannot read /tmp: not a regular file");
}
END_TEST

START_TEST(test_by_names)
{
    ck_assert_int_eq(dd_shard_by_parse("hash"), DD_SHARD_HASH);
    ck_assert_int_eq(dd_shard_by_parse("modulo"), DD_SHARD_MODULO);
    ck_assert_int_eq(dd_shard_by_parse("map"), DD_SHARD_MAP);
    ck_assert_int_eq(dd_shard_by_parse("range"), -1);
    ck_assert_str_eq(dd_shard_by_name(DD_SHARD_MODULO), "modulo");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shard");
    TCase *tc = tcase_create("shard");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hash_vectors);
    tcase_add_test(tc, test_modulo);
    tcase_add_test(tc, test_map);
    tcase_add_loop_test(tc, test_bad_maps, 0, (int)DD_ARRAY_LEN(bad_maps));
    tcase_add_test(tc, test_map_nul);
    tcase_add_test(tc, test_map_empty);
    tcase_add_test(tc, test_map_digest);
    tcase_add_test(tc, test_missing_map);
    tcase_add_test(tc, test_map_not_a_file);
    tcase_add_test(tc, test_by_names);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
