/*
 * Writer schemas (see dd_avro.h): the JSON text of an Avro schema, as the
 * registry holds it, parsed into a tree of dd_avro_node_t.
 *
 * Only what decoding needs is kept: types, names (to resolve references
 * and render field names), enum symbols, fixed sizes and decimals. Field
 * defaults, aliases and docs matter for reader schemas only. What the Avro
 * specification calls an invalid schema is refused, so a record is never
 * read two ways; an invalid decimal annotation is ignored, as the
 * specification asks.
 */
#include "dd_avro_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dd_common.h"

typedef struct {
    dd_avro_schema_t *schema;
    char *errstr;
    size_t errstr_size;
    int nomem;
} dd_avro_sctx_t;

static const char *const dd_avro_prim_names[] = {"null",  "boolean", "int",   "long",
                                                 "float", "double",  "bytes", "string"};

__attribute__((format(printf, 2, 3))) static int dd_avro_fail(dd_avro_sctx_t *ctx, const char *fmt,
                                                              ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (ctx->errstr && ctx->errstr_size) vsnprintf(ctx->errstr, ctx->errstr_size, fmt, ap);
    va_end(ap);
    return -1;
}

static int dd_avro_nomem(dd_avro_sctx_t *ctx)
{
    ctx->nomem = 1;
    dd_errstr_set(ctx->errstr, ctx->errstr_size, "out of memory");
    return -1;
}

static dd_avro_node_t *dd_avro_node_new(dd_avro_sctx_t *ctx, dd_avro_type_t type)
{
    dd_avro_node_t *node = calloc(1, sizeof(*node));

    if (!node) {
        dd_avro_nomem(ctx);
        return NULL;
    }
    node->type = type;
    node->next_alloc = ctx->schema->nodes;
    ctx->schema->nodes = node;
    return node;
}

/* [A-Za-z_][A-Za-z0-9_]*, or with dots between such parts when dotted. */
static int dd_avro_name_ok(const char *s, int dotted)
{
    int start = 1;

    if (!*s) return 0;
    for (; *s; s++) {
        char c = *s;
        if (c == '.' && dotted && !start) {
            start = 1;
            continue;
        }
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
              (!start && c >= '0' && c <= '9')))
            return 0;
        start = 0;
    }
    return !start;
}

static int dd_avro_prim_type(const char *name)
{
    for (size_t i = 0; i < DD_ARRAY_LEN(dd_avro_prim_names); i++)
        if (strcmp(name, dd_avro_prim_names[i]) == 0) return (int)i;
    return -1;
}

static dd_avro_node_t *dd_avro_named_find(dd_avro_sctx_t *ctx, const char *fullname)
{
    for (dd_avro_node_t *n = ctx->schema->nodes; n; n = n->next_alloc)
        if (n->fullname && strcmp(n->fullname, fullname) == 0) return n;
    return NULL;
}

/* "ns.name" (or name alone when it has a dot or ns is empty), malloc'd. */
static char *dd_avro_fullname(const char *ns, const char *name)
{
    size_t n = strlen(name) + (ns ? strlen(ns) : 0) + 2;
    char *out = malloc(n);

    if (!out) return NULL;
    if (strchr(name, '.') || !ns || !*ns)
        snprintf(out, n, "%s", name);
    else
        snprintf(out, n, "%s.%s", ns, name);
    return out;
}

static int dd_avro_parse(dd_avro_sctx_t *ctx, const cJSON *j, const char *ns, dd_avro_node_t **out);

/* A type named by a string: a primitive, or a named type defined before. */
static int dd_avro_parse_ref(dd_avro_sctx_t *ctx, const char *name, const char *ns,
                             dd_avro_node_t **out)
{
    int prim = dd_avro_prim_type(name);
    char *full;

    if (prim >= 0) return (*out = dd_avro_node_new(ctx, (dd_avro_type_t)prim)) ? 0 : -1;
    if (!(full = dd_avro_fullname(ns, name))) return dd_avro_nomem(ctx);
    *out = dd_avro_named_find(ctx, full);
    free(full);
    if (!*out) *out = dd_avro_named_find(ctx, name); /* a name of the null namespace */
    return *out ? 0 : dd_avro_fail(ctx, "unknown type \"%.200s\"", name);
}

/* Registers a named type: its fullname, unique in the schema. *ns becomes
 * its namespace, for the names inside it. */
