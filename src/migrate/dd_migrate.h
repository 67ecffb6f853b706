/*
 * Schema migrations for the dedup table. The numbered files of sql/ are
 * embedded at build time; the applied version of each dedup table is kept in
 * dedupd_schema so `dedupd migrate` is idempotent and upgrades in order.
 *
 * The key format (DD_KEY_FORMAT, dd_key.h: how keys and request hashes are
 * rendered) is recorded on the dedup table itself, as its table comment
 * "dedupd key_format=N": the comment goes where the table goes (RENAME,
 * dump and restore, a copy in another database), which a row of
 * dedupd_schema keyed by the table's name would not. The rows of a table
 * hold keys of one format; a dedupd that renders another would see every
 * stored key as new. So run, replay and purge refuse a table whose recorded
 * format is not theirs, and migrate records the format on a table that has
 * none (created before formats were recorded: format 1) but never changes a
 * recorded one.
 */
#ifndef DD_MIGRATE_H
#define DD_MIGRATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mysql.h>

#include "dd_conf.h"

typedef struct {
    int version;
    const char *name;
    const char *sql; /* statements separated by ";\n", table name as {{table}} */
} dd_migration_t;

extern const dd_migration_t dd_migrations[];
extern const int dd_migration_cnt;

/* Brings `table` up to the newest version. Returns 0 or a negative dd_err_t;
 * DD_ERR_CONFIG, changing nothing, when the table exists, was never
 * migrated and has no biz_key column (someone else's table). */
int dd_migrate_run(MYSQL *db, const char *table, char *errstr, size_t errstr_size);

/* The version `table` is at (0: not created). Returns 0 or negative dd_err_t. */
int dd_migrate_version(MYSQL *db, const char *table, int *version, char *errstr,
                       size_t errstr_size);

/* The key format recorded on `table`: 0 when it records none, -1 when the
 * table does not exist. Returns 0 or a negative dd_err_t. */
int dd_migrate_key_format(MYSQL *db, const char *table, int *format, char *errstr,
                          size_t errstr_size);

/* 0 when `table` exists and records DD_KEY_FORMAT; otherwise DD_ERR_CONFIG
 * (or the database error) with errstr saying what to do. */
int dd_migrate_check_key_format(MYSQL *db, const char *table, char *errstr, size_t errstr_size);

/* The index (status, lease_until) that the compensation scan of external
 * mode finds stuck processing rows by. It is not part of the numbered
 * files: a table of a handler in local mode never holds such rows for
 * long, and would only pay for the index on every write. `dedupd migrate`
 * creates it when the handler is in external mode (create = 1); *exists
 * says whether it is there (afterwards). Returns 0 or a negative dd_err_t. */
int dd_migrate_processing_index(MYSQL *db, const char *table, int create, int *exists, char *errstr,
                                size_t errstr_size);

/* *rows: whether the table holds a row; 0 when it does not exist. */
int dd_migrate_table_has_rows(MYSQL *db, const char *table, int *rows, char *errstr,
                              size_t errstr_size);

/*
 * The shard layout a database records (table dedupd_shard_layout, one
 * row; dd_migrate_layout.c): everything that decides the shard of a key
 * stored there. Its place (which shard of how many it is) and, with
 * several shards, for each route's dedup table, the route's shard_by, its
 * shard key template as parsed, and the digest of its map (column
 * `routes`, a line "TABLE<TAB>SHARD_BY<TAB>MAP_SHA256<TAB>SHARD_KEY" per
 * table). `dedupd migrate` records it in every shard; run, check and
 * replay refuse a shard whose recorded layout is not the configuration's,
 * as its keys would then be looked for in another shard and claimed anew
 * (docs/SHARDS.md, "Changing the shard count"). `who` names the shard in
 * messages ("shard 1 (127.0.0.1:3307)").
 *
 * A layout recorded before routes were (no `routes` column, or NULL), or
 * one that has no line for a route's table yet, is taken as it is: the
 * next migrate records the configuration's lines, as no change.
 */

/* Longest shard key template the layout records (as parsed). */
#define DD_MIGRATE_SHARD_KEY_MAX 1024

/* What decides the shard of one route's keys. */
typedef struct {
    const char *route;    /* its name, for messages */
    const char *table;    /* its dedup table, which names the recorded line */
    const char *shard_by; /* "hash", "modulo" or "map" */
    /* the shard key template as parsed (dd_key_tmpl_text); "": the
     * business key (unset, or the key's own template) */
    char shard_key[DD_MIGRATE_SHARD_KEY_MAX];
    char map[65]; /* the digest of the map read at load; "" without one */
} dd_migrate_route_layout_t;

/* The layout a configuration gives one shard. */
typedef struct {
    int shard, shard_cnt;
    int route_cnt; /* 0 with one shard: nothing but the count decides */
    dd_migrate_route_layout_t route[DD_CONF_ROUTE_MAX];
} dd_migrate_layout_t;

/* The layout conf gives shard s. Returns 0, or DD_ERR_CONFIG when a shard
 * key template does not compile or is longer than the layout records. */
int dd_migrate_layout_of(const dd_conf_t *conf, int s, dd_migrate_layout_t *layout, char *errstr,
                         size_t errstr_size);

/* Creates the table (or adds its columns changed_at and routes) and
 * records layout unless a layout is recorded already, with changed_at =
 * now if has_rows (the dedup tables hold rows written under no recorded
 * layout), else NULL. A recorded layout that lacks a line of a route gets
 * it (no change). With relayout, a recorded layout that differs, or lacks
 * a route's line, is replaced, changed_at = now, and each difference (the
 * place; a route's shard_by, shard key or map; a route recorded for the
 * first time) is written to report as a line "WHO: ...", or "WHO: layout
 * ..., unchanged." when there is none. Then as
 * dd_migrate_layout_check(..., 1, ...). */
int dd_migrate_layout_record(MYSQL *db, const char *who, const dd_migrate_layout_t *layout,
                             int has_rows, int relayout, FILE *report, char *errstr,
                             size_t errstr_size);
/* When the recorded layout changed: *left_s, the seconds from now until
 * changed_at + ttl_s on the database's clock (negative when past), with
 * both times as text in changed and until; *left_s = -1 and empty texts
 * when no change is recorded (changed_at NULL or no layout).
 * DD_ERR_CONFIG when the table has no changed_at column (migrate adds it). */
int dd_migrate_layout_changed(MYSQL *db, int64_t ttl_s, int64_t *left_s, char *changed,
                              size_t changed_size, char *until, size_t until_size, char *errstr,
                              size_t errstr_size);
/* 0 when the recorded layout is layout; DD_ERR_CONFIG with errstr naming
 * what differs (the place, or a route's part, both values) when it is
 * another; when none is recorded (or the table cannot be read),
 * DD_ERR_CONFIG if required, else 0. *unknown (when not NULL): how many of
 * layout's routes it records nothing for (the next migrate records them). */
int dd_migrate_layout_check(MYSQL *db, const char *who, const dd_migrate_layout_t *layout,
                            int required, int *unknown, char *errstr, size_t errstr_size);

#endif /* DD_MIGRATE_H */
