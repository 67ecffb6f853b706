/*
 * The database privileges a command needs, checked when it starts.
 *
 * dedupd runs as a user holding only what it needs (docs/OPERATIONS.md,
 * "Database users and privileges"; the statements are in sql/grants.sql).
 * A missing privilege found in the middle of a run would stop it after it
 * had consumed messages, with the server's terse "command denied"; checked
 * at start, it is an error naming the user, the privilege, what dedupd
 * needs it for and the GRANT that gives it.
 */
#ifndef DD_GRANTS_H
#define DD_GRANTS_H

#include <stddef.h>

#include "dd_buf.h"
#include "dd_conf.h"
#include "dd_db.h"

/* What a command does (bits of `needs`). On the dedup table: */
#define DD_GRANTS_READ 0x01  /* look keys up: stats, replay */
#define DD_GRANTS_CLAIM 0x02 /* claim keys, record outcomes: run, replay --apply */
#define DD_GRANTS_PURGE 0x04 /* delete expired keys: purge, run's background purge */
#define DD_GRANTS_DEDUP_NEEDS (DD_GRANTS_READ | DD_GRANTS_CLAIM | DD_GRANTS_PURGE)
/* On the database and dedupd's other tables: */
#define DD_GRANTS_TEMP 0x08     /* temporary tables: replay */
#define DD_GRANTS_OUTBOX 0x10   /* dedupd_outbox: emit, relay (outbox.enabled) */
#define DD_GRANTS_POSITION 0x20 /* dedupd_position: run (dd_position_check) */
#define DD_GRANTS_TABLES 0x40   /* dedupd_schema, dedupd_shard_layout: run, check */
/* dedupd_avro_schema, the Avro writer schemas' fingerprints: read by run
 * and replay, recorded by run and replay --apply */
#define DD_GRANTS_SCHEMAFP_READ 0x80
#define DD_GRANTS_SCHEMAFP_RECORD 0x100

/* The needs of `dedupd run` (and `check`) with conf: claims, dedupd's
 * tables, the purge unless purge.interval is 0, the outbox with
 * outbox.enabled. The positions' are dd_position_check's, which lets a
 * database without their table run on. */
unsigned dd_grants_run_needs(const dd_conf_t *conf);

/* Probes every privilege `needs` covers, each by preparing a statement
 * that needs it (the server checks privileges when it prepares; nothing
 * is executed): those on the dedup table on `table` (a route's; NULL:
 * they are left out), the others on their objects. Returns 0;
 * DD_ERR_FATAL with a message from dd_grants_explain() when a privilege
 * is missing (the GRANT names every privilege of the object that is);
 * DD_ERR_CONFIG when a table of dedupd's does not exist (run migrate); or
 * the class of another error (errstr says which statement). */
int dd_grants_check(dd_db_t *db, const dd_conf_t *conf, const char *table, unsigned needs,
                    char *errstr, size_t errstr_size);

/* Appends the GRANT lines of sql/grants.sql's section ("runtime",
 * "outbox") to out, for database, the dedup table `table` and account
 * ('dedupd'@'%'): what dd_grants_check checks, as the file gives it.
 * 0, or DD_ERR_NOMEM. */
int dd_grants_render(const char *section, const char *database, const char *table,
                     const char *account, dd_buf_t *out);

/* 1 when every privilege declared has a probe (for the unit test). */
int dd_grants_probed(void);

/* The message for a denied privilege, from the server's error (err, msg):
 * "the database user 'dedupd'@'%' lacks INSERT on payments.dedup_record
 * (needed to claim keys: INSERT INTO ...): GRANT INSERT ON ...". account is
 * CURRENT_USER() ("dedupd@%"); grant the privilege the statement needs,
 * granted on the database when on_db, else on the table. The server's own
 * words win where they are more precise (a column, or another privilege).
 * Returns 1 when err is a privilege error (1044, 1142, 1143), else 0 and
 * out is untouched. grant may list several ("SELECT, INSERT"); shown NULL:
 * no statement is shown. */
int dd_grants_explain(const char *account, const char *database, const char *table,
                      const char *grant, int on_db, const char *purpose, const char *shown,
                      unsigned int err, const char *msg, char *out, size_t out_size);

/* The privileges a handler declares in its grants file (handler.grants:
 * GRANT lines, as the examples' grants.sql), each looked up among the
 * session's (its account's and enabled roles', global, on the database,
 * on the table); the database a line names is read as the connection's.
 * Returns 0; DD_ERR_FATAL naming every privilege missing and the file's
 * line; DD_ERR_CONFIG for a file it cannot read (errstr says why). */
int dd_grants_check_declared(dd_db_t *db, const char *file, char *errstr, size_t errstr_size);

#endif /* DD_GRANTS_H */
