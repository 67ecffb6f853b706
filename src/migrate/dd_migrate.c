/*
 * Applies the embedded sql/ files in version order. DDL commits implicitly in
 * MySQL, so each file is written to be safe to run again (IF NOT EXISTS), and
 * the version is recorded after the file ran (a column or index it finds
 * there already counts as done). A named lock keeps two workers
 * starting at once from migrating the same table concurrently. Then the key
 * format is recorded on the table if it has none (see dd_migrate.h).
 */
#include "dd_migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysqld_error.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_key.h"
#include "dd_log.h"

static const char dd_migrate_schema_sql[] =
    "CREATE TABLE IF NOT EXISTS dedupd_schema ("
    " table_name VARCHAR(64) NOT NULL PRIMARY KEY,"
    " version INT NOT NULL,"
    " applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
    ") ENGINE=InnoDB";

int dd_migrate_version(MYSQL *db, const char *table, int *version, char *errstr, size_t errstr_size)
{
    char sql[256], esc[160];
    MYSQL_RES *res;
    MYSQL_ROW row;

    *version = 0;
    mysql_real_escape_string(db, esc, table, (unsigned long)strnlen(table, 64));
    snprintf(sql, sizeof(sql), "SELECT version FROM dedupd_schema WHERE table_name = '%s'", esc);
    /* Read only, so `dedupd check` works as the runtime user: no
     * dedupd_schema yet means nothing was migrated. */
    if (mysql_query(db, sql) != 0 && mysql_errno(db) == ER_NO_SUCH_TABLE) return DD_OK;
    if (mysql_errno(db) || !(res = mysql_store_result(db))) {
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(db), mysql_error(db));
        return dd_db_classify(mysql_errno(db));
    }
    row = mysql_fetch_row(res);
    if (row && row[0]) *version = atoi(row[0]);
    mysql_free_result(res);
    return DD_OK;
}

