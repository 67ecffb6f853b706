/*
 * Unit tests for dd_position and the limit it sets on Kafka's offsets,
 * without a database: the writers cannot reach the server (a socket that
 * does not exist). An assignment then waits for the positions only as
 * long as it is told, a shard that did not answer counts as unread, no
 * offset is storable for Kafka before a shard recorded one, a flush says
 * it could not write, and the writers wait without burning the CPU.
 * Then the judgement of whether a position is the topic's
 * (dd_position_judge), case by case, and the fingerprint it compares
 * (dd_peek), whose bytes are pinned: positions written by one dedupd are
 * checked by the next.
 */
#include <check.h>
#include <stdint.h>
#include <sys/resource.h>

#include <string.h>

#include "dd_common.h"
#include "dd_conf.h"
#include "dd_hash.h"
#include "dd_offsets.h"
#include "dd_peek.h"
#include "dd_position.h"
#include "check_run.h"
#include "unit_conf.h"

static char errstr[1024];

/* A configuration whose database nobody answers. */
static dd_conf_t *position_conf(void)
{
    return unit_conf("pos", "/nonexistent/dd-position.sock", "th_scripted", "", errstr,
                     sizeof(errstr));
}

static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

START_TEST(test_storable_keeps_to_the_limit)
{
    dd_offsets_t *offs = dd_offsets_new();
    dd_ptrack_t *pt = dd_offsets_get(offs, "t", 0, 1);

    dd_ptrack_reset(pt, 1, 100);
    ck_assert_int_eq(pt->limit, INT64_MAX); /* positions not kept: no limit */
    ck_assert_int_eq(dd_ptrack_storable(pt), 100);
    pt->limit = 40;
    ck_assert_int_eq(dd_ptrack_storable(pt), 40);
    pt->limit = -1;
    ck_assert_int_eq(dd_ptrack_storable(pt), -1);
    pt->limit = 500;
    ck_assert_int_eq(dd_ptrack_storable(pt), 100);
    dd_offsets_destroy(offs);
}
END_TEST

START_TEST(test_unreachable_database)
{
    dd_conf_t *conf = position_conf();
    dd_offsets_t *offs = dd_offsets_new();
    dd_ptrack_t *pt = dd_offsets_get(offs, "t", 3, 1);
    dd_position_t *pos = NULL;
    dd_position_found_t f;
    int64_t t0;
    double cpu0;

    ck_assert_int_eq(dd_position_new(&pos, conf, errstr, sizeof(errstr)), DD_OK);
    ck_assert_int_eq(dd_position_start(pos, errstr, sizeof(errstr)), DD_OK);
    t0 = dd_now_ms();
    dd_position_load(pos, 300);
    ck_assert_int_lt(dd_now_ms() - t0, 1500); /* bounded by its timeout and a connect */
    dd_position_found(pos, "t", 3, &f);
    ck_assert_int_eq(f.unread, 1);
    ck_assert_int_eq(f.have, 0);
    ck_assert_int_eq(f.min, -1);

    dd_ptrack_reset(pt, 1, 10);
    dd_position_track(pos, "t", 3, -1, NULL);
    pt->next = 25;
    dd_position_sync(pos, offs);
    ck_assert_int_eq(pt->limit, -1); /* no shard recorded anything yet */
    ck_assert_int_eq(dd_ptrack_storable(pt), -1);
    ck_assert_int_eq(dd_position_flush(pos, 200), DD_ERR_RETRIABLE);
    ck_assert_int_eq(dd_position_stopped(pos, errstr, sizeof(errstr)), 0);
    ck_assert_uint_ge(dd_position_errors(pos), 1); /* the failed reads and writes count */

    /* A position found not to be the topic's: nothing is storable for
     * Kafka until every shard's row is written anew. */
    dd_position_reset(pos, "t", 3, 0, NULL);
    pt->next = 3;
    dd_position_sync(pos, offs);
    ck_assert_int_eq(dd_ptrack_storable(pt), -1);

    /* Waiting for the database, the writer sleeps. */
    cpu0 = cpu_seconds();
    dd_sleep_ms(1000, NULL);
    ck_assert_msg(cpu_seconds() - cpu0 < 0.3, "the writers used %.2f s of CPU in 1 s",
                  cpu_seconds() - cpu0);

    dd_position_untrack(pos, "t", 3);
    dd_position_destroy(pos);
    dd_offsets_destroy(offs);
    dd_conf_destroy(conf);
}
END_TEST

/* ---- the judgement ---- */

static dd_peek_fp_t fp_of(const char *value)
{
    dd_peek_fp_t fp;

    ck_assert_int_eq(dd_peek_fingerprint_of(1700000000000, "k", 1, value, strlen(value), &fp), 0);
    return fp;
}

