/*
 * Configuration loader (see dd_conf.h): the libconfig file, the defaults
 * and the DEDUPD_<SECTION>_<NAME> environment overrides, all through the
 * schema table (dd_conf_schema.c), so every setting is read, checked,
 * defaulted and freed the same way.
 *
 * Order of precedence: table default, then the file, then the environment;
 * the checks that involve several settings (dd_conf_check.c) run last, on
 * the final values. Every error names FILE:LINE (or the environment
 * variable). Secret values (the MySQL password, values of sensitive
 * librdkafka properties) never appear in any message.
 *
 * This file drives a load and calls down into the parts below it: the
 * list engine (dd_conf_list.c) walks the file and loads the lists of
 * groups, dd_conf_value.c stores each setting's value, dd_conf_ctx.c
 * builds the errors; none of them calls back into this file.
 */
#include "dd_conf_int.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dd_common.h"

/*
 * Loading
 */

/* 1 when item i is not a top-level setting of this configuration: it
 * belongs to an element of `routes`, or is a setting the elements of a
 * list the configuration has hold instead. */
static int dd_conf_not_here(const dd_conf_ctx_t *ctx, int i)
{
    const dd_conf_item_t *it = &dd_conf_items[i];

    return it->type == DD_CT_GROUPS || (it->flags & DD_CF_ROUTE_ONLY) ||
           dd_conf_list_hides(ctx->conf, i);
}

static int dd_conf_apply_all(dd_conf_ctx_t *ctx)
{
    int err;

    ctx->conf->has_routes = dd_conf_has_routes(ctx->conf);
    if ((err = dd_conf_lists_init(ctx))) return err;
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        if ((err = dd_conf_lists_refuse(ctx, i))) return err;
        if (!dd_conf_not_here(ctx, i) && (err = dd_conf_apply(ctx, i))) return err;
    }
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        if (dd_conf_not_here(ctx, i)) continue;
        if ((dd_conf_items[i].flags & DD_CF_REQUIRED) && dd_conf_is_missing(ctx, i)) {
            char what[256];
            dd_conf_missing_text(&dd_conf_items[i], 0, what, sizeof(what));
            dd_errstr_set(ctx->errstr, ctx->errstr_size, "%s: %s", ctx->conf->path, what);
            return DD_ERR_CONFIG;
        }
    }
    for (int i = 0; i < dd_conf_item_cnt; i++)
        if (!dd_conf_not_here(ctx, i) && dd_conf_items[i].check &&
            (err = dd_conf_items[i].check(ctx, i)))
            return err;
    return 0;
}

/* Sets path and dir, and parses the file into conf->lc. */
static int dd_conf_read(dd_conf_t *conf, const char *path, char *errstr, size_t errstr_size)
{
    char *copy = NULL, file[PATH_MAX];
    int err = DD_ERR_CONFIG;
    struct stat st;

    if (!(conf->path = strdup(path)) || !(copy = strdup(path)) ||
        !(conf->lc = malloc(sizeof(*conf->lc)))) {
        dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
        err = DD_ERR_NOMEM;
        goto done;
    }
    config_init(conf->lc);
    if (stat(path, &st) != 0) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot read: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot read: not a regular file", path);
        goto done;
    }
    if (!(conf->dir = realpath(dirname(copy), NULL))) {
        dd_errstr_set(errstr, errstr_size, "%s: cannot resolve its directory: %s", path,
                      strerror(errno));
        goto done;
    }
    config_set_include_dir(conf->lc, conf->dir);
    if (!config_read_file(conf->lc, path)) {
        dd_conf_file_name(conf, config_error_file(conf->lc), file, sizeof(file));
        dd_errstr_set(errstr, errstr_size, "%s:%d: %s", file, config_error_line(conf->lc),
                      config_error_text(conf->lc));
        goto done;
    }
    err = 0;
done:
    free(copy);
    return err;
}

int dd_conf_load(dd_conf_t **confp, const char *path, char *errstr, size_t errstr_size)
{
    dd_conf_ctx_t *ctx = NULL;
    dd_conf_t *conf = NULL;
    int err;

    *confp = NULL;
    if (!(conf = calloc(1, sizeof(*conf))) || !(ctx = calloc(1, sizeof(*ctx)))) {
        dd_errstr_set(errstr, errstr_size, "%s: out of memory", path);
        err = DD_ERR_NOMEM;
        goto done;
    }
    ctx->conf = conf;
    ctx->errstr = errstr;
    ctx->errstr_size = errstr_size;
    if ((err = dd_conf_read(conf, path, errstr, errstr_size))) goto done;
    if ((err = dd_conf_walk(ctx, config_root_setting(conf->lc), "", NULL))) goto done;
    if ((err = dd_conf_apply_all(ctx))) goto done;
    if ((err = dd_conf_list_load(ctx, &dd_conf_shard_list))) goto done;
    if ((err = dd_conf_list_load(ctx, &dd_conf_route_list))) goto done;
    *confp = conf;
    conf = NULL;
done:
    if (ctx) dd_conf_lists_release(ctx);
    free(ctx);
    dd_conf_destroy(conf);
    return err;
}

void dd_conf_destroy(dd_conf_t *conf)
{
    if (!conf) return;
    dd_conf_lists_free(conf);
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        if (it->per) continue; /* the lists' */
        if (it->type == DD_CT_STRING)
            dd_conf_free_str(dd_conf_field(conf, it), it->flags & DD_CF_SECRET);
        else if (it->type == DD_CT_LIST)
            dd_conf_free_list(dd_conf_field(conf, it), (int *)((char *)conf + it->cnt_off));
    }
    for (int i = 0; i < conf->warning_cnt; i++)
        free(conf->warnings[i]);
    if (conf->lc) {
        config_destroy(conf->lc);
        free(conf->lc);
    }
    free(conf->path);
    free(conf->dir);
    free(conf);
}
