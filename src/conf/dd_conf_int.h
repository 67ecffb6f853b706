/*
 * Inside the configuration module (see dd_conf.h), shared by its files
 * only:
 *   dd_conf_schema.c  the schema table: every setting, described once
 *   dd_conf_ctx.c     the load's errors and warnings, small helpers
 *   dd_conf_value.c   one setting's value: default, file, environment
 *   dd_conf.c         the loader: reads the file, drives the parts below
 *   dd_conf_check.c   the checks that need the final values of several
 *   dd_conf_doc.c     the references rendered from the table
 *   dd_conf_kafka.c   librdkafka properties
 *   dd_conf_tls.c     the mysql.tls settings: names and rules
 *   dd_conf_list.c    lists of groups laid over the top-level settings
 *   dd_conf_route.c   the routes: the default one, or those of `routes`
 *   dd_conf_shard.c   the database shards: the mysql group, or mysql.shards
 */
#ifndef DD_CONF_INT_H
#define DD_CONF_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
    DD_CT_GROUPS, /* a list of groups over the top-level settings (dd_conf_list.c) */
} dd_conf_type_t;

#define DD_CF_REQUIRED 0x01   /* no default: the file or the environment must set it */
#define DD_CF_ANY 0x02        /* group owned by someone else (the handler): not checked */
#define DD_CF_NOENV 0x04      /* no DEDUPD_* override */
#define DD_CF_SECRET 0x08     /* value never appears in messages */
#define DD_CF_EMPTY_OK 0x10   /* an empty string is a valid value */
#define DD_CF_ROUTE_REQ 0x20  /* required in each element of `routes` */
#define DD_CF_ROUTE_ONLY 0x40 /* only in an element of `routes` (routes[].name) */

/* dd_conf_item_t.per: the list of groups whose elements have the setting
 * too (one bit per list, dd_conf_list_t.per). */
#define DD_PER_ROUTE 0x01 /* each element of `routes` */
#define DD_PER_SHARD 0x02 /* each element of mysql.shards */
#define DD_CONF_LIST_MAX 2
#define DD_CONF_WHERE_MAX 300 /* dd_conf_route_t.where, dd_conf_mysql_t.where */

#define DD_MS_SEC INT64_C(1000)
#define DD_MS_MIN (60 * DD_MS_SEC)
#define DD_MS_HOUR (60 * DD_MS_MIN)
#define DD_MS_DAY (24 * DD_MS_HOUR)

#define DD_CONF_MAX_ITEMS 128
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

typedef struct dd_conf_list_s dd_conf_list_t;

/* State of one dd_conf_load() call. While an element of a list of groups
 * is loaded (dd_conf_list.c), list and elem say which: the settings of the
 * list's items are read from the element and stored in it, and messages
 * name the element ("route coupons: setting key: ..."). At the top level
 * the list's items are stored in top[list id], which becomes the list's
 * one element when the file has no such list. */
typedef struct dd_conf_ctx_s {
    dd_conf_t *conf;
    dd_conf_origin_t origin[DD_CONF_MAX_ITEMS];
    const dd_conf_list_t *list;                      /* of the element being loaded, or NULL */
    void *elem;                                      /* the element being loaded */
    const config_setting_t *elem_setting;            /* its group */
    char elem_label[96];                             /* "route coupons", "route #2", "shard 1" */
    dd_conf_origin_t elem_origin[DD_CONF_MAX_ITEMS]; /* the element's settings */
    const dd_conf_list_t *walking;                   /* dd_conf_walk is in an element of it */
    void *top[DD_CONF_LIST_MAX];                     /* each list's top-level values */
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
    /* a setting that may stand instead of the required one at this path
     * (handler.sql instead of handler.path): the required one is then
     * met, and the two may not both be set */
    const char *replaces;
    dd_conf_check_t check;
    const char *desc;
    /* A setting each element of a list of groups has (per: DD_PER_*):
     * its path inside an element ("key" for dedup.key), where the value
     * lives in the element's struct, and, when it says more than the
     * top-level one's, its description there. per 0: a setting of the
     * whole process, stored in dd_conf_t at off. */
    int per;
    const char *elem;
    size_t elem_off;
    size_t elem_cnt_off; /* lists */
    const char *elem_desc;
    const dd_conf_list_t *list; /* DD_CT_GROUPS: how its elements are loaded */
} dd_conf_item_t;

