/*
 * The references rendered from the schema table (see dd_conf.h): `dedupd
 * --help-config`, the settings table of docs/CONFIG.md and the SETTINGS
 * section of dedupd.conf(5). Unit tests compare the checked-in documents
 * with this output, so a setting's text lives only in the table.
 *
 * Each item is a row; `routes` is followed by the rows of an element of
 * it (routes[].name, then every item with a path in a route, in the
 * table's order), so the settings a route has are listed once more where
 * a route's settings are looked for, with what differs there.
 */
#include "dd_conf_int.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"

static const char *dd_conf_type_name(const dd_conf_item_t *it)
{
    static const char *const names[] = {
        [DD_CT_GROUP] = "group",       [DD_CT_STRING] = "string",
        [DD_CT_INT] = "integer",       [DD_CT_BOOL] = "boolean",
        [DD_CT_DURATION] = "duration", [DD_CT_LIST] = "list of strings",
        [DD_CT_ENUM] = "string",       [DD_CT_GROUPS] = "list of groups",
    };
    return names[it->type];
}

/* Allowed values, from the bounds unless the item says it better. */
static void dd_conf_allowed(const dd_conf_item_t *it, char *out, size_t out_size)
{
    char min[32], max[32];

    out[0] = '\0';
    if (it->allowed) {
        snprintf(out, out_size, "%s", it->allowed);
    } else if (it->type == DD_CT_INT) {
        snprintf(out, out_size, "%lld..%lld", (long long)it->min, (long long)it->max);
    } else if (it->type == DD_CT_DURATION) {
        dd_conf_fmt_duration(it->min, min, sizeof(min));
        dd_conf_fmt_duration(it->max, max, sizeof(max));
        snprintf(out, out_size, "%s..%s", min, max);
    } else if (it->type == DD_CT_LIST && it->min > 0) {
        snprintf(out, out_size, "at least %lld", (long long)it->min);
    }
}

/* One row of the references: an item, at the top level or in a route. */
typedef struct {
    const dd_conf_item_t *it;
    char path[96];    /* "dedup.key", or "routes[].key" */
    int route;        /* a row of an element of `routes` */
    int required;     /* no default */
    const char *desc; /* the table's text, whole, or desc_buf */
    char desc_buf[2048];
} dd_conf_row_t;

typedef void(dd_conf_emit_fn)(FILE *out, const dd_conf_row_t *row);

/* The description of a top-level row, with where else the setting may be
 * set: the schema's per flag. */
static const char *dd_conf_top_desc(dd_conf_row_t *row, const dd_conf_item_t *it)
{
    if (!it->per || it->type == DD_CT_GROUP) return it->desc;
    snprintf(row->desc_buf, sizeof(row->desc_buf), "%s %s%s.", it->desc,
             (it->per & DD_PER_ROUTE) ? "Per route: routes[]." : "Per shard: mysql.shards[].",
             it->elem);
    return row->desc_buf;
}

static void dd_conf_rows(FILE *out, dd_conf_emit_fn *emit)
{
    dd_conf_row_t row;

    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        if (it->flags & DD_CF_ROUTE_ONLY) continue;
        memset(&row, 0, sizeof(row));
        row.it = it;
        snprintf(row.path, sizeof(row.path), "%s", it->path);
        row.required = (it->flags & DD_CF_REQUIRED) != 0;
        row.desc = dd_conf_top_desc(&row, it);
        emit(out, &row);
        if (it->list != &dd_conf_route_list) continue;
        /* an element's settings: its name first, then the table's order */
        for (int pass = 0; pass < 2; pass++) {
            for (int j = 0; j < dd_conf_item_cnt; j++) {
                const dd_conf_item_t *rt = &dd_conf_items[j];
                if (!(rt->per & DD_PER_ROUTE) || ((rt->flags & DD_CF_ROUTE_ONLY) ? 0 : 1) != pass)
                    continue;
                memset(&row, 0, sizeof(row));
                row.it = rt;
                row.route = 1;
                snprintf(row.path, sizeof(row.path), "routes[].%s", rt->elem);
                row.required = (rt->flags & (DD_CF_REQUIRED | DD_CF_ROUTE_REQ)) != 0;
                row.desc = (rt->flags & DD_CF_ROUTE_ONLY) ? rt->desc
                           : rt->elem_desc                ? rt->elem_desc
                                                          : row.desc_buf;
                snprintf(row.desc_buf, sizeof(row.desc_buf), "As %s, for the route.", rt->path);
                emit(out, &row);
            }
        }
    }
}