static int dd_avro_name_set(dd_avro_sctx_t *ctx, dd_avro_node_t *node, const cJSON *j,
                            const char **ns)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *space = cJSON_GetObjectItemCaseSensitive(j, "namespace");
    char *dot;

    if (!cJSON_IsString(name) || !dd_avro_name_ok(name->valuestring, 1))
        return dd_avro_fail(ctx, "a named type without a valid name");
    if (space && !cJSON_IsNull(space)) {
        if (!cJSON_IsString(space) ||
            (*space->valuestring && !dd_avro_name_ok(space->valuestring, 1)))
            return dd_avro_fail(ctx, "invalid namespace of \"%.200s\"", name->valuestring);
        *ns = space->valuestring;
    }
    if (!(node->fullname = dd_avro_fullname(*ns, name->valuestring))) return dd_avro_nomem(ctx);
    for (dd_avro_node_t *n = node->next_alloc; n; n = n->next_alloc)
        if (n->fullname && strcmp(n->fullname, node->fullname) == 0)
            return dd_avro_fail(ctx, "type \"%.200s\" defined twice", node->fullname);
    /* Names inside take the namespace of the full name. */
    dot = strrchr(node->fullname, '.');
    if (!(node->space = strndup(node->fullname, dot ? (size_t)(dot - node->fullname) : 0)))
        return dd_avro_nomem(ctx);
    *ns = node->space;
    return 0;
}

static int dd_avro_parse_fields(dd_avro_sctx_t *ctx, dd_avro_node_t *node, const cJSON *j,
                                const char *ns)
{
    const cJSON *fields = cJSON_GetObjectItemCaseSensitive(j, "fields"), *f;
    size_t i = 0;

    if (!cJSON_IsArray(fields))
        return dd_avro_fail(ctx, "record \"%.200s\" has no fields array", node->fullname);
    node->cnt = (size_t)cJSON_GetArraySize(fields);
    if (node->cnt && !(node->fields = calloc(node->cnt, sizeof(*node->fields))))
        return dd_avro_nomem(ctx);
    cJSON_ArrayForEach(f, fields)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        dd_avro_field_t *fd = &node->fields[i];
        if (!cJSON_IsString(name) || !dd_avro_name_ok(name->valuestring, 0))
            return dd_avro_fail(ctx, "a field of \"%.200s\" without a valid name", node->fullname);
        for (size_t k = 0; k < i; k++)
            if (strcmp(node->fields[k].name, name->valuestring) == 0)
                return dd_avro_fail(ctx, "field \"%.200s\" twice in one record", name->valuestring);
        if (!(fd->name = strdup(name->valuestring))) return dd_avro_nomem(ctx);
        fd->name_len = strlen(fd->name);
        i++; /* counted before its type, so destroy frees the name */
        if (dd_avro_parse(ctx, cJSON_GetObjectItemCaseSensitive(f, "type"), ns, &fd->type))
            return -1;
    }
    return 0;
}

static int dd_avro_parse_symbols(dd_avro_sctx_t *ctx, dd_avro_node_t *node, const cJSON *j)
{
    const cJSON *syms = cJSON_GetObjectItemCaseSensitive(j, "symbols"), *s;
    size_t i = 0;

    if (!cJSON_IsArray(syms))
        return dd_avro_fail(ctx, "enum \"%.200s\" has no symbols array", node->fullname);
    node->cnt = (size_t)cJSON_GetArraySize(syms);
    if (node->cnt && (!(node->symbols = calloc(node->cnt, sizeof(*node->symbols))) ||
                      !(node->symbol_lens = calloc(node->cnt, sizeof(*node->symbol_lens)))))
        return dd_avro_nomem(ctx);
    cJSON_ArrayForEach(s, syms)
    {
        if (!cJSON_IsString(s) || !dd_avro_name_ok(s->valuestring, 0))
            return dd_avro_fail(ctx, "enum \"%.200s\" has an invalid symbol", node->fullname);
        for (size_t k = 0; k < i; k++)
            if (strcmp(node->symbols[k], s->valuestring) == 0)
                return dd_avro_fail(ctx, "symbol \"%.200s\" twice in one enum", s->valuestring);
        if (!(node->symbols[i] = strdup(s->valuestring))) return dd_avro_nomem(ctx);
        node->symbol_lens[i] = strlen(s->valuestring);
        i++;
    }
    return 0;
}

/* A decimal annotation: kept when valid (precision > 0, 0 <= scale <=
 * precision, within DD_AVRO_MAX_SCALE), else ignored. */
