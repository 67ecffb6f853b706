/*
 * Growable byte buffer (see dd_buf.h). Capacity doubles from 4 KiB, so a
 * statement of n bytes costs O(log n) reallocations once, and none when the
 * buffer is reused for the next one.
 */
#include "dd_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *dd_buf_reserve(dd_buf_t *b, size_t n)
{
    size_t cap;
    char *p;

    if (b->oom) return NULL;
    if (b->len + n + 1 <= b->cap) return b->p + b->len;
    cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
        cap *= 2;
    p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return NULL;
    }
    b->p = p;
    b->cap = cap;
    return b->p + b->len;
}

void dd_buf_commit(dd_buf_t *b, size_t n)
{
    b->len += n;
    b->p[b->len] = '\0';
}

void dd_buf_reset(dd_buf_t *b)
{
    b->len = 0;
    b->oom = 0;
    if (b->p) b->p[0] = '\0';
}

void dd_buf_release(dd_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

void dd_buf_put(dd_buf_t *b, const void *s, size_t n)
{
    char *o = dd_buf_reserve(b, n);

    if (!o) return;
    memcpy(o, s, n);
    dd_buf_commit(b, n);
}

void dd_buf_puts(dd_buf_t *b, const char *s)
{
    dd_buf_put(b, s, strlen(s));
}

void dd_buf_printf(dd_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    char *o;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !(o = dd_buf_reserve(b, (size_t)n))) return;
    va_start(ap, fmt);
    vsnprintf(o, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
