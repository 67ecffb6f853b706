/*
 * Writer schemas (see dd_avro.h): the JSON text of an Avro schema, as the
 * registry holds it, parsed into a tree of dd_avro_node_t.
 *
 * Only what decoding needs is kept: types, names (to resolve references
 * and render field names), enum symbols, fixed sizes and decimals. Field
 * defaults, aliases and docs matter for reader schemas only. What the Avro
 * specification calls an invalid schema is refused, so a record is never
 * read two ways; an invalid decimal annotation is ignored, as the
 * specification asks. The text must be strict JSON (dd_json.h): a member
 * twice in one object ("scale": 2, "scale": 0) is read as the first by one
 * library and as the last by another, so it is refused.
 *
 * The schema comes from a registry dedupd does not control, so its cost is
 * bounded: at most DD_AVRO_MAX_NODES types, and no step quadratic in the
 * size (named types in a balanced tree, duplicate fields, symbols and
 * branches found by sorting).
 */
#include "dd_avro_int.h"

#include <search.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dd_common.h"
#include "dd_json.h"

typedef struct {
    dd_avro_schema_t *schema;
    char *errstr;
    size_t errstr_size;
    int nomem;
    void *names;  /* tsearch tree of the named types, by full name */
    size_t nodes; /* allocated so far */
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
    dd_avro_node_t *node;

    if (++ctx->nodes > DD_AVRO_MAX_NODES) {
        dd_avro_fail(ctx, "more than %d types in the schema", DD_AVRO_MAX_NODES);
        return NULL;
    }
    if (!(node = calloc(1, sizeof(*node)))) {
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

static int dd_avro_named_cmp(const void *a, const void *b)
{
    return strcmp(((const dd_avro_node_t *)a)->fullname, ((const dd_avro_node_t *)b)->fullname);
}

static dd_avro_node_t *dd_avro_named_find(dd_avro_sctx_t *ctx, const char *fullname)
{
    dd_avro_node_t key = {.fullname = (char *)fullname};
    void *found = tfind(&key, &ctx->names, dd_avro_named_cmp);

    return found ? *(dd_avro_node_t **)found : NULL;
}

static void dd_avro_named_keep(void *node)
{
    (void)node; /* the nodes belong to the schema */
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
    void *found;
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
    if (!(found = tsearch(node, &ctx->names, dd_avro_named_cmp))) return dd_avro_nomem(ctx);
    if (*(dd_avro_node_t **)found != node)
        return dd_avro_fail(ctx, "type \"%.200s\" defined twice", node->fullname);
    /* Names inside take the namespace of the full name. */
    dot = strrchr(node->fullname, '.');
    if (!(node->space = strndup(node->fullname, dot ? (size_t)(dot - node->fullname) : 0)))
        return dd_avro_nomem(ctx);
    *ns = node->space;
    return 0;
}

static int dd_avro_field_cmp(const void *a, const void *b)
{
    return strcmp((*(const dd_avro_field_t *const *)a)->name,
                  (*(const dd_avro_field_t *const *)b)->name);
}

static int dd_avro_symbol_cmp(const void *a, const void *b)
{
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* Two branches of one type (of one name, for named types). */
static int dd_avro_branch_cmp(const void *a, const void *b)
{
    const dd_avro_node_t *x = **(const dd_avro_node_t *const *const *)a;
    const dd_avro_node_t *y = **(const dd_avro_node_t *const *const *)b;

    if (x->type != y->type) return x->type < y->type ? -1 : 1;
    return strcmp(x->fullname ? x->fullname : "", y->fullname ? y->fullname : "");
}

/* The first name of what (a field, a symbol, a branch: cnt elements of
 * size bytes at elems) that is there twice, found by sorting pointers to
 * the elements. */
static int dd_avro_unique(dd_avro_sctx_t *ctx, void *elems, size_t cnt, size_t size,
                          int (*cmp)(const void *, const void *), const char *what, const char *in)
{
    const void **sorted;
    int rc = 0;

    if (cnt < 2) return 0;
    if (!(sorted = malloc(cnt * sizeof(*sorted)))) return dd_avro_nomem(ctx);
    for (size_t i = 0; i < cnt; i++)
        sorted[i] = (const char *)elems + i * size;
    qsort(sorted, cnt, sizeof(*sorted), cmp);
    for (size_t i = 1; !rc && i < cnt; i++) {
        const void *dup = sorted[i];
        if (cmp(&sorted[i - 1], &dup) != 0) continue;
        if (strcmp(what, "branch") == 0)
            rc = dd_avro_fail(ctx, "a union with two branches of type %s",
                              dd_avro_branch_name(*(const dd_avro_node_t *const *)dup));
        else
            rc = dd_avro_fail(ctx, "%s \"%.200s\" twice in one %s", what,
                              strcmp(what, "field") == 0 ? ((const dd_avro_field_t *)dup)->name
                                                         : *(const char *const *)dup,
                              in);
    }
    free(sorted);
    return rc;
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
        if (!(fd->name = strdup(name->valuestring))) return dd_avro_nomem(ctx);
        fd->name_len = strlen(fd->name);
        i++; /* counted before its type, so destroy frees the name */
        if (dd_avro_parse(ctx, cJSON_GetObjectItemCaseSensitive(f, "type"), ns, &fd->type))
            return -1;
    }
    return dd_avro_unique(ctx, node->fields, node->cnt, sizeof(*node->fields), dd_avro_field_cmp,
                          "field", "record");
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
        if (!(node->symbols[i] = strdup(s->valuestring))) return dd_avro_nomem(ctx);
        node->symbol_lens[i] = strlen(s->valuestring);
        i++;
    }
    return dd_avro_unique(ctx, node->symbols, node->cnt, sizeof(*node->symbols), dd_avro_symbol_cmp,
                          "symbol", "enum");
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

/* The kind of JSON value a type is written as; two branches of one union
 * of the same kind could write different values as one text. */
static int dd_avro_json_kind(const dd_avro_node_t *node)
{
    switch (node->type) {
    case DD_AVRO_INT:
    case DD_AVRO_LONG:
    case DD_AVRO_FLOAT:
    case DD_AVRO_DOUBLE:
        return DD_AVRO_DOUBLE;
    case DD_AVRO_BYTES:
    case DD_AVRO_FIXED:
        return node->decimal ? DD_AVRO_DOUBLE : DD_AVRO_STRING;
    case DD_AVRO_ENUM:
        return DD_AVRO_STRING;
    case DD_AVRO_MAP:
        return DD_AVRO_RECORD;
    default:
        return (int)node->type; /* null, boolean, string, record, array */
    }
}

/* A union writes its branch's name around a value when two of its
 * branches are of one kind of JSON value (two numbers, two strings, two
 * objects): docs/KEYS.md, Avro. */
static int dd_avro_union_tagged(const dd_avro_node_t *node)
{
    int seen[DD_AVRO_FIXED + 1] = {0};

    for (size_t i = 0; i < node->cnt; i++)
        if (seen[dd_avro_json_kind(node->branches[i])]++) return 1;
    return 0;
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
        node->branches[i++] = t;
    }
    if (dd_avro_unique(ctx, node->branches, node->cnt, sizeof(*node->branches), dd_avro_branch_cmp,
                       "branch", "union"))
        return -1;
    node->tagged = dd_avro_union_tagged(node);
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

/* Parses one text into ctx (its root into *root): strict JSON first. */
static int dd_avro_parse_text(dd_avro_sctx_t *ctx, dd_json_doc_t *doc, const char *json, size_t len,
                              dd_avro_node_t **root)
{
    char why[200];
    cJSON *j;
    int rc;

    if ((rc = dd_json_parse(doc, json, len, why, sizeof(why)))) {
        if (rc == DD_ERR_NOMEM) return dd_avro_nomem(ctx);
        return dd_avro_fail(ctx, "the schema is not JSON: %s", why);
    }
    if (!(j = cJSON_ParseWithLength(json, len)))
        return dd_avro_nomem(ctx); /* strict JSON is JSON */
    rc = dd_avro_parse(ctx, j, NULL, root);
    cJSON_Delete(j);
    return rc;
}

/* Every text into ctx: the references, each failure naming its text, then
 * the writer schema. */
static int dd_avro_parse_all(dd_avro_sctx_t *ctx, const dd_avro_text_t *refs, size_t ref_cnt,
                             const char *json, size_t len)
{
    dd_json_doc_t *doc = dd_json_doc_new();
    dd_avro_node_t *root;
    int rc = 0;

    if (!doc) return dd_avro_nomem(ctx);
    for (size_t i = 0; !rc && i < ref_cnt; i++) {
        rc = dd_avro_parse_text(ctx, doc, refs[i].json, refs[i].len, &root);
        if (rc && !ctx->nomem && ctx->errstr && ctx->errstr_size) {
            char why[300];
            snprintf(why, sizeof(why), "%s", ctx->errstr);
            dd_avro_fail(ctx, "%s: %s", refs[i].what, why);
        }
    }
    if (!rc) rc = dd_avro_parse_text(ctx, doc, json, len, &ctx->schema->root);
    dd_json_doc_destroy(doc);
    return rc;
}

int dd_avro_schema_new_refs(dd_avro_schema_t **schemap, const dd_avro_text_t *refs, size_t ref_cnt,
                            const char *json, size_t len, char *errstr, size_t errstr_size)
{
    dd_avro_schema_t *schema = calloc(1, sizeof(*schema));
    dd_avro_sctx_t ctx = {.schema = schema, .errstr = errstr, .errstr_size = errstr_size};
    int rc = DD_ERR_NOMEM;

    *schemap = NULL;
    if (!schema) goto out;
    if (dd_avro_parse_all(&ctx, refs, ref_cnt, json, len)) {
        rc = ctx.nomem ? DD_ERR_NOMEM : DD_ERR_PERMANENT;
        goto out;
    }
    for (dd_avro_node_t *n = schema->nodes; n; n = n->next_alloc)
        n->min_size = (size_t)-1;
    for (dd_avro_node_t *n = schema->nodes; n; n = n->next_alloc)
        dd_avro_min_size(n, 0);
    if ((rc = dd_avro_pcf_fingerprint(schema))) goto out;
    *schemap = schema;
    schema = NULL;
    rc = DD_OK;
out:
    tdestroy(ctx.names, dd_avro_named_keep);
    dd_avro_schema_destroy(schema);
    return rc;
}

int dd_avro_schema_new(dd_avro_schema_t **schemap, const char *json, size_t len, char *errstr,
                       size_t errstr_size)
{
    return dd_avro_schema_new_refs(schemap, NULL, 0, json, len, errstr, errstr_size);
}

const unsigned char *dd_avro_schema_fingerprint(const dd_avro_schema_t *schema)
{
    return schema->fingerprint;
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