static void dd_avro_parse_decimal(dd_avro_node_t *node, const cJSON *j)
{
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(j, "logicalType");
    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(j, "precision");
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(j, "scale");
    double p, s;

    if (!cJSON_IsString(lt) || strcmp(lt->valuestring, "decimal") != 0 || !cJSON_IsNumber(prec))
        return;
    p = prec->valuedouble;
    s = scale ? (cJSON_IsNumber(scale) ? scale->valuedouble : -1) : 0;
    if (p != (double)(int64_t)p || s != (double)(int64_t)s || p < 1 || s < 0 || s > p ||
        s > DD_AVRO_MAX_SCALE)
        return;
    node->decimal = 1;
    node->scale = (int)s;
}

static int dd_avro_parse_union(dd_avro_sctx_t *ctx, const cJSON *j, const char *ns,
                               dd_avro_node_t **out)
{
    dd_avro_node_t *node = dd_avro_node_new(ctx, DD_AVRO_UNION);
    const cJSON *b;
    size_t i = 0;

    if (!(*out = node)) return -1;
    node->cnt = (size_t)cJSON_GetArraySize(j);
    if (!node->cnt) return dd_avro_fail(ctx, "a union without branches");
    if (!(node->branches = calloc(node->cnt, sizeof(*node->branches)))) return dd_avro_nomem(ctx);
    cJSON_ArrayForEach(b, j)
    {
        dd_avro_node_t *t;
        if (dd_avro_parse(ctx, b, ns, &t)) return -1;
        if (t->type == DD_AVRO_UNION) return dd_avro_fail(ctx, "a union inside a union");
        for (size_t k = 0; k < i; k++)
            if (node->branches[k]->type == t->type &&
                (!t->fullname || strcmp(t->fullname, node->branches[k]->fullname) == 0))
                return dd_avro_fail(ctx, "a union with two branches of type %s",
                                    t->fullname ? t->fullname : "(unnamed)");
        node->branches[i++] = t;
    }
    return 0;
}

static const dd_avro_type_t dd_avro_complex_types[] = {
    DD_AVRO_RECORD, DD_AVRO_RECORD, DD_AVRO_ENUM, DD_AVRO_ARRAY, DD_AVRO_MAP, DD_AVRO_FIXED};
static const char *const dd_avro_complex_names[] = {"record", "error", "enum",
                                                    "array",  "map",   "fixed"};

static int dd_avro_parse_complex(dd_avro_sctx_t *ctx, dd_avro_node_t *node, const cJSON *j,
                                 const char *ns)
{
    const cJSON *size;

    switch (node->type) {
    case DD_AVRO_RECORD:
        return dd_avro_name_set(ctx, node, j, &ns) || dd_avro_parse_fields(ctx, node, j, ns) ? -1
                                                                                             : 0;
    case DD_AVRO_ENUM:
        return dd_avro_name_set(ctx, node, j, &ns) || dd_avro_parse_symbols(ctx, node, j) ? -1 : 0;
    case DD_AVRO_ARRAY:
        return dd_avro_parse(ctx, cJSON_GetObjectItemCaseSensitive(j, "items"), ns, &node->items);
    case DD_AVRO_MAP:
        return dd_avro_parse(ctx, cJSON_GetObjectItemCaseSensitive(j, "values"), ns, &node->items);
    default: /* fixed */
        if (dd_avro_name_set(ctx, node, j, &ns)) return -1;
        size = cJSON_GetObjectItemCaseSensitive(j, "size");
        if (!cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble > 0x7fffffff ||
            size->valuedouble != (double)(int64_t)size->valuedouble)
            return dd_avro_fail(ctx, "fixed \"%.200s\" without a valid size", node->fullname);
        node->size = (size_t)size->valuedouble;
        dd_avro_parse_decimal(node, j);
        return 0;
    }
}

/* {"type": ...}: a primitive with attributes, or a complex type. */
static int dd_avro_parse_object(dd_avro_sctx_t *ctx, const cJSON *j, const char *ns,
                                dd_avro_node_t **out)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    int prim;

    if (!type) return dd_avro_fail(ctx, "a schema object without \"type\"");
    if (!cJSON_IsString(type)) return dd_avro_parse(ctx, type, ns, out);
    for (size_t i = 0; i < DD_ARRAY_LEN(dd_avro_complex_names); i++) {
        if (strcmp(type->valuestring, dd_avro_complex_names[i]) != 0) continue;
        if (!(*out = dd_avro_node_new(ctx, dd_avro_complex_types[i]))) return -1;
        return dd_avro_parse_complex(ctx, *out, j, ns);
    }
    if ((prim = dd_avro_prim_type(type->valuestring)) < 0)
        return dd_avro_parse_ref(ctx, type->valuestring, ns, out);
    if (!(*out = dd_avro_node_new(ctx, (dd_avro_type_t)prim))) return -1;
    if (prim == DD_AVRO_BYTES) dd_avro_parse_decimal(*out, j);
    return 0;
}

