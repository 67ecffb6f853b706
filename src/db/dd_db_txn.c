/*
 * Keeping dedupd's transactions whole (see dd_db_txn.h): autocommit off
 * while one is open, and the server's in-transaction flag read after each
 * of dedupd's own statements, so a transaction the server ended on its own
 * is replayed and nothing after it commits.
 */
#include "dd_db_txn.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"
#include "dd_log.h"

/* For DEDUPD_TEST_FAULTS=txn_drop, per thread: the drops so far, the
 * transactions still to run clean after the last one, whether the current
 * one may be dropped, and its checks so far. */
static _Thread_local unsigned long dd_db_txn_drops, dd_db_txn_at;
static _Thread_local int dd_db_txn_clean, dd_db_txn_armed;

int dd_db_txn_begin(dd_db_t *db, char *errstr, size_t errstr_size)
{
    int rc = dd_db_exec_raw(dd_db_mysql(db), DD_DB_TXN_BEGIN, errstr, errstr_size);

    return rc ? rc : dd_db_txn_started_raw(dd_db_mysql(db), errstr, errstr_size);
}

int dd_db_txn_commit(dd_db_t *db, char *errstr, size_t errstr_size)
{
    return dd_db_exec_raw(dd_db_mysql(db), "COMMIT; " DD_DB_TXN_AUTOCOMMIT, errstr, errstr_size);
}

void dd_db_txn_rollback_raw(MYSQL *mysql)
{
    char err[256];

    if (mysql && dd_db_exec_raw(mysql, "ROLLBACK; " DD_DB_TXN_AUTOCOMMIT, err, sizeof(err)))
        dd_log(DD_LOG_DEBUG, "ROLLBACK failed: %s", err);
}

void dd_db_txn_rollback_quiet(dd_db_t *db)
{
    dd_db_txn_rollback_raw(dd_db_mysql(db));
}

int dd_db_txn_open(MYSQL *mysql)
{
    unsigned int st = 0;

    if (!mysql || mariadb_get_infov(mysql, MARIADB_CONNECTION_SERVER_STATUS, &st) != 0) return 0;
    return (st & SERVER_STATUS_IN_TRANS) != 0;
}

/* Test fault: a transaction is rolled back behind the caller's back, as a
 * cluster's abort would do it, after its Nth, ... second, first check in
 * turn (a transaction with fewer lets the drop wait for the next). The three transactions after a
 * drop run clean, so that a replay gets through even when it takes three (handle_batch() declined,
 * then savepoints). */
static void dd_db_txn_fault(MYSQL *mysql, const char *what)
{
    unsigned long every = dd_test_fault("txn_drop");

    if (!every || !dd_db_txn_armed || ++dd_db_txn_at != every - dd_db_txn_drops % every) return;
    dd_db_txn_armed = 0;
    dd_db_txn_drops++;
    dd_db_txn_clean = 3;
    if (mysql_real_query(mysql, "ROLLBACK", 8) != 0) return;
    dd_log(DD_LOG_WARN,
           "DEDUPD_TEST_FAULTS: dropped the transaction after %s (test fault injection).", what);
}

int dd_db_txn_started_raw(MYSQL *mysql, char *errstr, size_t errstr_size)
{
    dd_db_txn_armed = dd_db_txn_clean == 0;
    if (dd_db_txn_clean > 0) dd_db_txn_clean--;
    dd_db_txn_at = 0;
    return dd_db_txn_check_raw(mysql, "START TRANSACTION", errstr, errstr_size);
}

int dd_db_txn_check_raw(MYSQL *mysql, const char *what, char *errstr, size_t errstr_size)
{
    if (!mysql) {
        dd_errstr_set(errstr, errstr_size, "2006: not connected (after %s)", what);
        return DD_ERR_RETRIABLE;
    }
    dd_db_txn_fault(mysql, what);
    if (dd_db_txn_open(mysql)) return DD_OK;
    dd_errstr_set(errstr, errstr_size,
                  "the server ended the transaction during %s though the statement succeeded "
                  "(a cluster's abort for a conflicting write, or a KILL): nothing after it ran "
                  "in the transaction, which is rolled back",
                  what);
    return DD_ERR_RETRIABLE;
}

int dd_db_txn_check(dd_db_t *db, const char *what, char *errstr, size_t errstr_size)
{
    return dd_db_txn_check_raw(dd_db_mysql(db), what, errstr, errstr_size);
}

int dd_db_txn_handler_or_cluster(dd_db_t *db, int rc, char *errstr, size_t errstr_size)
{
    char was[700];

    if (rc != DD_ERR_FATAL || !dd_db_cluster_aborted(db)) return rc;
    snprintf(was, sizeof(was), "%s", errstr ? errstr : "");
    dd_errstr_set(errstr, errstr_size,
                  "the transaction ended under the handler while the cluster node aborted a "
                  "local transaction for a conflicting write: taken for that abort, not a "
                  "handler bug, and replayed (%.500s)",
                  was);
    return DD_ERR_RETRIABLE;
}