/* A list of groups laid over the top-level settings (dd_conf_list.c):
 * `routes` and mysql.shards register one each. Its items are those whose
 * per has the list's bit; the top-level values of those items are the
 * list's one element when the file does not have the list. */
struct dd_conf_list_s {
    int id;                 /* index of ctx->top */
    int per;                /* DD_PER_* */
    const char *path;       /* "routes" */
    const char *noun;       /* "routes", for "has 40 routes, at most 32" */
    const char *shape;      /* the list as the file writes it, for messages */
    const char *elem_shape; /* one element */
    size_t elem_size;
    size_t where_off;        /* char[DD_CONF_WHERE_MAX] "FILE:LINE" of the element in its struct */
    size_t arr_off, cnt_off; /* the array and its count in dd_conf_t */
    int inherit;             /* an element starts from the top-level values, not defaults */
    /* Beside the list, checks a top-level item, refusing it when set
     * (NULL: the top-level values are the elements' defaults). */
    int (*refuse)(dd_conf_ctx_t *ctx, int idx);
    void (*label)(const config_setting_t *elem, int n, char *out, size_t out_size);
    /* Before an element's values are read (may be NULL). */
    int (*begin)(dd_conf_ctx_t *ctx, const config_setting_t *elem, void *e);
    /* After an element is loaded and checked (may be NULL). */
    int (*finish)(dd_conf_ctx_t *ctx, void *e);
    /* The one element of the top-level values, without the list (may be NULL). */
    int (*single)(dd_conf_ctx_t *ctx, void *e);
    /* All elements loaded: checks of the elements against each other. */
    int (*whole)(dd_conf_ctx_t *ctx);
    /* Frees what the element holds beside its items' values (may be NULL). */
    void (*release)(void *e);
};

/* dd_conf_route.c, dd_conf_shard.c */
extern const dd_conf_list_t dd_conf_route_list;
extern const dd_conf_list_t dd_conf_shard_list;

/* The schema (dd_conf_schema.c). Groups come before their members; the
 * order is the order of the references and of validation. */
extern const dd_conf_item_t dd_conf_items[];
extern const int dd_conf_item_cnt;

/* dd_conf_schema.c */
int dd_conf_item_idx(const char *path);
/* The list of groups item it belongs to (its per), or NULL. */
const dd_conf_list_t *dd_conf_list_of(const dd_conf_item_t *it);
/* Where item it's value lives in element e of its list. */
void *dd_conf_elem_field(void *e, const dd_conf_item_t *it);
void *dd_conf_field(dd_conf_t *conf, const dd_conf_item_t *it);
/* Where the value of item it goes in this load: in the element being
 * loaded, in its list's top-level values (ctx->top), or in the
 * configuration; and a list's element count. */
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

/* dd_conf_value.c: values */
/* Default, then the file (the element being loaded, or the file's root),
 * then, at the top level, the environment, for item idx. */
int dd_conf_apply(dd_conf_ctx_t *ctx, int idx);

/* dd_conf_ctx.c: the load's errors and warnings, small helpers */
/* "FILE" of a setting as users should see it (an @include'd file's name
 * is relative to the configuration's directory). */
void dd_conf_file_name(const dd_conf_t *conf, const char *file, char *out, size_t out_size);
/* "FILE:LINE" of setting s (of its element at, when given). */
void dd_conf_setting_where(const dd_conf_t *conf, const config_setting_t *s,
                           const config_setting_t *at, char *out, size_t out_size);
/* Frees *s (wiped first when secret) and sets it to NULL. */
void dd_conf_free_str(char **s, int secret);
/* Frees a list of strings and zeroes it. */
void dd_conf_free_list(char ***list, int *cnt);
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
/* 1 when required setting idx is missing: neither it nor a setting that
 * replaces it (dd_conf_item_t.replaces) was set. */
int dd_conf_is_missing(dd_conf_ctx_t *ctx, int idx);
/* "missing required setting NAME" with what may stand instead of it
 * ("handler.path (or handler.sql, handler.http)"), into out. */
void dd_conf_missing_text(const dd_conf_item_t *it, int in_elem, char *out, size_t out_size);
/* The name of the setting at path ("dedup.key") as a message in this load
 * names it: the path, or its path inside the element being loaded. */
