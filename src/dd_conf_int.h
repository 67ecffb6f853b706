/*
 * Inside the configuration module (see dd_conf.h), shared by its files
 * only:
 *   dd_conf_schema.c  the schema table: every setting, described once
 *   dd_conf.c         the loader: file, defaults, environment, errors
 *   dd_conf_check.c   the checks that need the final values of several
 *   dd_conf_doc.c     the references rendered from the table
 *   dd_conf_kafka.c   librdkafka properties
 *   dd_conf_tls.c     the mysql.tls settings: names and rules
 *   dd_conf_route.c   the routes: the default one, or those of `routes`
 *   dd_conf_shard.c   the database shards: the mysql group, or mysql.shards
 */
#ifndef DD_CONF_INT_H
#define DD_CONF_INT_H

#include <stddef.h>
#include <stdint.h>

#include <libconfig.h>

#include "dd_conf.h"

typedef enum {
    DD_CT_GROUP,
    DD_CT_STRING,
    DD_CT_INT,
    DD_CT_BOOL,
    DD_CT_DURATION,
    DD_CT_LIST,   /* list of strings */
    DD_CT_ENUM,   /* a string from a fixed set, stored as an int */
    DD_CT_ROUTES, /* `routes`: a list of groups, each a route (dd_conf_route.c) */
    DD_CT_SHARDS, /* mysql.shards: a list of groups, each a database (dd_conf_shard.c) */
} dd_conf_type_t;

#define DD_CF_REQUIRED 0x01   /* no default: the file or the environment must set it */
#define DD_CF_ANY 0x02        /* group owned by someone else (the handler): not checked */
#define DD_CF_NOENV 0x04      /* no DEDUPD_* override */
#define DD_CF_SECRET 0x08     /* value never appears in messages */
#define DD_CF_EMPTY_OK 0x10   /* an empty string is a valid value */
#define DD_CF_ROUTE_REQ 0x20  /* required in each element of `routes` */
#define DD_CF_ROUTE_ONLY 0x40 /* only in an element of `routes` (routes[].name) */

#define DD_MS_SEC INT64_C(1000)
#define DD_MS_MIN (60 * DD_MS_SEC)
#define DD_MS_HOUR (60 * DD_MS_MIN)
#define DD_MS_DAY (24 * DD_MS_HOUR)

#define DD_CONF_MAX_ITEMS 96
#define DD_CONF_SECRET_MAX 4096 /* longest password file accepted */

/* Where the current value of one setting came from. DD_ORIGIN_ENV_UNSET:
 * an empty environment variable put the setting back to its default (or
 * to none), whatever the file says. */
typedef enum {
    DD_ORIGIN_UNSET,
    DD_ORIGIN_DEFAULT,
    DD_ORIGIN_FILE,
    DD_ORIGIN_ENV,
    DD_ORIGIN_ENV_UNSET
} dd_origin_kind_t;

typedef struct dd_conf_origin_s {
    dd_origin_kind_t kind;
    const config_setting_t *setting; /* DD_ORIGIN_FILE */
    char env[80];                    /* DD_ORIGIN_ENV(_UNSET): the variable's name */
} dd_conf_origin_t;

/* State of one dd_conf_load() call. While an element of `routes` is
 * loaded, route points at it: the settings of the schema's items with a
 * route path are read from the element and stored in the route, and
 * messages name the route ("route coupons: setting key: ..."). */
typedef struct dd_conf_ctx_s {
    dd_conf_t *conf;
    dd_conf_origin_t origin[DD_CONF_MAX_ITEMS];
    dd_conf_route_t *route;                           /* the element being loaded, or NULL */
    const config_setting_t *route_setting;            /* its group */
    char route_label[96];                             /* "route coupons", or "route #2" */
    dd_conf_origin_t route_origin[DD_CONF_MAX_ITEMS]; /* the element's settings */
    /* While an element of mysql.shards is loaded (route is NULL then), the
     * shard it goes to: its settings are read from the element (in
     * route_setting, labelled in route_label, origins in route_origin). */
    dd_conf_mysql_t *shard;
    int in_shards;     /* walking the elements of mysql.shards */
    int shard_pw_kept; /* the shard sets no password source: it has the group's, resolved */
    char *errstr;
    size_t errstr_size;
} dd_conf_ctx_t;

