/*
 * `dedupd replay`'s statements on its own connections: shard 0's session,
 * which holds the temporary tables (dd_replay_key, dd_replay_event) that
 * the judge fills, --apply records its outcomes in and the report reads
 * back, and each shard's connection for its lookups.
 */
#include "dd_replay_int.h"

#include <string.h>

#include "dd_common.h"

int dd_replay_exec(dd_replay_t *rp, const char *sql, size_t len, char *errstr, size_t errstr_size)
{
    if (rp->sql.oom) {
        dd_errstr_set(errstr, errstr_size, "out of memory building a statement");
        return DD_ERR_NOMEM;
    }
    return dd_db_exec(rp->db, sql, len, errstr, errstr_size);
}

MYSQL_RES *dd_replay_query(dd_replay_t *rp, int use, char *errstr, size_t errstr_size)
{
    return dd_replay_shard_query(rp, 0, use, errstr, errstr_size);
}

MYSQL_RES *dd_replay_shard_query(dd_replay_t *rp, int shard, int use, char *errstr,
                                 size_t errstr_size)
{
    MYSQL *mysql = dd_db_mysql(rp->sdb[shard]);
    MYSQL_RES *res = NULL;

    if (rp->sql.oom)
        dd_errstr_set(errstr, errstr_size, "out of memory building a statement");
    else if (mysql_real_query(mysql, rp->sql.p, (unsigned long)rp->sql.len) != 0 ||
             !(res = use ? mysql_use_result(mysql) : mysql_store_result(mysql))) {
        if (rp->conf->shard_cnt > 1)
            dd_errstr_set(errstr, errstr_size, "shard %d: %u: %s", shard, mysql_errno(mysql),
                          mysql_error(mysql));
        else
            dd_errstr_set(errstr, errstr_size, "%u: %s", mysql_errno(mysql), mysql_error(mysql));
    }
    return res;
}

/* dd_replay_key: per key (of a route: its index), its first message in the
 * range and the verdict (wrong_shard: row_shard, the shard holding its
 * row). dd_replay_event: bad messages and copies unlike their key's first
 * one. InnoDB, so a large range spills to disk instead of memory. */
int dd_replay_temp_tables(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    static const char *const ddl[] = {
        "CREATE TEMPORARY TABLE dd_replay_key ("
        " route SMALLINT NOT NULL, shard SMALLINT NOT NULL, biz_key VARBINARY(255) NOT NULL,"
        " msg_hash BINARY(32) NOT NULL,"
        " topic VARCHAR(249) NOT NULL, kpartition INT NOT NULL, koffset BIGINT NOT NULL,"
        " kafka_key BLOB NULL,"
        " status TINYINT NOT NULL, reason VARCHAR(32) NULL, stored_hash BINARY(32) NULL,"
        " detail VARCHAR(1024) NULL, row_shard SMALLINT NULL, outcome TINYINT NOT NULL DEFAULT 0,"
        " outcome_error VARCHAR(1024) NULL, PRIMARY KEY (route, biz_key)) ENGINE=InnoDB",
        "CREATE TEMPORARY TABLE dd_replay_event ("
        " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, route SMALLINT NOT NULL,"
        " shard SMALLINT NULL, biz_key VARBINARY(255) NULL,"
        " msg_hash BINARY(32) NULL, topic VARCHAR(249) NOT NULL, kpartition INT NOT NULL,"
        " koffset BIGINT NOT NULL, kafka_key BLOB NULL, status TINYINT NOT NULL,"
        " reason VARCHAR(32) NULL, stored_hash BINARY(32) NULL, detail VARCHAR(1024) NULL)"
        " ENGINE=InnoDB",
    };
    int rc = DD_OK;

    for (size_t i = 0; !rc && i < DD_ARRAY_LEN(ddl); i++)
        rc = dd_replay_exec(rp, ddl[i], strlen(ddl[i]), errstr, errstr_size);
    return rc;
}

void dd_replay_put_text(dd_replay_t *rp, const char *s)
{
    if (s && *s)
        dd_db_quote(&rp->sql, dd_db_mysql(rp->db), s, strnlen(s, 1024));
    else
        dd_buf_puts(&rp->sql, "NULL");
}

int dd_replay_db_retriable(dd_replay_t *rp)
{
    for (int s = 0; s < rp->conf->shard_cnt; s++) {
        MYSQL *mysql = rp->sdb[s] ? dd_db_mysql(rp->sdb[s]) : NULL;
        if (rp->sdb[s] && !mysql) return 1; /* a reconnect failed: not connected */
        if (mysql && dd_db_classify(mysql_errno(mysql)) == DD_ERR_RETRIABLE) return 1;
    }
    return 0;
}

int dd_replay_reconnect(dd_replay_t *rp, char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    for (int s = 0; !rc && s < rp->conf->shard_cnt; s++)
        rc = dd_db_reconnect(rp->sdb[s], errstr, errstr_size);
    if (!rc) rc = dd_replay_temp_tables(rp, errstr, errstr_size);
    return rc;
}
