/*
 * The routing function of database shards (see dd_shard.h): pure, so
 * that the run path, the commands and the tests compute one answer, and
 * documented there so that operators can compute it too.
 */
#include "dd_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zlib.h>

#include "dd_common.h"

static const char *const dd_shard_by_names[] = {
    [DD_SHARD_HASH] = "hash", [DD_SHARD_MODULO] = "modulo", [DD_SHARD_MAP] = "map"};

int dd_shard_by_parse(const char *name)
{
    for (int i = 0; i < (int)DD_ARRAY_LEN(dd_shard_by_names); i++)
        if (strcmp(name, dd_shard_by_names[i]) == 0) return i;
    return -1;
}

const char *dd_shard_by_name(int by)
{
    return by >= 0 && by < (int)DD_ARRAY_LEN(dd_shard_by_names) ? dd_shard_by_names[by] : "?";
}

uint32_t dd_shard_crc32(const char *key, size_t len)
{
    uLong crc = crc32(0L, Z_NULL, 0);

    /* crc32() takes a uInt length */
    while (len > 0) {
        uInt n = len > 1u << 30 ? 1u << 30 : (uInt)len;
        crc = crc32(crc, (const Bytef *)key, n);
        key += n;
        len -= n;
    }
    return (uint32_t)crc;
}

/* A non-negative decimal integer, digits only, that fits 64 bits. */
static int dd_shard_parse_u64(const char *s, size_t len, uint64_t *v)
{
    uint64_t n = 0;

    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9) return -1;
        if (n > (UINT64_MAX - d) / 10) return -1;
        n = n * 10 + d;
    }
    *v = n;
    return 0;
}

static int dd_shard_modulo(const char *key, size_t len, int shard_cnt)
{
    unsigned r = 0;

    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)key[i] - '0';
        if (d > 9) return -1;
        r = (r * 10 + d) % (unsigned)shard_cnt;
    }
    return (int)r;
}

static int dd_shard_in_map(const dd_shard_map_t *map, uint64_t v)
{
    int lo = 0, hi = map ? map->range_cnt - 1 : -1;

    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const dd_shard_range_t *r = &map->ranges[mid];
        if (v < r->low)
            hi = mid - 1;
        else if (v > r->high)
            lo = mid + 1;
        else
            return r->shard;
    }
    return -1;
}

int dd_shard_pick(int by, const dd_shard_map_t *map, int shard_cnt, const char *key, size_t len,
                  const char **why)
{
    uint64_t v;
    int shard;

    *why = NULL;
    if (shard_cnt < 1) shard_cnt = 1;
    switch (by) {
    case DD_SHARD_MODULO:
        if ((shard = dd_shard_modulo(key, len, shard_cnt)) < 0) *why = DD_SHARD_REASON_INVALID;
        return shard;
    case DD_SHARD_MAP:
        if (dd_shard_parse_u64(key, len, &v) != 0) {
            *why = DD_SHARD_REASON_INVALID;
            return -1;
        }
        if ((shard = dd_shard_in_map(map, v)) < 0) *why = DD_SHARD_REASON_UNMAPPED;
        return shard;
    default:
        return (int)(dd_shard_crc32(key, len) % (uint32_t)shard_cnt);
    }
}

/*
 * Map files
 */

static int dd_shard_range_cmp(const void *a, const void *b)
{
    const dd_shard_range_t *x = a, *y = b;

    return x->low < y->low ? -1 : x->low > y->low;
}

/* The next whitespace-separated field of *p, as a u64. */
static int dd_shard_field(char **p, uint64_t *v)
{
    char *s = *p + strspn(*p, " \t\r");
    size_t len = strcspn(s, " \t\r");

    *p = s + len;
    return dd_shard_parse_u64(s, len, v);
}

/* One line of len bytes into r; 1 when it holds a range, 0 when blank, -1
 * when bad (why written). A NUL byte is refused wherever it is: the C
 * string functions below would stop at it and take what follows for
 * nothing. */
static int dd_shard_line(char *line, size_t len, int shard_cnt, dd_shard_range_t *r, char *why,
                         size_t why_size)
{
    const char *nul = memchr(line, '\0', len);
    uint64_t shard;
    char *p = line;

    if (nul) {
        snprintf(why, why_size, "NUL byte at column %zu", (size_t)(nul - line) + 1);
        return -1;
    }
    line[strcspn(line, "#\n")] = '\0';
    if (line[strspn(line, " \t\r")] == '\0') return 0;
    if (dd_shard_field(&p, &r->low) != 0 || dd_shard_field(&p, &r->high) != 0 ||
        dd_shard_field(&p, &shard) != 0 || p[strspn(p, " \t\r")] != '\0') {
        snprintf(why, why_size,
                 "expected \"LOW HIGH SHARD\": three non-negative integers, the range's up to "
                 "18446744073709551615");
        return -1;
    }
    if (r->low > r->high) {
        snprintf(why, why_size, "LOW is above HIGH");
        return -1;
    }
    if (shard >= (uint64_t)shard_cnt) {
        snprintf(why, why_size, "shard %llu does not exist: the configuration has %d (0..%d)",
                 (unsigned long long)shard, shard_cnt, shard_cnt - 1);
        return -1;
    }
    r->shard = (int)shard;
    return 1;
}

