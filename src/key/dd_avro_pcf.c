/*
 * A writer schema's Parsing Canonical Form and fingerprint (see dd_avro.h),
 * and the names a tagged union writes its branches under.
 *
 * The registry names a schema by an id, and a registry rebuilt without its
 * ids can serve another schema under an id dedupd has decoded records
 * with. The fingerprint is what is compared: the canonical form the Avro
 * specification defines (full names, only the attributes that change how
 * bytes are read, a fixed order, no white space), made from the parsed
 * tree rather than from the text, so two texts that parse the same have
 * one fingerprint. The specification's form drops logical types; a
 * decimal's scale changes the JSON text a record decodes into, so here a
 * decimal keeps "logicalType" and "scale".
 */
#include "dd_avro_int.h"

#include <stdio.h>

#include <openssl/evp.h>

#include "dd_buf.h"
#include "dd_common.h"

static const char *const dd_avro_pcf_prims[] = {
    [DD_AVRO_NULL] = "null",   [DD_AVRO_BOOLEAN] = "boolean", [DD_AVRO_INT] = "int",
    [DD_AVRO_LONG] = "long",   [DD_AVRO_FLOAT] = "float",     [DD_AVRO_DOUBLE] = "double",
    [DD_AVRO_BYTES] = "bytes", [DD_AVRO_STRING] = "string",
};

const char *dd_avro_branch_name(const dd_avro_node_t *node)
{
    if (node->fullname) return node->fullname;
    if (node->type <= DD_AVRO_STRING) return dd_avro_pcf_prims[node->type];
    return node->type == DD_AVRO_ARRAY ? "array" : node->type == DD_AVRO_MAP ? "map" : "union";
}

static void dd_avro_pcf_node(dd_buf_t *b, dd_avro_node_t *node);

static void dd_avro_pcf_decimal(dd_buf_t *b, const dd_avro_node_t *node)
{
    if (node->decimal) dd_buf_printf(b, ",\"logicalType\":\"decimal\",\"scale\":%d", node->scale);
}

/* A named type's first mention: its definition; later ones: its name. */
static void dd_avro_pcf_named(dd_buf_t *b, dd_avro_node_t *node)
{
    static const char *const types[] = {
        [DD_AVRO_RECORD] = "record", [DD_AVRO_ENUM] = "enum", [DD_AVRO_FIXED] = "fixed"};

    if (node->written) {
        dd_buf_printf(b, "\"%s\"", node->fullname);
        return;
    }
    node->written = 1;
    dd_buf_printf(b, "{\"name\":\"%s\",\"type\":\"%s\"", node->fullname, types[node->type]);
    if (node->type == DD_AVRO_FIXED) {
        dd_buf_printf(b, ",\"size\":%zu", node->size);
        dd_avro_pcf_decimal(b, node);
    }
    if (node->type == DD_AVRO_RECORD) dd_buf_puts(b, ",\"fields\":[");
    if (node->type == DD_AVRO_ENUM) dd_buf_puts(b, ",\"symbols\":[");
    for (size_t i = 0; node->type != DD_AVRO_FIXED && i < node->cnt; i++) {
        if (i) dd_buf_puts(b, ",");
        if (node->type == DD_AVRO_ENUM) {
            dd_buf_printf(b, "\"%s\"", node->symbols[i]);
            continue;
        }
        dd_buf_printf(b, "{\"name\":\"%s\",\"type\":", node->fields[i].name);
        dd_avro_pcf_node(b, node->fields[i].type);
        dd_buf_puts(b, "}");
    }
    dd_buf_puts(b, node->type == DD_AVRO_FIXED ? "}" : "]}");
}

/* Names, symbols and field names are [A-Za-z0-9_.]: no escape is needed. */
static void dd_avro_pcf_node(dd_buf_t *b, dd_avro_node_t *node)
{
    switch (node->type) {
    case DD_AVRO_RECORD:
    case DD_AVRO_ENUM:
    case DD_AVRO_FIXED:
        dd_avro_pcf_named(b, node);
        return;
    case DD_AVRO_ARRAY:
    case DD_AVRO_MAP:
        dd_buf_printf(b, "{\"type\":\"%s\",\"%s\":", dd_avro_branch_name(node),
                      node->type == DD_AVRO_ARRAY ? "items" : "values");
        dd_avro_pcf_node(b, node->items);
        dd_buf_puts(b, "}");
        return;
    case DD_AVRO_UNION:
        dd_buf_puts(b, "[");
        for (size_t i = 0; i < node->cnt; i++) {
            if (i) dd_buf_puts(b, ",");
            dd_avro_pcf_node(b, node->branches[i]);
        }
        dd_buf_puts(b, "]");
        return;
    default:
        if (node->decimal) { /* bytes */
            dd_buf_puts(b, "{\"type\":\"bytes\"");
            dd_avro_pcf_decimal(b, node);
            dd_buf_puts(b, "}");
            return;
        }
        dd_buf_printf(b, "\"%s\"", dd_avro_pcf_prims[node->type]);
    }
}

int dd_avro_pcf_fingerprint(dd_avro_schema_t *schema)
{
    dd_buf_t b = {0};
    int rc = DD_OK;

    for (dd_avro_node_t *n = schema->nodes; n; n = n->next_alloc)
        n->written = 0;
    dd_avro_pcf_node(&b, schema->root);
    if (b.oom || !EVP_Digest(b.p, b.len, schema->fingerprint, NULL, EVP_sha256(), NULL))
        rc = DD_ERR_NOMEM;
    dd_buf_release(&b);
    return rc;
}
