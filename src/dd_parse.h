/*
 * The parse step shared by `dedupd run` and `dedupd replay`: payload size,
 * UTF-8, strict JSON (no trailing data) and the business key.
 *
 * Replay must judge a message exactly as the pipeline would, or it would
 * report keys as missing that the pipeline dead-letters (and the other way
 * round). Keeping the rules in one function keeps the two from drifting.
 */
#ifndef DD_PARSE_H
#define DD_PARSE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "dd_conf.h"
#include "dd_key.h"
#include "dd_pipeline.h"

/* Parses payload and renders its business key into key (*key_len bytes).
 * Returns DD_OK with *jsonp set (the caller owns it), or DD_ERR_PERMANENT
 * with *reason (bad_json, key_missing, key_too_long, payload_too_large),
 * why it failed in errstr, *jsonp NULL and *key_len 0. */
int dd_parse_message(const dd_conf_t *conf, const dd_key_tmpl_t *tmpl, const void *payload,
                     size_t len, cJSON **jsonp, char key[DD_KEY_MAX + 1], size_t *key_len,
                     dd_reason_t *reason, char *errstr, size_t errstr_size);

#endif /* DD_PARSE_H */
