/*
 * The references rendered from the schema table (see dd_conf.h): `dedupd
 * --help-config`, the settings table of docs/CONFIG.md and the SETTINGS
 * section of dedupd.conf(5). Unit tests compare the checked-in documents
 * with this output, so a setting's text lives only in the table.
 */
#include "dd_conf_int.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"

static const char *dd_conf_type_name(const dd_conf_item_t *it)
{
    static const char *const names[] = {
        [DD_CT_GROUP] = "group",  [DD_CT_STRING] = "string",     [DD_CT_INT] = "integer",
        [DD_CT_BOOL] = "boolean", [DD_CT_DURATION] = "duration", [DD_CT_LIST] = "list of strings",
        [DD_CT_ENUM] = "string",
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

/* The default as it would be written in the file. */
static void dd_conf_default(const dd_conf_item_t *it, char *out, size_t out_size)
{
    if (it->flags & DD_CF_REQUIRED)
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

void dd_conf_print_reference(FILE *out)
{
    char allowed[128], def[128], env[80];

    fputs("dedupd configuration settings (libconfig syntax; see docs/CONFIG.md).\n"
          "Durations: \"250ms\", \"45s\", \"30m\", \"12h\", \"7d\", \"1h30m\", or a number of "
          "seconds.\n",
          out);
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        dd_conf_allowed(it, allowed, sizeof(allowed));
        dd_conf_default(it, def, sizeof(def));
        fprintf(out, "\n%s  (%s", it->path, dd_conf_type_name(it));
        if (it->type != DD_CT_GROUP)
            fprintf(out, "%s%s; %s%s", *allowed ? ", " : "", allowed,
                    (it->flags & DD_CF_REQUIRED) ? "" : "default ", def);
        fputs(")\n", out);
        dd_conf_print_wrapped(out, it->desc);
        if (dd_conf_has_env(it)) {
            dd_conf_env_name(it, env, sizeof(env));
            fprintf(out, "    Environment: %s\n", env);
        }
    }
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

void dd_conf_print_reference_md(FILE *out)
{
    char allowed[128], def[128], env[80];

    fputs("| Setting | Type | Default | Allowed | Environment | Description |\n"
          "|---|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];

        dd_conf_allowed(it, allowed, sizeof(allowed));
        dd_conf_default(it, def, sizeof(def));
        env[0] = '\0';
        if (dd_conf_has_env(it)) dd_conf_env_name(it, env, sizeof(env));
        fputs("|", out);
        dd_conf_md_cell(out, it->path, 1);
        dd_conf_md_cell(out, dd_conf_type_name(it), 0);
        dd_conf_md_cell(out, it->type == DD_CT_GROUP ? "" : def, it->def != NULL);
        dd_conf_md_cell(out, allowed, 1);
        dd_conf_md_cell(out, env, 1);
        dd_conf_md_cell(out, it->desc, 0);
        fputc('\n', out);
    }
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
static void dd_conf_man_line(FILE *out, const dd_conf_item_t *it)
{
    char allowed[128], def[128], env[80];
    const char *type = dd_conf_type_name(it);

    fprintf(out, "%c%s", type[0] - 'a' + 'A', type + 1);
    if (it->type != DD_CT_GROUP) {
        dd_conf_default(it, def, sizeof(def));
        if (it->flags & DD_CF_REQUIRED)
            fputs(", required", out);
        else if (!it->def)
            fputs(", unset by default", out);
        else
            fprintf(out, ", default \\fB%s\\fR", def);
        dd_conf_allowed(it, allowed, sizeof(allowed));
        if (*allowed) fprintf(out, ", %s", allowed);
    }
    if (dd_conf_has_env(it)) {
        dd_conf_env_name(it, env, sizeof(env));
        fprintf(out, "; environment \\fB%s\\fR.\n", env);
    } else {
        fputs(it->type == DD_CT_GROUP ? ", no environment override.\n"
                                      : "; no environment override.\n",
              out);
    }
}

void dd_conf_print_reference_man(FILE *out)
{
    int top_level = 0;

    fputs(".SH SETTINGS\n", out);
    for (int i = 0; i < dd_conf_item_cnt; i++) {
        const dd_conf_item_t *it = &dd_conf_items[i];
        int dotted = strchr(it->path, '.') != NULL;

        if (it->type == DD_CT_GROUP && !dotted) {
            fprintf(out, ".SS %s\n", it->path);
            dd_conf_man_text(out, it->desc);
            top_level = 0;
            continue;
        }
        if (!dotted && !top_level) {
            fputs(".SS Top-level settings\n", out);
            top_level = 1;
        }
        fprintf(out, ".TP\n.B %s\n", it->path);
        dd_conf_man_line(out, it);
        fputs(".br\n", out);
        dd_conf_man_text(out, it->desc);
    }
}
