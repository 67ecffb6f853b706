/*
 * The transactions dedupd opens itself, kept whole.
 *
 * A server may end a transaction without the statement that ran in it
 * failing: a Galera node rolls back a local transaction that a replicated
 * write conflicts with (a brute-force abort), and a statement running at
 * that moment can still report success. The statements after it would then
 * run outside the transaction and, under autocommit, commit on their own:
 * dedup rows recorded as applied while the business writes were rolled
 * back. Two things keep that from happening:
 *
 *  - dedupd's transactions run with autocommit off (dd_db_txn_begin and
 *    the SQL of DD_DB_TXN_BEGIN), so a statement after a lost transaction
 *    opens a new one that nothing ever commits: dedupd's COMMIT releases
 *    its own savepoint first, which the new transaction does not have;
 *  - after each of dedupd's own statements in a transaction,
 *    dd_db_txn_check() reads the in-transaction flag the server sends with
 *    every reply: a transaction that vanished is a retriable error (roll
 *    back, replay the batch), not a handler's doing.
 *
 * DEDUPD_TEST_FAULTS=txn_drop=N drops transactions (a ROLLBACK behind
 * dedupd's back) after their Nth, ... second, first check in turn, so the
 * tests cover every place; the three after a drop run clean.
 */
#ifndef DD_DB_TXN_H
#define DD_DB_TXN_H

#include <stddef.h>

#include <mysql.h>

#include "dd_db.h"

/* The SQL that opens a transaction and ends one; a statement after the
 * COMMIT or ROLLBACK in the same query puts autocommit back on. */
#define DD_DB_TXN_BEGIN "SET autocommit = 0; START TRANSACTION"
#define DD_DB_TXN_AUTOCOMMIT "SET autocommit = 1"

/* Opens a transaction (DD_DB_TXN_BEGIN). Returns 0 or the class of the
 * error. */
int dd_db_txn_begin(dd_db_t *db, char *errstr, size_t errstr_size);
/* COMMIT, then autocommit back on. 0 or the class of the error. */
int dd_db_txn_commit(dd_db_t *db, char *errstr, size_t errstr_size);
/* ROLLBACK and autocommit back on, ignoring errors (the connection may be
 * gone; a new connection starts with autocommit on). */
void dd_db_txn_rollback_raw(MYSQL *mysql);
/* ROLLBACK and autocommit back on, ignoring errors (the connection may be
 * gone). */
void dd_db_txn_rollback_quiet(dd_db_t *db);

/* After one of dedupd's own statements in a transaction (what names it):
 * 0 while the transaction is open, else DD_ERR_RETRIABLE with an error
 * saying the server ended it. Call it only once the statement's results
 * are read: the flag comes with the last reply. */
int dd_db_txn_check(dd_db_t *db, const char *what, char *errstr, size_t errstr_size);
int dd_db_txn_check_raw(MYSQL *mysql, const char *what, char *errstr, size_t errstr_size);

/* dd_db_txn_check_raw() right after START TRANSACTION: the check that
 * opens a transaction's count of them. */
int dd_db_txn_started_raw(MYSQL *mysql, char *errstr, size_t errstr_size);

/* A transaction that ended under a handler (rc, DD_ERR_FATAL, its error in
 * errstr) on a Galera node that aborted a local transaction meanwhile: the
 * server may have ended it while one of the handler's statements ran, with
 * that statement reporting success, as it does for dedupd's. Then
 * DD_ERR_RETRIABLE, errstr saying so; else rc. */
int dd_db_txn_handler_or_cluster(dd_db_t *db, int rc, char *errstr, size_t errstr_size);

/* 1 while the last reply on mysql said a transaction was open. */
int dd_db_txn_open(MYSQL *mysql);

#endif /* DD_DB_TXN_H */
