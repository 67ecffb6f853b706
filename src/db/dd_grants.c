/*
 * Privilege probe (see dd_grants.h). Each probe is one statement of the
 * shape dedupd runs, touching every column it reads or writes, so a
 * privilege missing on one column shows too. The probes go in an order
 * where each one's other needs were probed before it (an UPDATE with a
 * WHERE also needs SELECT), so the one that fails names the privilege
 * that is missing.
 */
#include "dd_grants.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_outbox.h"

#define DD_GRANTS_DOC "docs/OPERATIONS.md, \"Database users and privileges\""

static const struct {
    unsigned needs;      /* DD_GRANTS_* that use it */
    const char *grant;   /* the privilege the statement needs */
    int on_db;           /* granted on the database, not the table */
    const char *purpose; /* "needed to ..." */
    const char *shown;   /* the statement as the message shows it; %s: table */
    const char *sql;     /* the probe; %s: table */
    const char *table;   /* the table it is on; NULL: the dedup table */
} dd_grants_probes[] = {
    {DD_GRANTS_READ | DD_GRANTS_CLAIM | DD_GRANTS_PURGE, "SELECT", 0, "look keys up",
     "SELECT biz_key, request_hash, status, error FROM %s WHERE biz_key IN (...)",
     "SELECT biz_key, request_hash, status, response, error, attempts, claim_token, owner,"
     " lease_until, topic, kpartition, koffset, created_at, updated_at, expire_at"
     " FROM `%s` WHERE biz_key = ?",
     NULL},
    {DD_GRANTS_CLAIM, "INSERT", 0, "claim keys",
     "INSERT INTO %s (biz_key, request_hash, status, ...) VALUES ...",
     "INSERT INTO `%s` (biz_key, request_hash, status, response, error, attempts, claim_token,"
     " owner, lease_until, topic, kpartition, koffset, expire_at)"
     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
     NULL},
    {DD_GRANTS_CLAIM, "UPDATE", 0, "record outcomes and take failed keys over",
     "INSERT INTO %s ... ON DUPLICATE KEY UPDATE status = VALUES(status), ...",
     "UPDATE `%s` SET status = ?, response = ?, error = ?, attempts = attempts + 1,"
     " claim_token = ?, owner = ?, lease_until = ?, topic = ?, kpartition = ?, koffset = ?,"
     " expire_at = ?, updated_at = NOW(6) WHERE biz_key = ?",
     NULL},
    {DD_GRANTS_PURGE, "DELETE", 0,
     "delete expired keys (dedupd purge, and the background purge of dedupd run unless "
     "purge.interval = 0)",
     "DELETE FROM %s WHERE expire_at < NOW(6) AND status <> 0 ORDER BY expire_at LIMIT ...",
     "DELETE FROM `%s` WHERE expire_at < NOW(6) AND status <> 0 ORDER BY expire_at LIMIT 1", NULL},
    {DD_GRANTS_POSITION, "SELECT", 0, "read where the group's partitions start",
     "SELECT topic, kpartition, next_offset FROM %s WHERE group_id = ...",
     "SELECT group_id, topic, kpartition, next_offset, updated_at FROM `%s` WHERE group_id = ?",
     NULL},
    {DD_GRANTS_POSITION, "INSERT", 0, "record how far the group's outcomes are committed",
     "INSERT INTO %s (group_id, topic, kpartition, next_offset) VALUES ...",
     "INSERT INTO `%s` (group_id, topic, kpartition, next_offset) VALUES (?, ?, ?, ?)", NULL},
    {DD_GRANTS_POSITION, "UPDATE", 0, "move the group's recorded positions on",
     "INSERT INTO %s ... ON DUPLICATE KEY UPDATE next_offset = ...",
     "UPDATE `%s` SET next_offset = ?, updated_at = NOW(6) WHERE group_id = ? AND topic = ?"
     " AND kpartition = ?",
     NULL},
    {DD_GRANTS_SCHEMAFP_READ, "SELECT", 0,
     "read the fingerprints of the Avro writer schemas the keys were decoded with",
     "SELECT fingerprint FROM %s WHERE schema_id = ...",
     "SELECT schema_id, fingerprint, recorded_at FROM `%s` WHERE schema_id = ?", NULL},
    {DD_GRANTS_SCHEMAFP_RECORD, "INSERT", 0,
     "record the fingerprint of each Avro writer schema the keys are decoded with",
     "INSERT IGNORE INTO %s (schema_id, fingerprint) VALUES ...",
     "INSERT IGNORE INTO `%s` (schema_id, fingerprint) VALUES (?, ?)", NULL},
    {DD_GRANTS_TEMP, "CREATE TEMPORARY TABLES", 1, "hold the replay's working set",
     "CREATE TEMPORARY TABLE dd_replay_key (...)",
     "CREATE TEMPORARY TABLE dd_grants_probe (biz_key VARBINARY(255) NOT NULL PRIMARY KEY)"
     " ENGINE=InnoDB",
     NULL},
    {DD_GRANTS_OUTBOX, "SELECT", 0, "read the outbox (the relay, dedupd stats)",
     "SELECT id, event_id, topic, ... FROM %s WHERE state = 0 ORDER BY id LIMIT ...",
     "SELECT id, event_id, topic, msg_key, msg_value, headers, state, error, created FROM `%s`"
     " WHERE state = ? ORDER BY id LIMIT 1",
     DD_OUTBOX_TABLE},
    {DD_GRANTS_OUTBOX, "INSERT", 0, "write the events handlers emit",
     "INSERT INTO %s (event_id, topic, msg_key, msg_value, headers) VALUES ...",
     "INSERT INTO `%s` (event_id, topic, msg_key, msg_value, headers) VALUES (?, ?, ?, ?, ?)",
     DD_OUTBOX_TABLE},
    {DD_GRANTS_OUTBOX, "UPDATE", 0, "park the events Kafka refuses for good",
     "UPDATE %s SET state = 1, error = ... WHERE id = ...",
     "UPDATE `%s` SET state = ?, error = ? WHERE id = ?", DD_OUTBOX_TABLE},
    {DD_GRANTS_OUTBOX, "DELETE", 0, "delete the events Kafka acknowledged",
     "DELETE FROM %s WHERE id IN (...)", "DELETE FROM `%s` WHERE id IN (?)", DD_OUTBOX_TABLE},
};

