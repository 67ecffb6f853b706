/*
 * The lock that serialises migrations through the database (see
 * dd_migrate_lock.h): a leased row, taken and given back by UPDATEs in
 * autocommit, each retried when the cluster reports a conflict.
 */
#include "dd_migrate_lock.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_db.h"
#include "dd_log.h"

#define DD_MIGRATE_LOCK_POLL_MS 200

static const char dd_migrate_lock_table_sql[] = "CREATE TABLE IF NOT EXISTS dedupd_migrate_lock ("
                                                " id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
                                                " holder VARCHAR(255) NULL,"
                                                " lease_until DATETIME(6) NULL"
                                                ") ENGINE=InnoDB";

int dd_migrate_lock_conflict(unsigned int err)
{
    return err == 1213 || err == 1205;
}

/* Runs sql, again while it conflicts (up to the deadline); *affected gets
 * its affected rows. */
static int dd_migrate_lock_exec(MYSQL *db, const char *sql, unsigned long long *affected,
                                int64_t deadline_ms, char *errstr, size_t errstr_size)
{
    for (;;) {
        if (mysql_query(db, sql) == 0) {
            if (affected) *affected = mysql_affected_rows(db);
            return DD_OK;
        }
        if (!dd_migrate_lock_conflict(mysql_errno(db)) || dd_now_ms() > deadline_ms) break;
        dd_log(DD_LOG_DEBUG, "dedupd migrate: the lock's statement conflicted (%u), again.",
               mysql_errno(db));
        dd_sleep_ms(50, NULL);
    }
    dd_errstr_set(errstr, errstr_size, "the migration lock (dedupd_migrate_lock): %u: %s",
                  mysql_errno(db), mysql_error(db));
    return dd_db_classify(mysql_errno(db));
}

/* The holder, quoted for SQL, into out. */
static void dd_migrate_lock_quote(MYSQL *db, const char *who, char *out, size_t out_size)
{
    char esc[260];
    size_t len = strnlen(who, 127);

    mysql_real_escape_string(db, esc, who, (unsigned long)len);
    snprintf(out, out_size, "'%s'", esc);
}

int dd_migrate_lock_take(MYSQL *db, const char *who, char *errstr, size_t errstr_size)
{
    int64_t deadline = dd_now_ms() + DD_MIGRATE_LOCK_WAIT_S * 1000;
    unsigned long long got = 0;
    char sql[900], holder[270];
    int rc, told = 0;

    dd_migrate_lock_quote(db, who, holder, sizeof(holder));
    rc = dd_migrate_lock_exec(db, dd_migrate_lock_table_sql, NULL, deadline, errstr, errstr_size);
    if (!rc)
        rc = dd_migrate_lock_exec(db, "INSERT IGNORE INTO dedupd_migrate_lock (id) VALUES (1)",
                                  NULL, deadline, errstr, errstr_size);
    snprintf(sql, sizeof(sql),
             "UPDATE dedupd_migrate_lock SET holder = %s, lease_until = NOW(6) + INTERVAL %d "
             "SECOND WHERE id = 1 AND (holder IS NULL OR lease_until < NOW(6) OR holder = %s)",
             holder, DD_MIGRATE_LOCK_LEASE_S, holder);
    while (!rc) {
        rc = dd_migrate_lock_exec(db, sql, &got, deadline, errstr, errstr_size);
        if (rc || got == 1) break;
        if (dd_now_ms() > deadline) {
            dd_errstr_set(errstr, errstr_size,
                          "another dedupd migrate held the migration lock (dedupd_migrate_lock) "
                          "for more than %d s",
                          DD_MIGRATE_LOCK_WAIT_S);
            return DD_ERR_RETRIABLE;
        }
        if (!told++)
            dd_log(DD_LOG_INFO, "dedupd migrate: another migrate holds the lock; waiting.");
        dd_sleep_ms(DD_MIGRATE_LOCK_POLL_MS, NULL);
    }
    return rc;
}

void dd_migrate_lock_give(MYSQL *db, const char *who)
{
    char sql[700], holder[270], err[256];

    dd_migrate_lock_quote(db, who, holder, sizeof(holder));
    snprintf(sql, sizeof(sql),
             "UPDATE dedupd_migrate_lock SET holder = NULL, lease_until = NULL WHERE id = 1 AND "
             "holder = %s",
             holder);
    if (dd_migrate_lock_exec(db, sql, NULL, dd_now_ms() + 10000, err, sizeof(err)))
        dd_log(DD_LOG_WARN, "dedupd migrate: %s (the lock expires on its own)", err);
}