/* The environment variable of a row, or "" (routes have none). */
static void dd_conf_row_env(const dd_conf_row_t *row, char *out, size_t out_size)
{
    out[0] = '\0';
    if (!row->route && dd_conf_has_env(row->it)) dd_conf_env_name(row->it, out, out_size);
}

/* The default as it would be written in the file. */
static void dd_conf_default(const dd_conf_row_t *row, char *out, size_t out_size)
{
    const dd_conf_item_t *it = row->it;

    if (row->required)
        snprintf(out, out_size, "required");
    else if (!it->def)
        snprintf(out, out_size, "unset");
    else if (it->type == DD_CT_LIST)
        snprintf(out, out_size, "[%s]", it->def);
    else if (it->type == DD_CT_STRING || it->type == DD_CT_ENUM || it->type == DD_CT_DURATION)
        snprintf(out, out_size, "\"%s\"", it->def);
    else
        snprintf(out, out_size, "%s", it->def);
}

/* Writes text wrapped at 80 columns, each line indented by 4. */
static void dd_conf_print_wrapped(FILE *out, const char *text)
{
    const char *p = text;
    int col = 4;

    fputs("    ", out);
    while (*p) {
        size_t len = strcspn(p, " ");

        if (col > 4 && col + 1 + (int)len > 80) {
            fputs("\n    ", out);
            col = 4;
        } else if (col > 4) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, len, out);
        col += (int)len;
        p += len;
        p += strspn(p, " ");
    }
    fputc('\n', out);
}

static void dd_conf_text_row(FILE *out, const dd_conf_row_t *row)
{
    const dd_conf_item_t *it = row->it;
    char allowed[128], def[128], env[80];

    dd_conf_allowed(it, allowed, sizeof(allowed));
    dd_conf_default(row, def, sizeof(def));
    fprintf(out, "\n%s  (%s", row->path, dd_conf_type_name(it));
    if (it->type != DD_CT_GROUP && it->type != DD_CT_GROUPS)
        fprintf(out, "%s%s; %s%s", *allowed ? ", " : "", allowed, row->required ? "" : "default ",
                def);
    fputs(")\n", out);
    dd_conf_print_wrapped(out, row->desc);
    dd_conf_row_env(row, env, sizeof(env));
    if (*env) fprintf(out, "    Environment: %s\n", env);
}

void dd_conf_print_reference(FILE *out)
{
    fputs("dedupd configuration settings (libconfig syntax; see docs/CONFIG.md).\n"
          "Durations: \"250ms\", \"45s\", \"30m\", \"12h\", \"7d\", \"1h30m\", or a number of "
          "seconds.\n",
          out);
    dd_conf_rows(out, dd_conf_text_row);
}

/* One markdown table cell; '|' would end the cell. */
static void dd_conf_md_cell(FILE *out, const char *text, int code)
{
    fputs(" ", out);
    if (code && *text) fputc('`', out);
    for (const char *p = text; *p; p++) {
        if (*p == '|') fputc('\\', out);
        fputc(*p, out);
    }
    if (code && *text) fputc('`', out);
    fputs(" |", out);
}

