/*
 * UTF-8 validation (see dd_utf8.h). It runs over every payload byte, so
 * ASCII is skipped eight bytes at a time.
 */
#include "dd_utf8.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid multi-byte sequence at s (lead byte s[0] >= 0x80), or
 * 0. The second-byte ranges are what exclude overlongs (E0, F0), surrogates
 * (ED) and code points above U+10FFFF (F4). */
static size_t dd_utf8_seq(const unsigned char *s, size_t left)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t n, i;

    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0; /* stray continuation, overlong C0/C1, or F5..FF */
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (left < n || s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

size_t dd_utf8_check(const void *buf, size_t len)
{
    const unsigned char *s = buf;
    size_t i = 0;

    while (i < len) {
        uint64_t w = 0x80;

        if (len - i >= 8) memcpy(&w, s + i, 8);
        if ((w & 0x8080808080808080ULL) == 0) {
            i += 8;
        } else if (s[i] < 0x80) {
            i++;
        } else {
            size_t n = dd_utf8_seq(s + i, len - i);

            if (!n) return i;
            i += n;
        }
    }
    return len;
}

int dd_utf8_valid(const void *buf, size_t len)
{
    return dd_utf8_check(buf, len) == len;
}