unsigned dd_grants_run_needs(const dd_conf_t *conf)
{
    return DD_GRANTS_CLAIM | (conf->purge.interval_s > 0 ? DD_GRANTS_PURGE : 0) |
           (conf->outbox.enabled ? DD_GRANTS_OUTBOX : 0);
}

/* tmpl with its "%s" replaced by table (the templates are not formats:
 * keeping them out of printf keeps the compiler's format checks). */
static void dd_grants_fill(char *out, size_t out_size, const char *tmpl, const char *table)
{
    const char *mark = strstr(tmpl, "%s");

    if (mark)
        snprintf(out, out_size, "%.*s%s%s", (int)(mark - tmpl), tmpl, table, mark + 2);
    else
        snprintf(out, out_size, "%s", tmpl);
}

/* 'name'@'host' from CURRENT_USER()'s "name@host" (the host part is the
 * account's, such as '%', not the address the session came from). */
static void dd_grants_account(const char *account, char *out, size_t out_size)
{
    const char *at = strrchr(account, '@');

    if (at)
        snprintf(out, out_size, "'%.*s'@'%s'", (int)(at - account), account, at + 1);
    else
        snprintf(out, out_size, "'%s'", account);
}

int dd_grants_explain(const char *account, const char *database, const char *table,
                      const char *grant, int on_db, const char *purpose, const char *shown,
                      unsigned int err, const char *msg, char *out, size_t out_size)
{
    const char *denied = msg ? strstr(msg, " command denied") : NULL, *col;
    char who[200], priv[64], object[300], stmt[300];

    if (err != 1044 && err != 1142 && err != 1143) return 0;
    dd_grants_account(account, who, sizeof(who));
    /* "INSERT command denied to user ... [for column 'c' in table 't']" */
    if (denied && denied > msg && (size_t)(denied - msg) < sizeof(priv))
        snprintf(priv, sizeof(priv), "%.*s", (int)(denied - msg), msg);
    else
        snprintf(priv, sizeof(priv), "%s", grant);
    col = err == 1143 && msg ? strstr(msg, "for column '") : NULL;
    if (on_db)
        snprintf(object, sizeof(object), "%s.*", database);
    else if (col)
        snprintf(object, sizeof(object), "column %.*s of %s.%s", (int)strcspn(col + 12, "'"),
                 col + 12, database, table);
    else
        snprintf(object, sizeof(object), "%s.%s", database, table);
    dd_grants_fill(stmt, sizeof(stmt), shown, table);
    snprintf(out, out_size,
             "the database user %s lacks %s on %s (needed to %s: %s): "
             "GRANT %s ON `%s`.%s%s%s TO %s (%s)",
             who, priv, object, purpose, stmt, priv, database, on_db ? "*" : "`",
             on_db ? "" : table, on_db ? "" : "`", who, DD_GRANTS_DOC);
    return 1;
}

/* CURRENT_USER(): the account the server matched, into out. */
static void dd_grants_current_user(MYSQL *mysql, const dd_conf_mysql_t *my, char *out,
                                   size_t out_size)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    snprintf(out, out_size, "%s", my->user);
    if (mysql_real_query(mysql, "SELECT CURRENT_USER()", 21) != 0 ||
        !(res = mysql_store_result(mysql)))
        return;
    if ((row = mysql_fetch_row(res)) && row[0]) snprintf(out, out_size, "%s", row[0]);
    mysql_free_result(res);
}

int dd_grants_check(dd_db_t *db, const dd_conf_t *conf, const char *table, unsigned needs,
                    char *errstr, size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    char sql[1024], account[300];
    int rc = DD_OK;

    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(dd_grants_probes); i++) {
        MYSQL_STMT *stmt;
        unsigned int err;

        const char *on = dd_grants_probes[i].table ? dd_grants_probes[i].table : table;

        if (!(dd_grants_probes[i].needs & needs)) continue;
        dd_grants_fill(sql, sizeof(sql), dd_grants_probes[i].sql, on);
        if (!(stmt = mysql_stmt_init(mysql))) {
            dd_errstr_set(errstr, errstr_size, "out of memory");
            return DD_ERR_NOMEM;
        }
        if (mysql_stmt_prepare(stmt, sql, (unsigned long)strlen(sql)) != 0) {
            err = mysql_stmt_errno(stmt);
            dd_grants_current_user(mysql, dd_db_settings(db), account, sizeof(account));
            if (dd_grants_explain(account, dd_db_settings(db)->database, on,
                                  dd_grants_probes[i].grant, dd_grants_probes[i].on_db,
                                  dd_grants_probes[i].purpose, dd_grants_probes[i].shown, err,
                                  mysql_stmt_error(stmt), errstr, errstr_size)) {
                rc = DD_ERR_FATAL;
            } else {
                dd_errstr_set(errstr, errstr_size, "checking the privilege %s on %s: %u: %s",
                              dd_grants_probes[i].grant, on, err, mysql_stmt_error(stmt));
                rc = dd_db_classify(err);
            }
        }
        mysql_stmt_close(stmt);
    }
    return rc;
}