/* Validation that runs after all values are known. Returns 0 or DD_ERR_*. */
typedef int (*dd_conf_check_t)(dd_conf_ctx_t *ctx, int idx);

typedef struct dd_conf_item_s {
    const char *path; /* "kafka.brokers"; top-level settings have no dot */
    dd_conf_type_t type;
    const char *def;                /* default, as environment text; NULL: unset */
    int64_t min, max;               /* int: value; duration: ms; list: element count */
    int flags;                      /* DD_CF_* */
    size_t off;                     /* where the value lives in dd_conf_t */
    size_t size;                    /* size of that field; 0: not stored (plain groups) */
    size_t cnt_off;                 /* lists: the int element count */
    int64_t unit_ms;                /* durations: 1 stores ms, 1000 stores seconds */
    int (*parse)(const char *name); /* enums: name -> value, -1 if unknown */
    const char *allowed;            /* text for the reference when bounds do not say it */
    dd_conf_check_t check;
    const char *desc;
    /* A setting each route has: its path inside an element of `routes`
     * ("key" for dedup.key), where the value lives in dd_conf_route_t,
     * and, when it says more than the top-level one's, its description
     * there. NULL: a setting of the whole process. */
    const char *route;
    size_t route_off;
    size_t route_cnt_off; /* lists */
    const char *route_desc;
} dd_conf_item_t;

/* The schema (dd_conf_schema.c). Groups come before their members; the
 * order is the order of the references and of validation. */
extern const dd_conf_item_t dd_conf_items[];
extern const int dd_conf_item_cnt;

/* dd_conf_schema.c */
int dd_conf_item_idx(const char *path);
/* The item whose path inside a route is rpath ("handler.path"), or -1. */
int dd_conf_route_item_idx(const char *rpath);
void *dd_conf_field(dd_conf_t *conf, const dd_conf_item_t *it);
/* Where the value of item it goes in this load: in the route being
 * loaded, or in the configuration; and a list's element count. */
void *dd_conf_slot(dd_conf_ctx_t *ctx, const dd_conf_item_t *it);
int *dd_conf_slot_cnt(dd_conf_ctx_t *ctx, const dd_conf_item_t *it);
/* The origin of item idx's current value in this load. */
dd_conf_origin_t *dd_conf_origin(dd_conf_ctx_t *ctx, int idx);
/* "kafka.brokers" -> "DEDUPD_KAFKA_BROKERS". */
void dd_conf_env_name(const dd_conf_item_t *it, char *out, size_t out_size);
int dd_conf_has_env(const dd_conf_item_t *it);
/* Formats ms in the largest unit that divides it: "7d", "30s", "250ms". */
void dd_conf_fmt_duration(int64_t ms, char *out, size_t out_size);
/* A decimal integer, the whole of s. Returns 0 or -1. */
int dd_conf_parse_int(const char *s, int64_t *v);

/* dd_conf.c: values, and the load's errors and warnings */
/* Rejects unknown settings under group (see dd_conf.c); route: the label
 * of the element of `routes` being walked, or NULL at the top level. */
int dd_conf_walk(dd_conf_ctx_t *ctx, const config_setting_t *group, const char *prefix,
                 const char *route);
/* Default, then the file (the element being loaded, or the file's root),
 * then, at the top level, the environment, for item idx. */
int dd_conf_apply(dd_conf_ctx_t *ctx, int idx);
/* "FILE" of a setting as users should see it (an @include'd file's name
 * is relative to the configuration's directory). */
void dd_conf_file_name(const dd_conf_t *conf, const char *file, char *out, size_t out_size);
/* "FILE:LINE" of setting s (of its element at, when given). */
void dd_conf_setting_where(const dd_conf_t *conf, const config_setting_t *s,
                           const config_setting_t *at, char *out, size_t out_size);
/* Frees *s (wiped first when secret) and sets it to NULL. */
void dd_conf_free_str(char **s, int secret);
/* Frees the strings and lists of the items with a route path in route. */
void dd_conf_route_free_values(dd_conf_route_t *route);
/* path, absolute, or relative to the configuration file's directory
 * (malloc'd; NULL when out of memory). */