const char *dd_conf_name(dd_conf_ctx_t *ctx, const char *path, char *out, size_t out_size);
/* The settings being loaded: the route's, or the top level's. */
dd_conf_dedup_t *dd_conf_cur_dedup(dd_conf_ctx_t *ctx);
dd_conf_handler_t *dd_conf_cur_handler(dd_conf_ctx_t *ctx);
dd_conf_mysql_t *dd_conf_cur_mysql(dd_conf_ctx_t *ctx);
/* The element of `routes` being loaded, or NULL. */
dd_conf_route_t *dd_conf_cur_route(dd_conf_ctx_t *ctx);
/* 1 while an element of a list of groups is loaded. */
int dd_conf_in_elem(const dd_conf_ctx_t *ctx);

/* dd_conf_check.c: the table's check hooks */
int dd_conf_check_properties(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_password(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_key(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_table(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_handler_path(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_handler_grants(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_inflight(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_backoff(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_listen(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_lane_key(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_topics(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_dlq_topic(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_route_name(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_shard_key(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_shard_map(dd_conf_ctx_t *ctx, int idx);

/* dd_conf_list.c: lists of groups over the top-level settings */
/* The item of list whose path inside an element is epath, or -1. */
int dd_conf_list_item_idx(const dd_conf_list_t *list, const char *epath);
/* The list's setting in the file, or NULL. */
const config_setting_t *dd_conf_list_setting(const dd_conf_t *conf, const dd_conf_list_t *list);
/* The number of elements the file gives the list: 1 without it. */
int dd_conf_list_count(const dd_conf_t *conf, const dd_conf_list_t *list);
/* "FILE:LINE" of a group: of its first setting, the line it starts on
 * (libconfig records a group's line where it ends); the file alone for
 * NULL. */
void dd_conf_group_where(const dd_conf_t *conf, const config_setting_t *g, char *out,
                         size_t out_size);
/* Rejects unknown settings under group (see dd_conf_list.c); route: the label
 * of the element of a list being walked (ctx->walking), or NULL at the
 * top level. */
int dd_conf_walk(dd_conf_ctx_t *ctx, const config_setting_t *group, const char *prefix,
                 const char *route);
/* Walks the elements of list item idx's setting s (dd_conf_walk for each). */
int dd_conf_list_walk(dd_conf_ctx_t *ctx, int idx, const config_setting_t *s);
/* Sets up ctx->top for every list, before the top-level values. */
int dd_conf_lists_init(dd_conf_ctx_t *ctx);
/* Refuses the top-level item idx beside its list, for lists that do. */
int dd_conf_lists_refuse(dd_conf_ctx_t *ctx, int idx);
/* 1 when item idx is an item of a list the file has and that refuses it
 * at the top level. */
int dd_conf_list_hides(const dd_conf_t *conf, int idx);
/* Builds the list's array in conf: the top-level values, or every element
 * over them (inherit) or over the defaults, each checked. */
int dd_conf_list_load(dd_conf_ctx_t *ctx, const dd_conf_list_t *list);
/* Frees ctx->top. */
void dd_conf_lists_release(dd_conf_ctx_t *ctx);
/* Frees the array of every list in conf. */
void dd_conf_lists_free(dd_conf_t *conf);

/* dd_conf_route.c: the routes (dd_conf_t.routes) */
/* 1 when the file has `routes`. */
int dd_conf_has_routes(const dd_conf_t *conf);

/* dd_conf_shard.c: the database shards (dd_conf_t.shards) */
/* The number of shards the file names (for checks that run before
 * the shards are loaded). */
int dd_conf_shard_count(const dd_conf_t *conf);

/* dd_conf_check.c: a secret file (at most DD_CONF_SECRET_MAX bytes, trailing
 * newline removed) into *out; *mode: the file's permission bits. */
int dd_conf_read_secret(const char *path, char **out, mode_t *mode, char *errstr,
                        size_t errstr_size);

/* dd_conf_registry.c: dedup.format and the schema_registry settings */
int dd_conf_check_format(dd_conf_ctx_t *ctx, int idx);
int dd_conf_check_registry(dd_conf_ctx_t *ctx, int idx);

/* dd_conf_tls.c: the mysql.tls rules */
int dd_conf_check_tls(dd_conf_ctx_t *ctx, int idx);

#endif /* DD_CONF_INT_H */
