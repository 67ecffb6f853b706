/*
 * Schema migrations for the dedup table. The numbered files of sql/ are
 * embedded at build time; the applied version of each dedup table is kept in
 * dedupd_schema so `dedupd migrate` is idempotent and upgrades in order.
 */
#ifndef DD_MIGRATE_H
#define DD_MIGRATE_H

#include <stddef.h>

#include <mysql.h>

typedef struct {
    int version;
    const char *name;
    const char *sql; /* statements separated by ";\n", table name as {{table}} */
} dd_migration_t;

extern const dd_migration_t dd_migrations[];
extern const int dd_migration_cnt;

/* Brings `table` up to the newest version. Returns 0 or a negative dd_err_t. */
int dd_migrate_run(MYSQL *db, const char *table, char *errstr, size_t errstr_size);

/* The version `table` is at (0: not created). Returns 0 or negative dd_err_t. */
int dd_migrate_version(MYSQL *db, const char *table, int *version, char *errstr,
                       size_t errstr_size);

#endif /* DD_MIGRATE_H */