/* Position 5 written after the message at 4 (value "a"); Kafka's
 * committed offset k, watermarks lo..hi; the message at 4 read again as
 * `found` (NULL: not read; "" with status: that status). */
static void judge(int64_t pos, int64_t check, int64_t k, int64_t lo, int64_t hi,
                  const dd_peek_t *peek, dd_position_judgement_t *j)
{
    dd_position_facts_t f = {.pos = pos, .committed = k, .lo = lo, .hi = hi, .peek = peek};

    f.check.offset = check;
    f.check.fp = fp_of("a");
    dd_position_judge(&f, j);
}

static dd_peek_t peek_read(int64_t at, const char *value)
{
    dd_peek_t p = {.topic = "t", .offset = at, .status = DD_PEEK_READ, .found = -1};

    p.fp = fp_of(value);
    return p;
}

START_TEST(test_judge_checked)
{
    dd_position_judgement_t j;
    dd_peek_t same = peek_read(4, "a");
    dd_position_facts_t f = {.pos = 5, .check = {4, fp_of("a")}, .lo = 0, .hi = 8};

    /* the message to read again is the check's, only when it can tell */
    ck_assert_int_eq(dd_position_peek_offset(&f), 4);
    f.lo = 5;
    ck_assert_int_eq(dd_position_peek_offset(&f), -1); /* nothing readable below 5 */
    f.lo = 0;
    f.hi = 4;
    ck_assert_int_eq(dd_position_peek_offset(&f), -1); /* the partition ends before it */

    judge(5, 4, -1, 0, 8, &same, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_OWN);
    ck_assert_int_eq(j.use, 5);
    judge(5, 4, 9, 0, 9, &same, &j); /* behind Kafka: a restore, used as it is */
    ck_assert_int_eq(j.verdict, DD_POSITION_OWN);
    ck_assert_int_eq(j.use, 5);
    judge(5, 4, 5, 7, 9, NULL, &j); /* nothing readable below it: nothing to check */
    ck_assert_int_eq(j.verdict, DD_POSITION_OWN);
    ck_assert_int_eq(j.use, 5);
}
END_TEST

START_TEST(test_judge_foreign)
{
    dd_position_judgement_t j;
    dd_peek_t other = peek_read(4, "b"), same = peek_read(4, "a");
    dd_peek_t ended = {.topic = "t", .offset = 4, .status = DD_PEEK_ABSENT, .found = -1};

    /* A topic created again with 8 messages: another message at 4. */
    judge(5, 4, -1, 0, 8, &other, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_FOREIGN);
    ck_assert_int_eq(j.start, 0);
    ck_assert_int_eq(j.reset, 1);
    ck_assert_int_eq(j.keep.offset, -1);
    ck_assert_msg(strstr(j.why, "written after the message at 4 (timestamp 1700000000000"), "%s",
                  j.why);
    ck_assert_msg(strstr(j.why, "but there the partition holds timestamp 1700000000000"), "%s",
                  j.why);
    /* with 3: past its end, whatever Kafka says */
    judge(5, 4, 3, 0, 3, NULL, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_FOREIGN);
    ck_assert_int_eq(j.start, 0);
    ck_assert_int_eq(j.reset, 1);
    ck_assert_msg(strstr(j.why, "past the partition's end 3"), "%s", j.why);
    /* the watermarks unknown, the partition ends before the message */
    judge(5, 4, -1, -1, -1, &ended, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_FOREIGN);
    ck_assert_int_eq(j.start, RD_KAFKA_OFFSET_BEGINNING);
    ck_assert_int_eq(j.reset, 0); /* nothing known to write it as */
    /* past the end but the check message is there: Kafka lost its tail */
    judge(9, 4, 9, 0, 6, &same, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_DIVERGED);
    ck_assert_int_eq(j.start, 5);
    ck_assert_int_eq(j.reset, 1);
    ck_assert_int_eq(j.keep.offset, 4);
    /* truncated (DeleteRecords) and refilled past the position */
    judge(5, 4, 5, 2, 40, &other, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_FOREIGN);
    ck_assert_int_eq(j.start, 2);
}
END_TEST

