/*
 * Database shards: which shard a message's rows live in. The function is
 * pure and documented exactly, so that an operator (or a migration script)
 * computes the same shard as dedupd for any key:
 *
 *  - hash: CRC-32 (the ISO-HDLC polynomial of zlib, gzip and MySQL's
 *    CRC32()) of the rendered shard key's bytes, taken as an unsigned
 *    32-bit number, modulo the shard count. In SQL:
 *    SELECT CRC32('m1') % 3.
 *  - modulo: the rendered shard key must be a non-negative decimal integer
 *    (ASCII digits only, any length, leading zeros allowed); the shard is
 *    its value modulo the shard count, computed exactly over the digits.
 *    Anything else has no shard (reason shard_key_invalid).
 *  - map: the key must be such an integer of at most 2^64-1 (else
 *    shard_key_invalid); the shard is the one of the map's range holding
 *    it (none: shard_unmapped). A map file has lines "LOW HIGH SHARD"
 *    (inclusive range, non-negative integers up to 2^64-1), '#' comments
 *    and blank lines; ranges do not overlap and SHARD < the shard count.
 *    A file without a range, or with a NUL byte, is refused.
 */
#ifndef DD_SHARD_H
#define DD_SHARD_H

#include <stddef.h>
#include <stdint.h>

/* dedup.shard_by */
typedef enum { DD_SHARD_HASH, DD_SHARD_MODULO, DD_SHARD_MAP } dd_shard_by_t;

/* Dead-letter reasons of a message without a shard. */
#define DD_SHARD_REASON_INVALID "shard_key_invalid"
#define DD_SHARD_REASON_UNMAPPED "shard_unmapped"

/* "hash", "modulo", "map" -> dd_shard_by_t; -1 if unknown. */
int dd_shard_by_parse(const char *name);
const char *dd_shard_by_name(int by);

typedef struct {
    uint64_t low, high; /* inclusive */
    int shard;
    int line; /* in the file, for messages */
} dd_shard_range_t;

/* A map file's ranges, sorted by low. */
typedef struct dd_shard_map_s {
    dd_shard_range_t *ranges;
    int range_cnt;
    /* What the map decides, as the recorded shard layout compares it: the
     * SHA-256 (lower-case hex) of its ranges in order, each run of ranges
     * that touch and name one shard joined into one, as "LOW HIGH SHARD\n"
     * lines in decimal. Two files that send every key to the same shard
     * have one digest, whatever their comments, spacing, order or
     * splitting; two that send some key elsewhere (or leave it unmapped)
     * have two. */
    char digest[65];
} dd_shard_map_t;

/* Reads the map file at path for shard_cnt shards. Errors name
 * "PATH:LINE: ...". On failure *mapp is NULL. Returns 0, DD_ERR_CONFIG or
 * DD_ERR_NOMEM. */
int dd_shard_map_load(dd_shard_map_t **mapp, const char *path, int shard_cnt, char *errstr,
                      size_t errstr_size);
void dd_shard_map_destroy(dd_shard_map_t *map);

/* The shard (0 .. shard_cnt-1) of the rendered shard key key[0..len), or
 * -1 with *why set to DD_SHARD_REASON_INVALID or _UNMAPPED. map is used by
 * DD_SHARD_MAP only. */
int dd_shard_pick(int by, const dd_shard_map_t *map, int shard_cnt, const char *key, size_t len,
                  const char **why);

/* The CRC-32 of the hash function, for tests and tools. */
uint32_t dd_shard_crc32(const char *key, size_t len);

#endif /* DD_SHARD_H */
