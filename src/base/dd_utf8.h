/*
 * UTF-8 validation.
 *
 * Payloads, keys and handler responses must be valid UTF-8 before they are
 * stored, logged or parsed as JSON: an invalid byte would make two encodings
 * of one text, or a text MariaDB's utf8mb4 columns refuse. Strict RFC 3629:
 * no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
 */
#ifndef DD_UTF8_H
#define DD_UTF8_H

#include <stddef.h>

/* The offset of the first byte that does not start a valid sequence, or len
 * when all of buf is valid UTF-8. */
size_t dd_utf8_check(const void *buf, size_t len);

/* 1 when buf is valid UTF-8. */
int dd_utf8_valid(const void *buf, size_t len);

#endif /* DD_UTF8_H */
