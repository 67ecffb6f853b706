/*
 * host->path_new, path_free and path_value (include/dedupd/handler.h,
 * "Payload values"): a handler reads a value of the payload exactly as the
 * business key and the request hash read it.
 *
 * cJSON's tree (msg->json) holds numbers as doubles, so a handler reading
 * an amount or an id from it may get another number than the one the key
 * and the hash were computed from. These functions read dedupd's own
 * document of the payload instead: the strict parser's (dd_json), which
 * keeps every digit and every byte, copied for each message at parse time
 * (dd_parse_message_into) so that it outlives the consumer's next parse.
 * A path is compiled once, with the key template's syntax (dd_jpath), so a
 * read is a few binary searches and no allocation.
 */
#include "dd_handler_int.h"

#include <stdlib.h>
#include <string.h>

#include "dd_common.h"
#include "dd_jpath.h"
#include "dd_json.h"

/* The handler's opaque dedupd_path is a compiled dd_jpath. */
struct dedupd_path {
    dd_jpath_t path;
};

dedupd_path *dd_handler_host_path_new(const dedupd_host *host, const char *text, size_t len,
                                      char *errstr, size_t errstr_size)
{
    dedupd_path *p = calloc(1, sizeof(*p));
    char err[DEDUPD_ERROR_SIZE];

    (void)host;
    if (!p) {
        dd_errstr_set(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if (!text || dd_jpath_parse(&p->path, text, len, 1, err, sizeof(err)) != DD_OK) {
        dd_errstr_set(errstr, errstr_size, "bad path \"%.*s\": %s", text ? (int)len : 0,
                      text ? text : "", text ? err : "no text");
        free(p);
        return NULL;
    }
    return p;
}

void dd_handler_host_path_free(const dedupd_host *host, dedupd_path *path)
{
    (void)host;
    if (!path) return;
    dd_jpath_release(&path->path);
    free(path);
}

/* The handler's view of a value dd_json found: its type and text. */
static void dd_handler_field_of(const dd_json_doc_t *doc, const dd_json_node_t *node,
                                dedupd_value *out)
{
    switch ((dd_json_type_t)node->type) {
    case DD_JSON_NULL:
        *out = (dedupd_value){DEDUPD_VALUE_NULL, "null", 4};
        return;
    case DD_JSON_FALSE:
        *out = (dedupd_value){DEDUPD_VALUE_FALSE, "false", 5};
        return;
    case DD_JSON_TRUE:
        *out = (dedupd_value){DEDUPD_VALUE_TRUE, "true", 4};
        return;
    case DD_JSON_NUMBER:
        *out = (dedupd_value){DEDUPD_VALUE_NUMBER, node->str, node->len};
        return;
    case DD_JSON_STRING:
        /* a string of no bytes may have no pointer: give it one */
        *out = (dedupd_value){DEDUPD_VALUE_STRING, node->len ? node->str : "", node->len};
        return;
    case DD_JSON_ARRAY:
    case DD_JSON_OBJECT:
        out->type = node->type == DD_JSON_ARRAY ? DEDUPD_VALUE_ARRAY : DEDUPD_VALUE_OBJECT;
        dd_json_value_text(doc, node, &out->text, &out->len);
        return;
    }
}

int dd_handler_host_path_value(const dedupd_host *host, const dedupd_msg *msg,
                               const dedupd_path *path, dedupd_value *out, char *errstr,
                               size_t errstr_size)
{
    const dd_json_doc_t *doc = msg ? (const dd_json_doc_t *)(const void *)msg->doc : NULL;
    const dd_json_node_t *node;
    int failed_at = 0;

    (void)host;
    *out = (dedupd_value){DEDUPD_VALUE_MISSING, NULL, 0};
    if (!doc || !path) {
        dd_errstr_set(errstr, errstr_size, "path_value: %s",
                      !path ? "no path"
                            : "this message has no payload document (msg->doc is NULL)");
        return -1;
    }
    if ((node = dd_jpath_lookup(&path->path, doc, &failed_at))) {
        dd_handler_field_of(doc, node, out);
        return 0;
    }
    if (errstr && errstr_size)
        dd_jpath_why_missing(&path->path, doc, failed_at, errstr, errstr_size);
    return 0;
}