char *dd_conf_resolve(const dd_conf_t *conf, const char *path);
/* Sets errstr to "<where>: <msg>" for setting idx, where <where> follows
 * the origin of its current value: FILE:LINE, the environment variable,
 * or the file alone for defaults; `at` narrows a file location to a list
 * element. Returns DD_ERR_CONFIG. */
int dd_conf_fail(dd_conf_ctx_t *ctx, int idx, const config_setting_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Keeps "<where>: <msg>" in conf->warnings: what is allowed but probably
 * wrong, for the caller to report once logging is set up (dd_validate).
 * Returns 0 or DD_ERR_NOMEM. */
int dd_conf_warn(dd_conf_ctx_t *ctx, int idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets errstr to "FILE: out of memory"; returns DD_ERR_NOMEM. */
int dd_conf_nomem(dd_conf_ctx_t *ctx);
/* 1 when the file or the environment set setting idx. */
int dd_conf_is_explicit(dd_conf_ctx_t *ctx, int idx);
/* The name of the setting at path ("dedup.key") as a message in this load
 * names it: the path, or its path inside the route being loaded. */
const char *dd_conf_name(dd_conf_ctx_t *ctx, const char *path, char *out, size_t out_size);
/* The settings being loaded: the route's, or the top level's. */
dd_conf_dedup_t *dd_conf_cur_dedup(dd_conf_ctx_t *ctx);
dd_conf_handler_t *dd_conf_cur_handler(dd_conf_ctx_t *ctx);
dd_conf_mysql_t *dd_conf_cur_mysql(dd_conf_ctx_t *ctx);
/* 1 while an element of `routes` or of mysql.shards is loaded. */
int dd_conf_in_elem(const dd_conf_ctx_t *ctx);

/* dd_conf_check.c: the table's check hooks */
int dd_conf_check_properties(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_password(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_key(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_table(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_handler_path(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_inflight(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_backoff(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_listen(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_lane_key(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_topics(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_route_name(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_shard_key(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_shard_map(dd_conf_ctx_t *ctx, int idx);

/* dd_conf_route.c: the routes (dd_conf_t.routes), after the top level */
/* 1 when the file has `routes`. */
int dd_conf_has_routes(const dd_conf_t *conf);
/* Walks the elements of `routes` (dd_conf_walk for each). */
int dd_conf_routes_walk(dd_conf_ctx_t *ctx, const config_setting_t *routes);
/* Refuses a top-level route setting (kafka.topics, dedup.*, handler.*,
 * dlq.*) set in the file or the environment beside `routes`. */
int dd_conf_routes_refuse(dd_conf_ctx_t *ctx, int idx);
/* Builds conf->routes: the default route, or every element of `routes`,
 * each checked on its own and then against the others. */
int dd_conf_routes_load(dd_conf_ctx_t *ctx);
/* Frees conf->routes. */
void dd_conf_routes_free(dd_conf_t *conf);

/* dd_conf_shard.c: the database shards (dd_conf_t.shards), after the
 * top level */
/* The item of the mysql group whose path inside an element of
 * mysql.shards is spath ("tls.mode"), or -1. */
int dd_conf_shard_item_idx(const char *spath);
/* 1 when item it is a connection setting an element of mysql.shards has. */
int dd_conf_is_shard_item(const dd_conf_item_t *it);
/* Walks the elements of mysql.shards (dd_conf_walk for each). */
int dd_conf_shards_walk(dd_conf_ctx_t *ctx, const config_setting_t *shards);
/* Builds conf->shards: a copy of the mysql group's values, or every
 * element of mysql.shards over them, each checked. */
int dd_conf_shards_load(dd_conf_ctx_t *ctx);
/* The number of shards the file names (for checks that run before
 * dd_conf_shards_load). */
int dd_conf_shard_count(const dd_conf_t *conf);
/* Frees conf->shards. */
void dd_conf_shards_free(dd_conf_t *conf);
/* Frees the strings of one database's settings. */
void dd_conf_mysql_free(dd_conf_mysql_t *my);

/* dd_conf_tls.c: the mysql.tls rules */
int dd_conf_check_tls(dd_conf_ctx_t *ctx, int idx);

#endif /* DD_CONF_INT_H */
