/*
 * One `dedupd migrate` at a time per database, across the nodes of a
 * cluster. GET_LOCK() locks only the server it runs on, and a row lock
 * taken with SELECT ... FOR UPDATE is local to a Galera node too (only
 * writes are certified), and either would be dropped by the first DDL,
 * which commits implicitly. So the lock is a committed row: the single row
 * of dedupd_migrate_lock names its holder and the end of its lease, and
 * taking it is an UPDATE that only matches when the row is free or its
 * lease ran out. That write replicates; when two nodes take it at once,
 * certification lets one commit and fails the other (1213), which then
 * finds the row held and waits. A migrate that dies holds the lock until
 * its lease ends (DD_MIGRATE_LOCK_LEASE_S).
 */
#ifndef DD_MIGRATE_LOCK_H
#define DD_MIGRATE_LOCK_H

#include <stddef.h>

#include <mysql.h>

#define DD_MIGRATE_LOCK_LEASE_S 120 /* held at most this long by a dead migrate */
#define DD_MIGRATE_LOCK_WAIT_S 300  /* waited at most this long for another */

/* Creates the table if needed and takes the lock for `who` (the instance
 * name), waiting while another holds it. Returns 0, or a negative dd_err_t
 * (RETRIABLE after DD_MIGRATE_LOCK_WAIT_S) with errstr. */
int dd_migrate_lock_take(MYSQL *db, const char *who, char *errstr, size_t errstr_size);
/* Gives the lock back (best effort: a lost connection leaves it to expire). */
void dd_migrate_lock_give(MYSQL *db, const char *who);

/* 1 when err is a certification failure or deadlock (1213) or a lock wait
 * timeout (1205): the statement or transaction may simply run again. */
int dd_migrate_lock_conflict(unsigned int err);

#endif /* DD_MIGRATE_LOCK_H */
