/*
 * librdkafka properties for every Kafka client dedupd creates (the
 * consumer, the dead-letter producer, replay's reader, check's probe):
 * kafka.properties first, then what each client fixes for itself. Errors
 * name the property, never a value that may be a secret.
 */
#include "dd_conf.h"

#include <stdio.h>
#include <string.h>

#include "dd_common.h"

int dd_conf_kafka_set(rd_kafka_conf_t *kconf, const char *name, const char *value, char *errstr,
                      size_t errstr_size)
{
    char err[512];

    if (rd_kafka_conf_set(kconf, name, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        dd_errstr_set(errstr, errstr_size, "kafka property %s: %s", name, err);
        return DD_ERR_CONFIG;
    }
    return DD_OK;
}

int dd_conf_kafka_set_prop(rd_kafka_conf_t *kconf, const char *prop, char *errstr,
                           size_t errstr_size)
{
    const char *eq = strchr(prop, '=');
    char name[256];

    if (!eq || eq == prop || (size_t)(eq - prop) >= sizeof(name)) {
        /* not shown: without its name, nothing says whether it is a secret */
        dd_errstr_set(errstr, errstr_size, "a kafka property is not of the form name=value");
        return DD_ERR_CONFIG;
    }
    snprintf(name, sizeof(name), "%.*s", (int)(eq - prop), prop);
    return dd_conf_kafka_set(kconf, name, eq + 1, errstr, errstr_size);
}

int dd_conf_kafka_apply(const dd_conf_t *conf, rd_kafka_conf_t *kconf,
                        int (*skip)(const char *prop), char *errstr, size_t errstr_size)
{
    int rc = DD_OK;

    /* Every entry was checked by librdkafka when the file was loaded. */
    for (int i = 0; !rc && i < conf->kafka.property_cnt; i++) {
        const char *p = conf->kafka.properties[i];
        if (!(skip && skip(p))) rc = dd_conf_kafka_set_prop(kconf, p, errstr, errstr_size);
    }
    if (!rc)
        rc =
            dd_conf_kafka_set(kconf, "bootstrap.servers", conf->kafka.brokers, errstr, errstr_size);
    return rc;
}

int dd_conf_tombstones_parse(const char *name)
{
    if (!strcmp(name, "dead_letter")) return DD_CONF_TOMBSTONES_DEAD_LETTER;
    if (!strcmp(name, "skip")) return DD_CONF_TOMBSTONES_SKIP;
    return -1;
}