static void dd_conf_md_row(FILE *out, const dd_conf_row_t *row)
{
    const dd_conf_item_t *it = row->it;
    char allowed[128], def[128], env[80];
    int grp = it->type == DD_CT_GROUP || it->type == DD_CT_GROUPS;

    dd_conf_allowed(it, allowed, sizeof(allowed));
    dd_conf_default(row, def, sizeof(def));
    dd_conf_row_env(row, env, sizeof(env));
    fputs("|", out);
    dd_conf_md_cell(out, row->path, 1);
    dd_conf_md_cell(out, dd_conf_type_name(it), 0);
    dd_conf_md_cell(out, grp ? "" : def, it->def != NULL && !row->required);
    dd_conf_md_cell(out, grp ? "" : allowed, 1);
    dd_conf_md_cell(out, env, 1);
    dd_conf_md_cell(out, row->desc, 0);
    fputc('\n', out);
}

void dd_conf_print_reference_md(FILE *out)
{
    fputs("| Setting | Type | Default | Allowed | Environment | Description |\n"
          "|---|---|---|---|---|---|\n",
          out);
    dd_conf_rows(out, dd_conf_md_row);
}

/* Writes text for troff: wrapped at 78 columns (a line break is a space
 * to troff), '\' as \e, '"' as \(dq, and \& before a line that would start
 * with a control character. */
static void dd_conf_man_text(FILE *out, const char *text)
{
    const char *p = text;
    int col = 0;

    while (*p) {
        size_t len = strcspn(p, " ");

        if (col > 0 && col + 1 + (int)len > 78) {
            fputc('\n', out);
            col = 0;
        } else if (col > 0) {
            fputc(' ', out);
            col++;
        }
        if (col == 0 && (*p == '.' || *p == '\'')) fputs("\\&", out);
        for (size_t i = 0; i < len; i++) {
            if (p[i] == '\\')
                fputs("\\e", out);
            else if (p[i] == '"')
                fputs("\\(dq", out);
            else
                fputc(p[i], out);
        }
        col += (int)len;
        p += len;
        p += strspn(p, " ");
    }
    fputc('\n', out);
}

/* "String, default \fB"x"\fR, 1..9; environment \fBDEDUPD_X\fR." */
static void dd_conf_man_line(FILE *out, const dd_conf_row_t *row)
{
    const dd_conf_item_t *it = row->it;
    char allowed[128], def[128], env[80];
    const char *type = dd_conf_type_name(it);
    int grp = it->type == DD_CT_GROUP || it->type == DD_CT_GROUPS;

    fprintf(out, "%c%s", type[0] - 'a' + 'A', type + 1);
    if (!grp) {
        dd_conf_default(row, def, sizeof(def));
        if (row->required)
            fputs(", required", out);
        else if (!it->def)
            fputs(", unset by default", out);
        else
            fprintf(out, ", default \\fB%s\\fR", def);
        dd_conf_allowed(it, allowed, sizeof(allowed));
        if (*allowed) fprintf(out, ", %s", allowed);
    }
    dd_conf_row_env(row, env, sizeof(env));
    if (*env)
        fprintf(out, "; environment \\fB%s\\fR.\n", env);
    else
        fputs(grp ? ", no environment override.\n" : "; no environment override.\n", out);
}

/* Top-level settings without a group gather under one heading, opened by
 * the first of them. */
static int dd_conf_man_top_level;

static void dd_conf_man_row(FILE *out, const dd_conf_row_t *row)
{
    const dd_conf_item_t *it = row->it;
    int dotted = strchr(row->path, '.') != NULL;

    if ((it->type == DD_CT_GROUP || it->type == DD_CT_GROUPS) && !dotted) {
        fprintf(out, ".SS %s\n", row->path);
        dd_conf_man_text(out, row->desc);
        dd_conf_man_top_level = 0;
        return;
    }
    if (!dotted && !dd_conf_man_top_level) {
        fputs(".SS Top-level settings\n", out);
        dd_conf_man_top_level = 1;
    }
    fprintf(out, ".TP\n.B %s\n", row->path);
    dd_conf_man_line(out, row);
    fputs(".br\n", out);
    dd_conf_man_text(out, row->desc);
}

void dd_conf_print_reference_man(FILE *out)
{
    fputs(".SH SETTINGS\n", out);
    dd_conf_man_top_level = 0;
    dd_conf_rows(out, dd_conf_man_row);
}
