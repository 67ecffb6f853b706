/*
 * Terminal progress line (see dd_progress.h).
 */
#include "dd_progress.h"

#include <stdio.h>
#include <unistd.h>

#include "dd_common.h"

#define DD_PROGRESS_EVERY_MS 250

void dd_progress_init(dd_progress_t *p, const char *what)
{
    p->what = what;
    p->tty = isatty(2);
    p->t0_ms = dd_now_ms();
    p->shown_ms = 0;
}

void dd_progress_show(dd_progress_t *p, int64_t done, int64_t total)
{
    int64_t now = dd_now_ms(), left = total - done;
    double secs, rate;

    if (!p->tty || now - p->shown_ms < DD_PROGRESS_EVERY_MS) return;
    p->shown_ms = now;
    secs = (double)(now - p->t0_ms) / 1000.0;
    rate = secs > 0 ? (double)done / secs : 0;
    fprintf(stderr, "\r%s: %lld / %lld messages (%d%%), %.0f msg/s, ETA ", p->what, (long long)done,
            (long long)total, total ? (int)(100 * done / total) : 100, rate);
    if (rate > 0)
        fprintf(stderr, "%.0fs\033[K", (double)left / rate);
    else
        fputs("?\033[K", stderr);
}

void dd_progress_end(dd_progress_t *p)
{
    if (p->tty) fputs("\r\033[K", stderr);
}
