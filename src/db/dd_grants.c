/*
 * Privilege probe (see dd_grants.h). What the runtime user needs is
 * declared once, object by object (dd_grants_needed): the checks are made
 * from it, and so are the [runtime] and [outbox] GRANT lines of
 * sql/grants.sql (dd_grants_render; a unit test holds the file to it).
 *
 * Each privilege is probed by preparing a statement that needs it: the
 * server checks privileges when it prepares, and a statement that is
 * closed without being executed changes nothing. On the dedup table the
 * probes are the statements dedupd runs, touching every column they read
 * or write, so a privilege missing on one column shows too, in an order
 * where each one's other needs were probed before it (an UPDATE with a
 * WHERE also needs SELECT); on dedupd's other tables a plain statement of
 * the kind suffices.
 */
#include "dd_grants.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_outbox.h"

#define DD_GRANTS_DOC "docs/OPERATIONS.md, \"Database users and privileges\""
/* The object of an entry: each route's dedup table, or the database. */
#define DD_GRANTS_ON_DEDUP NULL
#define DD_GRANTS_ON_DB "*"

/* What the runtime user needs, in sql/grants.sql's order; consecutive
 * entries on one object make one GRANT line there. A table dedupd adds is
 * one entry here (and its line in sql/grants.sql, which the unit test
 * then asks for): check, run and every command whose needs name it check
 * it from then on. */
static const struct {
    const char *section; /* sql/grants.sql's */
    const char *on;      /* a table, DD_GRANTS_ON_DEDUP or DD_GRANTS_ON_DB */
    const char *privs;   /* "SELECT, INSERT" */
    unsigned needs;      /* DD_GRANTS_*: the uses that need them */
    const char *purpose; /* "needed to ..." */
} dd_grants_needed[] = {
    {"runtime", DD_GRANTS_ON_DEDUP, "SELECT", DD_GRANTS_READ | DD_GRANTS_CLAIM | DD_GRANTS_PURGE,
     "look keys up"},
    {"runtime", DD_GRANTS_ON_DEDUP, "INSERT, UPDATE", DD_GRANTS_CLAIM, "claim keys"},
    {"runtime", DD_GRANTS_ON_DEDUP, "DELETE", DD_GRANTS_PURGE, "delete expired keys"},
    {"runtime", "dedupd_schema", "SELECT", DD_GRANTS_TABLES,
     "read the schema version of each dedup table"},
    {"runtime", "dedupd_shard_layout", "SELECT", DD_GRANTS_TABLES,
     "read the shard layout dedupd migrate recorded"},
    {"runtime", "dedupd_position", "SELECT, INSERT, UPDATE", DD_GRANTS_POSITION,
     "keep the consumer's positions in the database"},
    {"runtime", "dedupd_avro_schema", "SELECT", DD_GRANTS_SCHEMAFP_READ,
     "read the fingerprint recorded for each Avro writer schema"},
    {"runtime", "dedupd_avro_schema", "INSERT", DD_GRANTS_SCHEMAFP_RECORD,
     "record the fingerprint of an Avro writer schema met for the first time"},
    {"runtime", DD_GRANTS_ON_DB, "CREATE TEMPORARY TABLES", DD_GRANTS_TEMP,
     "hold the replay's working set"},
    {"outbox", DD_OUTBOX_TABLE, "SELECT, INSERT, UPDATE, DELETE", DD_GRANTS_OUTBOX,
     "write the events handlers emit, publish them and park those Kafka refuses"},
};

/* The probes of a privilege on an object; for the privileges of another
 * table without one here, dd_grants_generic's. */
