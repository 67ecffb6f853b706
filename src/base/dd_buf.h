/*
 * A growable byte buffer, for text that is built piece by piece: SQL
 * statements, reports.
 *
 * The buffer is a value the caller embeds (zero-initialised it is empty)
 * and reuses: statements built for every batch reuse one buffer, so the hot
 * path does not allocate. Out of memory is sticky: the first failed growth
 * sets oom, later appends do nothing, and the caller checks oom once before
 * using the text.
 */
#ifndef DD_BUF_H
#define DD_BUF_H

#include <stddef.h>

typedef struct {
    char *p;    /* NUL-terminated once anything was appended */
    size_t len; /* bytes before the NUL */
    size_t cap;
    int oom; /* an append failed for want of memory: the text is incomplete */
} dd_buf_t;

/* Empties the buffer, keeping its memory; clears oom. */
void dd_buf_reset(dd_buf_t *b);
/* Frees the memory; the buffer is empty and may be used again. */
void dd_buf_release(dd_buf_t *b);

void dd_buf_put(dd_buf_t *b, const void *s, size_t n);
void dd_buf_puts(dd_buf_t *b, const char *s);
void dd_buf_printf(dd_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Makes room for n more bytes and returns where they go (the caller writes
 * them and then calls dd_buf_commit), or NULL when out of memory. */
char *dd_buf_reserve(dd_buf_t *b, size_t n);
/* Counts n bytes written after dd_buf_reserve() as part of the text. */
void dd_buf_commit(dd_buf_t *b, size_t n);

#endif /* DD_BUF_H */