/* Replaces every {{table}} in sql; the table name was validated as an identifier. */
static char *dd_migrate_render(const char *sql, const char *table)
{
    size_t tlen = strlen(table), cap = strlen(sql) + 1;
    const char *p;
    char *out, *o;

    for (p = sql; (p = strstr(p, "{{table}}")); p += 9)
        cap += tlen;
    out = malloc(cap);
    if (!out) return NULL;
    for (o = out, p = sql; *p;) {
        if (strncmp(p, "{{table}}", 9) == 0) {
            memcpy(o, table, tlen);
            o += tlen;
            p += 9;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* Runs each ";"-terminated statement of one file. */
static int dd_migrate_apply(MYSQL *db, const dd_migration_t *m, const char *table, char *errstr,
                            size_t errstr_size)
{
    char *text = dd_migrate_render(m->sql, table), *stmt, *save = NULL;
    char sql[256], err[512];
    int rc = DD_OK;

    if (!text) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return DD_ERR_NOMEM;
    }
    for (stmt = strtok_r(text, ";", &save); stmt; stmt = strtok_r(NULL, ";", &save)) {
        /* Skip pieces that hold only comments and whitespace. */
        const char *q = stmt;
        int empty = 1;
        while (*q) {
            if (*q == '-' && q[1] == '-') {
                q = strchr(q, '\n');
                if (!q) break;
            } else if (*q != ' ' && *q != '\n' && *q != '\t' && *q != '\r') {
                empty = 0;
                break;
            } else {
                q++;
            }
        }
        if (empty) continue;
        rc = dd_db_exec_raw(db, stmt, err, sizeof(err));
        /* A column or an index that is there already: the file ran before,
         * and the version was not recorded (ALTER TABLE commits at once). */
        if (rc && (mysql_errno(db) == ER_DUP_FIELDNAME || mysql_errno(db) == ER_DUP_KEYNAME)) {
            dd_log(DD_LOG_INFO, "Migration %s on table %s: %s; already done.", m->name, table, err);
            rc = DD_OK;
        }
        if (rc) {
            dd_errstr_set(errstr, errstr_size, "migration %s on table %s failed: %s", m->name,
                          table, err);
            goto out;
        }
    }
    snprintf(sql, sizeof(sql),
             "INSERT INTO dedupd_schema (table_name, version) VALUES ('%s', %d) "
             "ON DUPLICATE KEY UPDATE version = VALUES(version), applied_at = NOW(6)",
             table, m->version);
    rc = dd_db_exec_raw(db, sql, errstr, errstr_size);
out:
    free(text);
    return rc;
}

/*
 * Key format
 */

#define DD_MIGRATE_FORMAT_TAG "dedupd key_format="

int dd_migrate_key_format(MYSQL *db, const char *table, int *format, char *errstr,
                          size_t errstr_size)
{
    char sql[320], esc[160];
    const char *tag;
    MYSQL_RES *res;
    MYSQL_ROW row;

    *format = -1;
    mysql_real_escape_string(db, esc, table, (unsigned long)strnlen(table, 64));
    snprintf(sql, sizeof(sql),
             "SELECT TABLE_COMMENT FROM information_schema.TABLES"
             " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%s'",
             esc);
    if (mysql_query(db, sql) != 0 || !(res = mysql_store_result(db))) {
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(db), mysql_error(db));
        return dd_db_classify(mysql_errno(db));
    }
    if ((row = mysql_fetch_row(res))) {
        *format = 0;
        if (row[0] && (tag = strstr(row[0], DD_MIGRATE_FORMAT_TAG)))
            *format = atoi(tag + strlen(DD_MIGRATE_FORMAT_TAG));
    }
    mysql_free_result(res);
    return DD_OK;
}

int dd_migrate_check_key_format(MYSQL *db, const char *table, char *errstr, size_t errstr_size)
{
    int format = -1, rc = dd_migrate_key_format(db, table, &format, errstr, errstr_size);

    if (rc) return rc;
    if (format == DD_KEY_FORMAT) return DD_OK;
    if (format < 0)
        dd_errstr_set(errstr, errstr_size,
                      "dedup table %s does not exist in this database: run `dedupd migrate` "
                      "first",
                      table);
    else if (format == 0)
        dd_errstr_set(errstr, errstr_size,
                      "dedup table %s records no key format: it was written before dedupd "
                      "recorded key formats (format 1), and this dedupd's keys and request "
                      "hashes (format %d) differ for some payloads; see \"Key formats\" in "
                      "docs/KEYS.md, then run `dedupd migrate` to record format %d",
                      table, DD_KEY_FORMAT, DD_KEY_FORMAT);
    else
        dd_errstr_set(errstr, errstr_size,
                      "dedup table %s holds keys of format %d, this dedupd renders format %d: "
                      "the stored keys and request hashes would not match; use the dedupd "
                      "that wrote them, or another dedup table",
                      table, format, DD_KEY_FORMAT);
    return DD_ERR_CONFIG;
}

/* *rows: whether the query returned a row. */
static int dd_migrate_has_rows(MYSQL *db, const char *sql, int *rows, char *errstr,
                               size_t errstr_size)
{
    MYSQL_RES *res;

    if (mysql_query(db, sql) != 0 || !(res = mysql_store_result(db))) {
        dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(db), mysql_error(db));
        return dd_db_classify(mysql_errno(db));
    }
    *rows = mysql_fetch_row(res) != NULL;
    mysql_free_result(res);
    return DD_OK;
}

/* Records DD_KEY_FORMAT on a table that records none; refuses to change a
 * recorded format. */
static int dd_migrate_record_key_format(MYSQL *db, const char *table, char *errstr,
                                        size_t errstr_size)
{
    char sql[256];
    int rows = 0, format = -1, rc = dd_migrate_key_format(db, table, &format, errstr, errstr_size);

    if (rc || format == DD_KEY_FORMAT) return rc;
    if (format != 0) return dd_migrate_check_key_format(db, table, errstr, errstr_size);
    snprintf(sql, sizeof(sql), "SELECT 1 FROM `%s` LIMIT 1", table);
    if ((rc = dd_migrate_has_rows(db, sql, &rows, errstr, errstr_size))) return rc;
    snprintf(sql, sizeof(sql), "ALTER TABLE `%s` COMMENT = '" DD_MIGRATE_FORMAT_TAG "%d'", table,
             DD_KEY_FORMAT);
    if ((rc = dd_db_exec_raw(db, sql, errstr, errstr_size))) return rc;
    if (!rows)
        dd_log(DD_LOG_INFO, "Recorded key format %d on table %s.", DD_KEY_FORMAT, table);
    else
        dd_log(DD_LOG_WARN,
               "Recorded key format %d on table %s, which holds rows written before formats "
               "were recorded (format 1): where a key value held a byte that is now escaped "
               "or an unusual number, its key differs in format %d, and so may a request "
               "hash (docs/KEYS.md, \"Key formats\"); a redelivered old message of that kind "
               "counts as new or as a conflict.",
               DD_KEY_FORMAT, table, DD_KEY_FORMAT);
    return DD_OK;
}

