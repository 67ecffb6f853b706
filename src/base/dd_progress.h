/*
 * A progress line on a terminal: "what: done / total messages (p%), rate
 * msg/s, ETA s", rewritten in place at most four times a second, and
 * nothing at all when stderr is not a terminal (a log file would fill with
 * carriage returns).
 */
#ifndef DD_PROGRESS_H
#define DD_PROGRESS_H

#include <stdint.h>

typedef struct {
    const char *what; /* the line's prefix */
    int tty;          /* stderr is a terminal */
    int64_t t0_ms;    /* dd_now_ms() at dd_progress_init() */
    int64_t shown_ms; /* when the line was last written */
} dd_progress_t;

void dd_progress_init(dd_progress_t *p, const char *what);
/* Shows done of total, unless the line was written less than 250 ms ago. */
void dd_progress_show(dd_progress_t *p, int64_t done, int64_t total);
/* Clears the line. */
void dd_progress_end(dd_progress_t *p);

#endif /* DD_PROGRESS_H */