static int dd_avro_parse(dd_avro_sctx_t *ctx, const cJSON *j, const char *ns, dd_avro_node_t **out)
{
    *out = NULL;
    if (cJSON_IsString(j)) return dd_avro_parse_ref(ctx, j->valuestring, ns, out);
    if (cJSON_IsArray(j)) return dd_avro_parse_union(ctx, j, ns, out);
    if (cJSON_IsObject(j)) return dd_avro_parse_object(ctx, j, ns, out);
    return dd_avro_fail(ctx, "a type must be a name, an object or an array");
}

/* Fewest bytes a datum takes, a lower bound for the counts of arrays and
 * maps. A record met again while its own size is computed counts 0. */
static size_t dd_avro_min_size(dd_avro_node_t *node, int depth)
{
    size_t sum = 0, m;

    if (node->min_size != (size_t)-1) return node->min_size;
    if (depth > 64) return 0;
    node->min_size = 0; /* in progress */
    switch (node->type) {
    case DD_AVRO_NULL:
        sum = 0;
        break;
    case DD_AVRO_FLOAT:
        sum = 4;
        break;
    case DD_AVRO_DOUBLE:
        sum = 8;
        break;
    case DD_AVRO_FIXED:
        sum = node->size;
        break;
    case DD_AVRO_RECORD:
        for (size_t i = 0; i < node->cnt; i++)
            if ((m = dd_avro_min_size(node->fields[i].type, depth + 1)) < SIZE_MAX - sum) sum += m;
        break;
    case DD_AVRO_UNION:
        for (size_t i = 0; i < node->cnt; i++)
            dd_avro_min_size(node->branches[i], depth + 1);
        sum = 1;
        break;
    case DD_AVRO_ARRAY:
    case DD_AVRO_MAP:
        dd_avro_min_size(node->items, depth + 1);
        sum = 1;
        break;
    default:
        sum = 1;
        break; /* boolean, int, long, bytes, string, enum */
    }
    return node->min_size = sum;
}

int dd_avro_schema_new(dd_avro_schema_t **schemap, const char *json, size_t len, char *errstr,
                       size_t errstr_size)
{
    dd_avro_schema_t *schema = calloc(1, sizeof(*schema));
    dd_avro_sctx_t ctx = {schema, errstr, errstr_size, 0};
    cJSON *j = NULL;
    int rc = DD_ERR_NOMEM;

    *schemap = NULL;
    if (!schema) goto out;
    if (!(j = cJSON_ParseWithLength(json, len))) {
        dd_errstr_set(errstr, errstr_size, "the schema is not JSON");
        rc = DD_ERR_PERMANENT;
        goto out;
    }
    if (dd_avro_parse(&ctx, j, NULL, &schema->root)) {
        rc = ctx.nomem ? DD_ERR_NOMEM : DD_ERR_PERMANENT;
        goto out;
    }
    for (dd_avro_node_t *n = schema->nodes; n; n = n->next_alloc)
        n->min_size = (size_t)-1;
    for (dd_avro_node_t *n = schema->nodes; n; n = n->next_alloc)
        dd_avro_min_size(n, 0);
    *schemap = schema;
    schema = NULL;
    rc = DD_OK;
out:
    cJSON_Delete(j);
    dd_avro_schema_destroy(schema);
    return rc;
}

void dd_avro_schema_destroy(dd_avro_schema_t *schema)
{
    dd_avro_node_t *n, *next;

    if (!schema) return;
    for (n = schema->nodes; n; n = next) {
        next = n->next_alloc;
        for (size_t i = 0; n->fields && i < n->cnt; i++)
            free(n->fields[i].name);
        for (size_t i = 0; n->symbols && i < n->cnt; i++)
            free(n->symbols[i]);
        free(n->fields);
        free(n->symbols);
        free(n->symbol_lens);
        free(n->branches);
        free(n->fullname);
        free(n->space);
        free(n);
    }
    free(schema);
}
