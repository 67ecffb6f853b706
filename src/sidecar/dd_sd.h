/*
 * systemd's service notifications (sd_notify(3)'s protocol) for `dedupd
 * run` under Type=notify: READY=1 once partitions are assigned, WATCHDOG=1
 * while the consumer is live by the rule /healthz answers with
 * (dd_stats_health), STOPPING=1 at shutdown, STATUS= lines saying why.
 * Without $NOTIFY_SOCKET nothing is made and nothing is sent.
 */
#ifndef DD_SD_H
#define DD_SD_H

#include <stddef.h>

#include "dd_conf.h"
#include "dd_pipeline.h"

typedef struct dd_sd_s dd_sd_t;

/* *sdp is NULL (and 0 returned) when $NOTIFY_SOCKET is unset: not run by
 * systemd, or not as Type=notify. The watchdog period is $WATCHDOG_USEC's
 * (when $WATCHDOG_PID is unset or names this process). */
int dd_sd_new(dd_sd_t **sdp, const dd_conf_t *conf, dd_pipeline_t *pl, char *errstr,
              size_t errstr_size);
/* Its thread: watches the pipeline every 200 ms. */
int dd_sd_start(dd_sd_t *sd, char *errstr, size_t errstr_size);
/* Joins the thread and sends STOPPING=1. NULL is fine. */
void dd_sd_stop(dd_sd_t *sd);
/* Stops if needed and frees. NULL is fine. */
void dd_sd_destroy(dd_sd_t *sd);

/* One datagram of text to the socket named path ($NOTIFY_SOCKET's form: a
 * file system path, or "@name" for an abstract one). Returns 0 or a
 * negative errno. */
int dd_sd_send(const char *path, const char *text);

#endif /* DD_SD_H */