static const struct {
    const char *on;      /* as in dd_grants_needed */
    const char *grant;   /* the privilege the statement needs */
    const char *purpose; /* "needed to ..." */
    const char *shown;   /* the statement as the message shows it; %s: table */
    const char *sql;     /* the probe; %s: table */
} dd_grants_probes[] = {
    {DD_GRANTS_ON_DEDUP, "SELECT", "look keys up",
     "SELECT biz_key, request_hash, status, error FROM %s WHERE biz_key IN (...)",
     "SELECT biz_key, request_hash, status, response, error, attempts, claim_token, owner,"
     " lease_until, topic, kpartition, koffset, created_at, updated_at, expire_at"
     " FROM `%s` WHERE biz_key = ?"},
    {DD_GRANTS_ON_DEDUP, "INSERT", "claim keys",
     "INSERT INTO %s (biz_key, request_hash, status, ...) VALUES ...",
     "INSERT INTO `%s` (biz_key, request_hash, status, response, error, attempts, claim_token,"
     " owner, lease_until, topic, kpartition, koffset, expire_at)"
     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
    {DD_GRANTS_ON_DEDUP, "UPDATE", "record outcomes and take failed keys over",
     "INSERT INTO %s ... ON DUPLICATE KEY UPDATE status = VALUES(status), ...",
     "UPDATE `%s` SET status = ?, response = ?, error = ?, attempts = attempts + 1,"
     " claim_token = ?, owner = ?, lease_until = ?, topic = ?, kpartition = ?, koffset = ?,"
     " expire_at = ?, updated_at = NOW(6) WHERE biz_key = ?"},
    {DD_GRANTS_ON_DEDUP, "DELETE",
     "delete expired keys (dedupd purge, and the background purge of dedupd run unless "
     "purge.interval = 0)",
     "DELETE FROM %s WHERE expire_at < NOW(6) AND status <> 0 ORDER BY expire_at LIMIT ...",
     "DELETE FROM `%s` WHERE expire_at < NOW(6) AND status <> 0 ORDER BY expire_at LIMIT 1"},
    {"dedupd_position", "SELECT", "read where the group's partitions start",
     "SELECT topic, kpartition, next_offset, check_offset, ... FROM %s WHERE group_key = ...",
     "SELECT group_id, group_key, topic, kpartition, next_offset, updated_at, check_offset,"
     " check_timestamp, check_digest FROM `%s` WHERE group_key = ?"},
    {"dedupd_position", "INSERT", "record how far the group's outcomes are committed",
     "INSERT INTO %s (group_id, group_key, topic, kpartition, next_offset, ...) VALUES ...",
     "INSERT INTO `%s` (group_id, group_key, topic, kpartition, next_offset, check_offset,"
     " check_timestamp, check_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"},
    {"dedupd_position", "UPDATE", "move the group's recorded positions on",
     "INSERT INTO %s ... ON DUPLICATE KEY UPDATE next_offset = ...",
     "UPDATE `%s` SET next_offset = ?, check_offset = ?, check_timestamp = ?, check_digest = ?,"
     " updated_at = NOW(6) WHERE group_key = ? AND topic = ? AND kpartition = ?"},
    {"dedupd_avro_schema", "SELECT",
     "read the fingerprints of the Avro writer schemas the keys were decoded with",
     "SELECT fingerprint FROM %s WHERE schema_id = ...",
     "SELECT schema_id, fingerprint, recorded_at FROM `%s` WHERE schema_id = ?"},
    {"dedupd_avro_schema", "INSERT",
     "record the fingerprint of each Avro writer schema the keys are decoded with",
     "INSERT IGNORE INTO %s (schema_id, fingerprint) VALUES ...",
     "INSERT IGNORE INTO `%s` (schema_id, fingerprint) VALUES (?, ?)"},
    {DD_GRANTS_ON_DB, "CREATE TEMPORARY TABLES", "hold the replay's working set",
     "CREATE TEMPORARY TABLE dd_replay_key (...)",
     "CREATE TEMPORARY TABLE dd_grants_probe (biz_key VARBINARY(255) NOT NULL PRIMARY KEY)"
     " ENGINE=InnoDB"},
};

/* A statement needing priv on a table (%s), and nothing else; NULL for a
 * privilege without one. The UPDATE names a column no table has: the
 * server checks the privilege on the table first (1142 when it is
 * missing), then finds no such column (1054: the privilege is held). */
static const char *dd_grants_generic(const char *priv)
{
    if (strcmp(priv, "SELECT") == 0) return "SELECT * FROM `%s` LIMIT 0";
    if (strcmp(priv, "INSERT") == 0) return "INSERT INTO `%s` () VALUES ()";
    if (strcmp(priv, "UPDATE") == 0) return "UPDATE `%s` SET dd_grants_no_column = 0 WHERE 0";
    if (strcmp(priv, "DELETE") == 0) return "DELETE FROM `%s` WHERE 0";
    return NULL;
}
#define DD_GRANTS_HELD_ERR 1054 /* the generic UPDATE's "no such column" */

unsigned dd_grants_run_needs(const dd_conf_t *conf)
{
    return DD_GRANTS_CLAIM | DD_GRANTS_TABLES | (conf->purge.interval_s > 0 ? DD_GRANTS_PURGE : 0) |
           (conf->outbox.enabled ? DD_GRANTS_OUTBOX : 0);
}

static int dd_grants_same(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
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
    char who[200], priv[128], object[300], stmt[300] = "";

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
    if (shown) {
        memcpy(stmt, ": ", 3);
        dd_grants_fill(stmt + 2, sizeof(stmt) - 2, shown, table);
    }
    snprintf(out, out_size,
             "the database user %s lacks %s on %s (needed to %s%s): "
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

/* Prepares sql: 0 when it prepares (the privilege is held), 1 when the
 * server denies a privilege (*err, msg), else the class of the error
 * (errstr says which). */
static int dd_grants_probe(MYSQL *mysql, const char *sql, const char *priv, const char *on,
                           unsigned *err, char *msg, size_t msg_size, char *errstr,
                           size_t errstr_size)
{
    MYSQL_STMT *stmt = mysql_stmt_init(mysql);
    int rc = 0;

    if (!stmt) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    if (mysql_stmt_prepare(stmt, sql, (unsigned long)strlen(sql)) != 0) {
        *err = mysql_stmt_errno(stmt);
        snprintf(msg, msg_size, "%s", mysql_stmt_error(stmt));
        if (*err == 1044 || *err == 1142 || *err == 1143) {
            rc = 1;
        } else if (*err == 1146) {
            dd_errstr_set(errstr, errstr_size,
                          "table %s does not exist: run `dedupd migrate` with this "
                          "configuration, which creates dedupd's tables",
                          on);
            rc = DD_ERR_CONFIG;
        } else if (*err != DD_GRANTS_HELD_ERR || strcmp(priv, "UPDATE") != 0) {
            dd_errstr_set(errstr, errstr_size, "checking the privilege %s on %s: %u: %s", priv, on,
                          *err, msg);
            rc = dd_db_classify(*err);
        }
    }
    mysql_stmt_close(stmt);
    return rc;
}

/* The privileges of entry i on the object on (a table or "*"): each one
 * probed, those missing named together in one GRANT. */
static int dd_grants_check_entry(dd_db_t *db, size_t i, const char *on, char *errstr,
                                 size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(db);
    const char *privs = dd_grants_needed[i].privs, *purpose = dd_grants_needed[i].purpose;
    const char *shown = NULL;
    char sql[1024], priv[64], missing[128] = "", msg[512], first_msg[512] = "", account[300];
    unsigned err = 0, first_err = 0;
    int denied = 0, rc = DD_OK;

    for (const char *p = privs; !rc && *p; p += strspn(p, ", ")) {
        const char *tmpl = NULL, *why = purpose, *show = NULL;
        size_t n = strcspn(p, ",");
        snprintf(priv, sizeof(priv), "%.*s", (int)n, p);
        p += n;
        for (size_t k = 0; !tmpl && k < DD_ARRAY_LEN(dd_grants_probes); k++)
            if (dd_grants_same(dd_grants_probes[k].on, dd_grants_needed[i].on) &&
                strcmp(dd_grants_probes[k].grant, priv) == 0) {
                tmpl = dd_grants_probes[k].sql;
                why = dd_grants_probes[k].purpose;
                show = dd_grants_probes[k].shown;
            }
        if (!tmpl && !(tmpl = dd_grants_generic(priv))) continue; /* the unit test sees none is */
        dd_grants_fill(sql, sizeof(sql), tmpl, on);
        rc = dd_grants_probe(mysql, sql, priv, on, &err, msg, sizeof(msg), errstr, errstr_size);
        if (rc != 1) continue;
        rc = DD_OK;
        if (!denied++) {
            first_err = err;
            snprintf(first_msg, sizeof(first_msg), "%s", msg);
            purpose = why;
            shown = show;
        }
        snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                 denied > 1 ? ", " : "", priv);
    }
    if (rc || !denied) return rc;
    dd_grants_current_user(mysql, dd_db_settings(db), account, sizeof(account));
    /* One privilege: the server's words, which may name a column; several:
     * all of them, for the entry's purpose. */
    dd_grants_explain(account, dd_db_settings(db)->database, on, missing, strcmp(on, "*") == 0,
                      denied == 1 ? purpose : dd_grants_needed[i].purpose,
                      denied == 1 ? shown : NULL, first_err, denied == 1 ? first_msg : NULL, errstr,
                      errstr_size);
    return DD_ERR_FATAL;
}

int dd_grants_check(dd_db_t *db, const dd_conf_t *conf, const char *table, unsigned needs,
                    char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    (void)conf;
    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(dd_grants_needed); i++) {
        const char *on = dd_grants_needed[i].on ? dd_grants_needed[i].on : table;
        if (!(dd_grants_needed[i].needs & needs) || !on) continue;
        rc = dd_grants_check_entry(db, i, on, errstr, errstr_size);
    }
    return rc;
}

int dd_grants_render(const char *section, const char *database, const char *table,
                     const char *account, dd_buf_t *out)
{
    size_t n = DD_ARRAY_LEN(dd_grants_needed);

    for (size_t i = 0; i < n; i++) {
        const char *on = dd_grants_needed[i].on ? dd_grants_needed[i].on : table;
        int first = i == 0 || !dd_grants_same(dd_grants_needed[i - 1].on, dd_grants_needed[i].on);
        int last =
            i + 1 == n || !dd_grants_same(dd_grants_needed[i + 1].on, dd_grants_needed[i].on);
        if (strcmp(dd_grants_needed[i].section, section) != 0) continue;
        dd_buf_printf(out, "%s%s", first ? "GRANT " : ", ", dd_grants_needed[i].privs);
        if (!last) continue;
        if (strcmp(on, "*") == 0)
            dd_buf_printf(out, " ON `%s`.* TO %s;\n", database, account);
        else
            dd_buf_printf(out, " ON `%s`.`%s` TO %s;\n", database, on, account);
    }
    return out->oom ? DD_ERR_NOMEM : DD_OK;
}

int dd_grants_probed(void)
{
    for (size_t i = 0; i < DD_ARRAY_LEN(dd_grants_needed); i++)
        for (const char *p = dd_grants_needed[i].privs; *p; p += strspn(p, ", ")) {
            size_t n = strcspn(p, ","), k;
            char priv[64];
            snprintf(priv, sizeof(priv), "%.*s", (int)n, p);
            p += n;
            for (k = 0; k < DD_ARRAY_LEN(dd_grants_probes); k++)
                if (dd_grants_same(dd_grants_probes[k].on, dd_grants_needed[i].on) &&
                    strcmp(dd_grants_probes[k].grant, priv) == 0)
                    break;
            if (k == DD_ARRAY_LEN(dd_grants_probes) &&
                (!dd_grants_needed[i].on || !dd_grants_generic(priv)))
                return 0;
        }
    return 1;
}