/* map->digest (see dd_shard.h) of the sorted, checked ranges. */
static int dd_shard_map_digest(dd_shard_map_t *map)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char sum[EVP_MAX_MD_SIZE];
    unsigned int sum_len = 0;
    int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL);

    for (int i = 0; ok && i < map->range_cnt; i++) {
        const dd_shard_range_t *r = &map->ranges[i];
        uint64_t high = r->high;
        char line[80];
        int n;

        while (i + 1 < map->range_cnt && map->ranges[i + 1].shard == r->shard &&
               high != UINT64_MAX && map->ranges[i + 1].low == high + 1)
            high = map->ranges[++i].high;
        n = snprintf(line, sizeof(line), "%llu %llu %d\n", (unsigned long long)r->low,
                     (unsigned long long)high, r->shard);
        ok = EVP_DigestUpdate(md, line, (size_t)n);
    }
    ok = ok && EVP_DigestFinal_ex(md, sum, &sum_len) && sum_len == 32;
    EVP_MD_CTX_free(md);
    if (!ok) return DD_ERR_NOMEM;
    for (unsigned i = 0; i < sum_len; i++)
        snprintf(map->digest + 2 * i, 3, "%02x", sum[i]);
    return DD_OK;
}

/* Opens a map file for reading: a regular file only (opening a FIFO
 * would wait for a writer, a directory reads as an error). */
static FILE *dd_shard_map_open(const char *path, char *errstr, size_t errstr_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    FILE *fp;

    if (fd < 0) {
        dd_errstr_set(errstr, errstr_size, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        dd_errstr_set(errstr, errstr_size, "cannot read %s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (!(fp = fdopen(fd, "r"))) {
        dd_errstr_set(errstr, errstr_size, "cannot read %s: %s", path, strerror(errno));
        close(fd);
    }
    return fp;
}

int dd_shard_map_load(dd_shard_map_t **mapp, const char *path, int shard_cnt, char *errstr,
                      size_t errstr_size)
{
    dd_shard_map_t *map = calloc(1, sizeof(*map));
    char *line = NULL;
    size_t cap = 0, alloc = 0;
    int err = DD_ERR_CONFIG, lineno = 0, rc;
    char why[160];
    FILE *fp = NULL;
    ssize_t len;

    *mapp = NULL;
    if (!map) {
        dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
        return DD_ERR_NOMEM;
    }
    if (!(fp = dd_shard_map_open(path, errstr, errstr_size))) goto done;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        dd_shard_range_t r = {0};

        lineno++;
        if ((rc = dd_shard_line(line, (size_t)len, shard_cnt, &r, why, sizeof(why))) < 0) {
            dd_errstr_set(errstr, errstr_size, "%s:%d: %s", path, lineno, why);
            goto done;
        }
        if (rc == 0) continue;
        if ((size_t)map->range_cnt == alloc) {
            size_t n = alloc ? alloc * 2 : 64;
            dd_shard_range_t *grown = realloc(map->ranges, n * sizeof(*grown));
            if (!grown) {
                dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
                err = DD_ERR_NOMEM;
                goto done;
            }
            map->ranges = grown;
            alloc = n;
        }
        r.line = lineno;
        map->ranges[map->range_cnt++] = r;
    }
    if (ferror(fp)) {
        dd_errstr_set(errstr, errstr_size, "cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    if (map->range_cnt == 0) {
        dd_errstr_set(errstr, errstr_size,
                      "%s has no range, only blank lines and comments: every message would be "
                      "dead-lettered shard_unmapped",
                      path);
        goto done;
    }
    if (map->range_cnt > 1)
        qsort(map->ranges, (size_t)map->range_cnt, sizeof(*map->ranges), dd_shard_range_cmp);
    for (int i = 1; i < map->range_cnt; i++) {
        const dd_shard_range_t *a = &map->ranges[i - 1], *b = &map->ranges[i];
        const dd_shard_range_t *later = a->line > b->line ? a : b, *other = later == a ? b : a;
        if (a->high < b->low) continue;
        dd_errstr_set(errstr, errstr_size,
                      "%s:%d: the range %llu-%llu overlaps the range %llu-%llu of line %d", path,
                      later->line, (unsigned long long)later->low, (unsigned long long)later->high,
                      (unsigned long long)other->low, (unsigned long long)other->high, other->line);
        goto done;
    }
    if (dd_shard_map_digest(map) != DD_OK) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot compute its SHA-256", path);
        err = DD_ERR_NOMEM;
        goto done;
    }
    *mapp = map;
    map = NULL;
    err = DD_OK;
done:
    free(line);
    if (fp) fclose(fp);
    dd_shard_map_destroy(map);
    return err;
}

void dd_shard_map_destroy(dd_shard_map_t *map)
{
    if (!map) return;
    free(map->ranges);
    free(map);
}
