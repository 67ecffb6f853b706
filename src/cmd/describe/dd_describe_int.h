/*
 * `dedupd describe`, inside: the AsyncAPI document of one route is built as
 * a cJSON tree (dd_describe_doc.c) from the configuration, the parsed key
 * templates, the settings' and reasons' tables and, for an Avro route, the
 * writer schema from the registry; it is then written as JSON or YAML
 * (dd_describe_out.c). Nothing in it depends on where dedupd runs
 * (brokers, database, workers), so the document changes only when the
 * contract does.
 */
#ifndef DD_DESCRIBE_INT_H
#define DD_DESCRIBE_INT_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "dd_conf.h"
#include "dd_handler.h"

/* What the document says of a route's handler, beyond the configuration:
 * its mode, and for a handler that ships with dedupd, what the downstream
 * sees of a call. */
typedef struct {
    const dd_conf_t *conf;
    int route;             /* index in conf->routes */
    const dd_handler_t *h; /* the route's handler, loaded; NULL: not loaded */
    /* an Avro route's writer schemas, per topic of the route: the latest
     * version of subject <topic>-value (JSON text), or NULL (a pattern, or
     * not an Avro route) */
    char **avro;
    const int *avro_version;
} dd_describe_in_t;

/* The AsyncAPI 3.0 document of in's route (NULL when out of memory, or
 * with errstr when a template cannot be compiled). The caller deletes it. */
cJSON *dd_describe_doc(const dd_describe_in_t *in, char *errstr, size_t errstr_size);

/* Writes item as JSON, indented by two spaces. */
void dd_describe_json(FILE *out, const cJSON *item);

/* Writes item as YAML (block style; every string double-quoted, so no
 * value is read back as another type). */
void dd_describe_yaml(FILE *out, const cJSON *item);

#endif /* DD_DESCRIBE_INT_H */
