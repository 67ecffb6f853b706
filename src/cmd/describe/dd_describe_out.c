/*
 * The document as text: JSON indented by two spaces (cJSON's own printer
 * indents with tabs, which YAML tools that also read JSON warn about), or
 * YAML for catalogues that keep AsyncAPI in YAML. Both walk the same cJSON
 * tree, so the two forms cannot say different things. In YAML every key
 * and string is double-quoted with JSON's escapes (valid YAML double-quoted
 * scalars), so "1.0", "null" or "on" stay strings; numbers, booleans and
 * null are written as JSON writes them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "dd_describe_int.h"

static void dd_describe_yaml_str(FILE *out, const char *s)
{
    cJSON *ref = cJSON_CreateStringReference(s);
    char *q = ref ? cJSON_PrintUnformatted(ref) : NULL;

    fputs(q ? q : "\"\"", out);
    free(q);
    cJSON_Delete(ref); /* a reference: the string stays the caller's */
}

static void dd_describe_yaml_scalar(FILE *out, const cJSON *item)
{
    char *text;

    if (cJSON_IsString(item)) {
        dd_describe_yaml_str(out, item->valuestring);
        return;
    }
    text = cJSON_PrintUnformatted(item);
    fputs(text ? text : "null", out);
    free(text);
}

static int dd_describe_yaml_empty(const cJSON *item)
{
    return (cJSON_IsObject(item) || cJSON_IsArray(item)) && !item->child;
}

static void dd_describe_yaml_node(FILE *out, const cJSON *item, int indent);

/* A value after "key:" or "-": on the same line when it is a scalar or
 * empty, else on the next lines, indented. */
static void dd_describe_yaml_value(FILE *out, const cJSON *v, int indent)
{
    if (dd_describe_yaml_empty(v)) {
        fputs(cJSON_IsObject(v) ? " {}\n" : " []\n", out);
    } else if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        fputc('\n', out);
        dd_describe_yaml_node(out, v, indent + 2);
    } else {
        fputc(' ', out);
        dd_describe_yaml_scalar(out, v);
        fputc('\n', out);
    }
}

static void dd_describe_yaml_node(FILE *out, const cJSON *item, int indent)
{
    for (const cJSON *c = item->child; c; c = c->next) {
        fprintf(out, "%*s", indent, "");
        if (cJSON_IsObject(item)) {
            dd_describe_yaml_str(out, c->string);
            fputc(':', out);
        } else {
            fputc('-', out);
        }
        dd_describe_yaml_value(out, c, indent);
    }
}

void dd_describe_yaml(FILE *out, const cJSON *item)
{
    if (dd_describe_yaml_empty(item) || !(cJSON_IsObject(item) || cJSON_IsArray(item))) {
        dd_describe_yaml_scalar(out, item);
        fputc('\n', out);
        return;
    }
    dd_describe_yaml_node(out, item, 0);
}

static void dd_describe_json_node(FILE *out, const cJSON *item, int indent)
{
    int obj = cJSON_IsObject(item);

    if (!(obj || cJSON_IsArray(item)) || !item->child) {
        if (obj || cJSON_IsArray(item))
            fputs(obj ? "{}" : "[]", out);
        else
            dd_describe_yaml_scalar(out, item);
        return;
    }
    fputs(obj ? "{\n" : "[\n", out);
    for (const cJSON *c = item->child; c; c = c->next) {
        fprintf(out, "%*s", indent + 2, "");
        if (obj) {
            dd_describe_yaml_str(out, c->string);
            fputs(": ", out);
        }
        dd_describe_json_node(out, c, indent + 2);
        fputs(c->next ? ",\n" : "\n", out);
    }
    fprintf(out, "%*s%c", indent, "", obj ? '}' : ']');
}

void dd_describe_json(FILE *out, const cJSON *item)
{
    dd_describe_json_node(out, item, 0);
    fputc('\n', out);
}
