/*
 * The writer schemas' fingerprints (see dd_schemafp.h).
 *
 * INSERT IGNORE then SELECT: of two processes meeting a new id at once
 * (one before a registry was rebuilt, one after), the first to insert
 * wins and the other reads what it wrote, in every shard.
 */
#include "dd_schemafp.h"

#include <stdio.h>
#include <string.h>

#include "dd_buf.h"
#include "dd_common.h"
#include "dd_grants.h"
#include "dd_text.h"

#define DD_SCHEMAFP_LEN 32

static const char dd_schemafp_ddl[] =
    "CREATE TABLE IF NOT EXISTS " DD_SCHEMAFP_TABLE " ("
    " schema_id INT UNSIGNED NOT NULL PRIMARY KEY,"
    " fingerprint BINARY(32) NOT NULL,"
    " recorded_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
    ") ENGINE=InnoDB";

int dd_schemafp_migrate(MYSQL *db, char *errstr, size_t errstr_size)
{
    return dd_db_exec_raw(db, dd_schemafp_ddl, errstr, errstr_size);
}

int dd_schemafp_check(dd_db_t *db, const dd_conf_t *conf, int record, char *errstr,
                      size_t errstr_size)
{
    /* the probes say a missing privilege, or a missing table to whom the
     * server tells it (information_schema would hide a table without
     * privileges on it, as if it were missing) */
    int rc = dd_grants_check(db, conf, NULL,
                             DD_GRANTS_SCHEMAFP_READ | (record ? DD_GRANTS_SCHEMAFP_RECORD : 0),
                             errstr, errstr_size);

    if (rc != DD_ERR_CONFIG) return rc;
    dd_errstr_set(errstr, errstr_size,
                  "the database (%s) has no table " DD_SCHEMAFP_TABLE
                  ", where the fingerprints of the Avro writer schemas are recorded: run "
                  "`dedupd migrate` with this configuration",
                  dd_db_settings(db)->database);
    return DD_ERR_FATAL;
}

/* One shard: records fingerprint for id unless it has one (record), and
 * compares. */
static int dd_schemafp_shard(const dd_schemafp_t *sf, int s, uint32_t id, const unsigned char *fp,
                             char *errstr, size_t errstr_size)
{
    char who[340], got[2 * DD_SCHEMAFP_LEN + 1], want[2 * DD_SCHEMAFP_LEN + 1];
    dd_buf_t sql = {0};
    dd_db_t *db = NULL;
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;
    unsigned long *lens;
    int rc = dd_db_new_shard(&db, sf->conf, s, errstr, errstr_size), differs = 0;

    if (rc) goto out;
    dd_conf_shard_name(sf->conf, s, who, sizeof(who));
    if (sf->record) {
        dd_buf_printf(
            &sql, "INSERT IGNORE INTO " DD_SCHEMAFP_TABLE " (schema_id, fingerprint) VALUES (%u, ",
            id);
        dd_db_hex(&sql, fp, DD_SCHEMAFP_LEN);
        dd_buf_puts(&sql, ")");
        if (sql.oom) {
            rc = DD_ERR_NOMEM;
            goto out;
        }
        if ((rc = dd_db_exec(db, sql.p, sql.len, errstr, errstr_size))) goto out;
    }
    dd_buf_reset(&sql);
    dd_buf_printf(&sql, "SELECT fingerprint FROM " DD_SCHEMAFP_TABLE " WHERE schema_id = %u", id);
    if (sql.oom) {
        rc = DD_ERR_NOMEM;
        goto out;
    }
    if (mysql_real_query(dd_db_mysql(db), sql.p, (unsigned long)sql.len) != 0 ||
        !(res = mysql_store_result(dd_db_mysql(db)))) {
        dd_errstr_set(errstr, errstr_size, "%s: reading " DD_SCHEMAFP_TABLE ": %u: %s", who,
                      mysql_errno(dd_db_mysql(db)), mysql_error(dd_db_mysql(db)));
        rc = dd_db_classify(mysql_errno(dd_db_mysql(db)));
        goto out;
    }
    if (!(row = mysql_fetch_row(res))) goto out; /* nothing recorded, nothing recorded now */
    lens = mysql_fetch_lengths(res);
    if (lens[0] == DD_SCHEMAFP_LEN && memcmp(row[0], fp, DD_SCHEMAFP_LEN) == 0) goto out;
    dd_text_hex(got, row[0], lens[0] < DD_SCHEMAFP_LEN ? lens[0] : DD_SCHEMAFP_LEN, 0);
    dd_text_hex(want, fp, DD_SCHEMAFP_LEN, 0);
    got[2 * (lens[0] < DD_SCHEMAFP_LEN ? lens[0] : DD_SCHEMAFP_LEN)] = '\0';
    want[2 * DD_SCHEMAFP_LEN] = '\0';
    dd_errstr_set(errstr, errstr_size,
                  "%s recorded fingerprint %s for it, the schema served now has %s", who, got,
                  want);
    differs = 1;
out:
    if (res) mysql_free_result(res);
    if (rc == DD_ERR_NOMEM) dd_errstr_set(errstr, errstr_size, "out of memory");
    dd_buf_release(&sql);
    dd_db_destroy(db);
    /* only a difference is DD_ERR_PERMANENT, whatever a database error is */
    return differs ? DD_ERR_PERMANENT : rc == DD_ERR_PERMANENT ? DD_ERR_RETRIABLE : rc;
}

int dd_schemafp_verify(void *opaque, uint32_t id, const unsigned char *fingerprint, char *errstr,
                       size_t errstr_size)
{
    const dd_schemafp_t *sf = opaque;
    int rc = DD_OK;

    for (int s = 0; !rc && s < sf->conf->shard_cnt; s++)
        rc = dd_schemafp_shard(sf, s, id, fingerprint, errstr, errstr_size);
    return rc;
}