START_TEST(test_judge_unchecked)
{
    dd_position_judgement_t j;
    dd_peek_t unread = {.topic = "t", .offset = 4, .status = DD_PEEK_UNREAD};
    dd_peek_t compacted = {.topic = "t", .offset = 4, .status = DD_PEEK_ABSENT, .found = 6};

    judge(5, 4, 5, 0, 8, &unread, &j); /* a broker that did not answer */
    ck_assert_int_eq(j.verdict, DD_POSITION_UNCHECKED);
    ck_assert_int_eq(j.start, 0);
    ck_assert_int_eq(j.reset, 0);
    judge(5, 4, 5, 0, 8, NULL, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_UNCHECKED);
    judge(5, 4, 5, 0, 8, &compacted, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_UNCHECKED);
    ck_assert_msg(strstr(j.why, "no message there (the next is at 6)"), "%s", j.why);
    judge(5, 4, 5, 4, 8, NULL, &j); /* 4 is there, but was not read */
    ck_assert_int_eq(j.verdict, DD_POSITION_UNCHECKED);
    judge(5, 3, 5, 4, 8, NULL, &j); /* its message below the log start now */
    ck_assert_int_eq(j.verdict, DD_POSITION_UNCHECKED);
    ck_assert_int_eq(j.start, 4);
    ck_assert_msg(strstr(j.why, "below the log start offset 4"), "%s", j.why);
    judge(5, 4, 5, -1, -1, &unread, &j);
    ck_assert_int_eq(j.start, RD_KAFKA_OFFSET_BEGINNING);
    /* written by an older dedupd: no further than Kafka's committed offset */
    judge(5, -1, 3, 0, 8, NULL, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_OWN);
    ck_assert_int_eq(j.use, 3);
    judge(5, -1, 9, 0, 9, NULL, &j);
    ck_assert_int_eq(j.verdict, DD_POSITION_OWN);
    ck_assert_int_eq(j.use, 5);
    judge(5, -1, -1, 0, 8, NULL, &j); /* and nothing to vouch for it */
    ck_assert_int_eq(j.verdict, DD_POSITION_UNCHECKED);
    ck_assert_int_eq(j.start, 0);
    judge(5, -1, -1, 0, 3, NULL, &j); /* past the end: not the topic's */
    ck_assert_int_eq(j.verdict, DD_POSITION_FOREIGN);
}
END_TEST

/* ---- the fingerprint ---- */

static void fp_hex(const dd_peek_fp_t *fp, char out[DD_HASH_HEX_LEN + 1])
{
    dd_hash_hex(fp->digest, out);
}

START_TEST(test_fingerprint)
{
    dd_peek_fp_t a, b;
    char hex[DD_HASH_HEX_LEN + 1];

    /* the bytes hashed never change (tests/unit/test_position.c's
     * vectors: SHA-256 of 8-byte big-endian lengths, all ones for null,
     * each followed by its bytes) */
    ck_assert_int_eq(dd_peek_fingerprint_of(7, "m1", 2, "{\"a\":1}", 7, &a), 0);
    fp_hex(&a, hex);
    ck_assert_str_eq(hex, "c95ccc5882fab21ffd7f23a1f339764f17f0f96b6cfaf8e958348d3a7a44d4b4");
    ck_assert_int_eq(a.timestamp, 7);
    ck_assert_int_eq(dd_peek_fingerprint_of(-1, NULL, 0, "", 0, &a), 0);
    fp_hex(&a, hex);
    ck_assert_str_eq(hex, "60c69a3e87bf5c4f1e546bec45f262690bcf5494c4ecac2616bf2f731afa152a");
    /* the border between key and value counts, and so do null and empty */
    ck_assert_int_eq(dd_peek_fingerprint_of(1, "ab", 2, "c", 1, &a), 0);
    ck_assert_int_eq(dd_peek_fingerprint_of(1, "a", 1, "bc", 2, &b), 0);
    ck_assert(!dd_peek_fp_equal(&a, &b));
    ck_assert_int_eq(dd_peek_fingerprint_of(1, NULL, 0, "c", 1, &a), 0);
    ck_assert_int_eq(dd_peek_fingerprint_of(1, "", 0, "c", 1, &b), 0);
    ck_assert(!dd_peek_fp_equal(&a, &b));
    /* and so does the timestamp */
    ck_assert_int_eq(dd_peek_fingerprint_of(2, NULL, 0, "c", 1, &b), 0);
    ck_assert(!dd_peek_fp_equal(&a, &b));
    ck_assert_int_eq(dd_peek_fingerprint_of(1, NULL, 0, "c", 1, &b), 0);
    ck_assert(dd_peek_fp_equal(&a, &b));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("position");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_storable_keeps_to_the_limit);
    tcase_add_test(tc, test_unreachable_database);
    tcase_add_test(tc, test_judge_checked);
    tcase_add_test(tc, test_judge_foreign);
    tcase_add_test(tc, test_judge_unchecked);
    tcase_add_test(tc, test_fingerprint);
    suite_add_tcase(s, tc);
    return dd_check_run(s);
}
