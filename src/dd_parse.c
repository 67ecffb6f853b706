/*
 * Message parsing and key derivation (see dd_parse.h). The rules are the
 * ones of dd_pipeline_route(): same checks, same order, same reasons.
 */
#include "dd_parse.h"

#include <stdio.h>

#include "dd_common.h"

static int dd_parse_only_space(const char *p, const char *end)
{
    for (; p && p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') return 0;
    return 1;
}

/* Strict JSON: valid UTF-8, one value, nothing but whitespace after it. */
static cJSON *dd_parse_json(const void *payload, size_t len, char *errstr, size_t errstr_size)
{
    const char *text = payload, *end = NULL;
    cJSON *json;

    if (!payload || len == 0) {
        dd_errstr_set(errstr, errstr_size, "empty payload");
        return NULL;
    }
    if (!dd_utf8_valid(payload, len)) {
        dd_errstr_set(errstr, errstr_size, "payload is not valid UTF-8");
        return NULL;
    }
    json = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (json && !dd_parse_only_space(end, text + len)) {
        /* cJSON stops after the first value: "{...}}" or "null," are not JSON. */
        dd_errstr_set(errstr, errstr_size, "invalid JSON: trailing data at byte %ld",
                      (long)(end - text));
        cJSON_Delete(json);
        return NULL;
    }
    if (!json) {
        const char *at = cJSON_GetErrorPtr();
        long pos = at ? (long)(at - text) : -1;
        if (pos < 0 || (size_t)pos > len) pos = -1;
        dd_errstr_set(errstr, errstr_size, "invalid JSON near byte %ld", pos);
    }
    return json;
}

int dd_parse_message(const dd_conf_t *conf, const dd_key_tmpl_t *tmpl, const void *payload,
                     size_t len, cJSON **jsonp, char key[DD_KEY_MAX + 1], size_t *key_len,
                     dd_reason_t *reason, char *errstr, size_t errstr_size)
{
    dd_key_status_t ks;

    *jsonp = NULL;
    *key_len = 0;
    if ((int64_t)len > conf->dedup.max_payload_bytes) {
        dd_errstr_set(errstr, errstr_size, "payload is %zu bytes, at most %lld allowed", len,
                      (long long)conf->dedup.max_payload_bytes);
        *reason = DD_REASON_PAYLOAD_TOO_LARGE;
        return DD_ERR_PERMANENT;
    }
    *jsonp = dd_parse_json(payload, len, errstr, errstr_size);
    if (!*jsonp) {
        *reason = DD_REASON_BAD_JSON;
        return DD_ERR_PERMANENT;
    }
    ks = dd_key_render(tmpl, *jsonp, key, key_len, errstr, errstr_size);
    if (ks != DD_KEY_OK) {
        *key_len = 0; /* no usable business key */
        key[0] = '\0';
        cJSON_Delete(*jsonp);
        *jsonp = NULL;
        *reason = ks == DD_KEY_MISSING ? DD_REASON_KEY_MISSING : DD_REASON_KEY_TOO_LONG;
        return DD_ERR_PERMANENT;
    }
    return DD_OK;
}