/* A table dedupd never migrated (version 0) that exists already and has no
 * biz_key column is someone else's (a handler's business table named as
 * the dedup table): migrating would alter it and overwrite its comment. */
static int dd_migrate_foreign(MYSQL *db, const char *table, char *errstr, size_t errstr_size)
{
    char sql[400], esc[160];
    int exists = 0, has_key = 0, rc;

    mysql_real_escape_string(db, esc, table, (unsigned long)strnlen(table, 64));
    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND "
             "TABLE_NAME = '%s'",
             esc);
    if ((rc = dd_migrate_has_rows(db, sql, &exists, errstr, errstr_size)) || !exists) return rc;
    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND "
             "TABLE_NAME = '%s' AND COLUMN_NAME = 'biz_key'",
             esc);
    if ((rc = dd_migrate_has_rows(db, sql, &has_key, errstr, errstr_size)) || has_key) return rc;
    dd_errstr_set(errstr, errstr_size,
                  "table %s exists and is not a dedup table (it has no biz_key column): "
                  "migrating it would alter it; name another table as the dedup table",
                  table);
    return DD_ERR_CONFIG;
}

int dd_migrate_run(MYSQL *db, const char *table, char *errstr, size_t errstr_size)
{
    int version = 0, rc;

    rc = dd_db_exec_raw(db, "DO GET_LOCK('dedupd_migrate', 60)", errstr, errstr_size);
    if (rc) return rc;
    rc = dd_db_exec_raw(db, dd_migrate_schema_sql, errstr, errstr_size);
    if (rc == DD_OK) rc = dd_migrate_version(db, table, &version, errstr, errstr_size);
    if (rc == DD_OK && version == 0) rc = dd_migrate_foreign(db, table, errstr, errstr_size);
    for (int i = 0; rc == DD_OK && i < dd_migration_cnt; i++) {
        if (dd_migrations[i].version <= version) continue;
        dd_log(DD_LOG_INFO, "Applying migration %s to table %s.", dd_migrations[i].name, table);
        rc = dd_migrate_apply(db, &dd_migrations[i], table, errstr, errstr_size);
    }
    if (rc == DD_OK) rc = dd_migrate_record_key_format(db, table, errstr, errstr_size);
    dd_db_exec_raw(db, "DO RELEASE_LOCK('dedupd_migrate')", NULL, 0);
    return rc;
}

/*
 * The index of processing rows
 */

#define DD_MIGRATE_PROCESSING_INDEX "ix_processing"

int dd_migrate_processing_index(MYSQL *db, const char *table, int create, int *exists, char *errstr,
                                size_t errstr_size)
{
    char sql[400];
    int rc;

    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
             " AND TABLE_NAME = '%s' AND INDEX_NAME = '" DD_MIGRATE_PROCESSING_INDEX "'",
             table);
    if ((rc = dd_migrate_has_rows(db, sql, exists, errstr, errstr_size)) || *exists || !create)
        return rc;
    snprintf(sql, sizeof(sql),
             "ALTER TABLE `%s` ADD INDEX " DD_MIGRATE_PROCESSING_INDEX " (status, lease_until)",
             table);
    if ((rc = dd_db_exec_raw(db, sql, errstr, errstr_size))) return rc;
    dd_log(DD_LOG_INFO, "Created the index %s of processing rows on table %s (external mode).",
           DD_MIGRATE_PROCESSING_INDEX, table);
    *exists = 1;
    return DD_OK;
}

int dd_migrate_table_has_rows(MYSQL *db, const char *table, int *rows, char *errstr,
                              size_t errstr_size)
{
    char sql[160];
    int rc;

    *rows = 0;
    snprintf(sql, sizeof(sql), "SELECT 1 FROM `%s` LIMIT 1", table);
    rc = dd_migrate_has_rows(db, sql, rows, errstr, errstr_size);
    return rc && mysql_errno(db) == ER_NO_SUCH_TABLE ? DD_OK : rc;
}
