/*
 * Inside the Avro module (see dd_avro.h), shared by its files only:
 *   dd_avro_schema.c  writer schemas: JSON text -> a tree of nodes
 *   dd_avro_pcf.c     a tree's canonical form and fingerprint
 *   dd_avro.c         the wire format's header, and records -> JSON text
 */
#ifndef DD_AVRO_INT_H
#define DD_AVRO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "dd_avro.h"

typedef enum {
    DD_AVRO_NULL,
    DD_AVRO_BOOLEAN,
    DD_AVRO_INT,
    DD_AVRO_LONG,
    DD_AVRO_FLOAT,
    DD_AVRO_DOUBLE,
    DD_AVRO_BYTES,
    DD_AVRO_STRING,
    DD_AVRO_RECORD,
    DD_AVRO_ENUM,
    DD_AVRO_ARRAY,
    DD_AVRO_MAP,
    DD_AVRO_UNION,
    DD_AVRO_FIXED,
} dd_avro_type_t;

typedef struct dd_avro_node_s dd_avro_node_t;

typedef struct {
    char *name; /* NUL-terminated, [A-Za-z_][A-Za-z0-9_]* */
    size_t name_len;
    dd_avro_node_t *type;
} dd_avro_field_t;

/* One type of the schema. Named types (record, enum, fixed) appear once and
 * are pointed at wherever the schema names them, so a tree may be cyclic
 * (a record holding a union of null and itself). */
struct dd_avro_node_s {
    dd_avro_type_t type;
    int decimal;    /* bytes or fixed with logicalType decimal */
    int scale;      /* decimal: digits after the point */
    char *fullname; /* record, enum, fixed: "namespace.name" */
    char *space;    /* record, enum, fixed: its namespace, "" for none */
    size_t size;    /* fixed: bytes */
    size_t cnt;     /* record: fields; enum: symbols; union: branches */
    dd_avro_field_t *fields;
    char **symbols; /* enum, cnt NUL-terminated names */
    size_t *symbol_lens;
    dd_avro_node_t **branches;  /* union */
    dd_avro_node_t *items;      /* array: the items'; map: the values' */
    size_t min_size;            /* fewest bytes a datum of this type takes */
    int tagged;                 /* union: a value is written {"branch name": value} */
    int written;                /* named: defined already in the canonical form being made */
    dd_avro_node_t *next_alloc; /* every node of the schema, for destroy */
};

struct dd_avro_schema_s {
    dd_avro_node_t *root;
    dd_avro_node_t *nodes; /* linked by next_alloc */
    unsigned char fingerprint[DD_AVRO_FINGERPRINT_LEN];
};

/* The name a tagged union writes a branch's value under: a primitive's,
 * "array", "map", or a named type's full name (dd_avro_pcf.c). */
const char *dd_avro_branch_name(const dd_avro_node_t *node);

/* The schema's fingerprint (dd_avro.h), into schema->fingerprint. Returns
 * 0 or DD_ERR_NOMEM. */
int dd_avro_pcf_fingerprint(dd_avro_schema_t *schema);

#endif /* DD_AVRO_INT_H */
