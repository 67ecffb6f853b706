/*
 * Hex, JSON string escaping and bytewise order (see dd_text.h).
 */
#include "dd_text.h"

#include <stdio.h>
#include <string.h>

static const char dd_text_digits[2][16] = {
    {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'},
    {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'A', 'B', 'C', 'D', 'E', 'F'},
};

void dd_text_hex(char *out, const void *data, size_t n, int upper)
{
    const char *digits = dd_text_digits[upper ? 1 : 0];
    const unsigned char *d = data;

    for (size_t i = 0; i < n; i++) {
        *out++ = digits[d[i] >> 4];
        *out++ = digits[d[i] & 15];
    }
}

/* clang-format off */
#define DD_TEXT_ROW(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
const unsigned char dd_text_json_plain[256] = {
    DD_TEXT_ROW(0), DD_TEXT_ROW(0),                       /* 0x00-0x1f: controls */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,       /* 0x20-0x2f: '"' */
    DD_TEXT_ROW(1), DD_TEXT_ROW(1),                       /* 0x30-0x4f */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,       /* 0x50-0x5f: '\\' */
    DD_TEXT_ROW(1), DD_TEXT_ROW(1),                       /* 0x60-0x7f */
    DD_TEXT_ROW(1), DD_TEXT_ROW(1), DD_TEXT_ROW(1), DD_TEXT_ROW(1), /* 0x80-0xbf */
    DD_TEXT_ROW(1), DD_TEXT_ROW(1), DD_TEXT_ROW(1), DD_TEXT_ROW(1), /* 0xc0-0xff */
};
#undef DD_TEXT_ROW
/* clang-format on */

size_t dd_text_json_escape(unsigned char c, char esc[6])
{
    static const char shorts[] = "\"\"\\\\\bb\ff\nn\rr\tt";

    esc[0] = '\\';
    for (size_t i = 0; i + 1 < sizeof(shorts); i += 2) {
        if ((unsigned char)shorts[i] == c) {
            esc[1] = shorts[i + 1];
            return 2;
        }
    }
    memcpy(esc + 1, "u00", 3);
    dd_text_hex(esc + 4, &c, 1, 0);
    return 6;
}

static int dd_text_json_raw(unsigned char c, int flags)
{
    return dd_text_json_plain[c] && !(c >= 0x80 && (flags & DD_TEXT_JSON_ASCII));
}

void dd_text_json_fputs(FILE *out, const char *s, size_t n, int flags)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n, *run;
    char esc[6];

    fputc('"', out);
    for (;;) {
        run = p;
        while (p < end && dd_text_json_raw(*p, flags))
            p++;
        fwrite(run, 1, (size_t)(p - run), out);
        if (p == end) break;
        fwrite(esc, 1, dd_text_json_escape(*p++, esc), out);
    }
    fputc('"', out);
}

size_t dd_text_json_quote(char *out, size_t pos, size_t size, const char *s, int flags)
{
    char esc[6];

    if (pos + 1 < size) out[pos++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        size_t n = 1;

        if (dd_text_json_raw(c, flags))
            esc[0] = (char)c;
        else
            n = dd_text_json_escape(c, esc);
        if (pos + n + 2 >= size) /* room for the closing quote and the NUL */
            break;
        memcpy(out + pos, esc, n);
        pos += n;
    }
    if (pos + 1 < size) out[pos++] = '"';
    out[pos] = '\0';
    return pos;
}

int dd_text_cmp(const void *a, size_t a_len, const void *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    int c = n ? memcmp(a, b, n) : 0; /* memcmp must not see a NULL, even for 0 bytes */

    if (c) return c;
    return (a_len > b_len) - (a_len < b_len);
}

/* A C1 control (U+0080..U+009F) in UTF-8: 0xC2 then 0x80..0x9F. */
static int dd_text_c1(const unsigned char *p, const unsigned char *end)
{
    return p[0] == 0xc2 && p + 1 < end && p[1] >= 0x80 && p[1] <= 0x9f;
}

void dd_text_visible(char *out, size_t out_size, const char *s)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    size_t o = 0;

    if (!out_size) return;
    for (; p < end; p++) {
        char esc[8];
        size_t n;
        if (*p < 0x20 || *p == 0x7f || *p == '\\') {
            n = (size_t)(*p == '\\' ? snprintf(esc, sizeof(esc), "\\\\")
                                    : snprintf(esc, sizeof(esc), "\\x%02x", *p));
        } else if (dd_text_c1(p, end)) {
            n = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", p[1]);
            p++;
        } else {
            esc[0] = (char)*p;
            n = 1;
        }
        if (o + n >= out_size) break;
        memcpy(out + o, esc, n);
        o += n;
    }
    out[o] = '\0';
}
