/*
 * A small configuration for unit tests of the parts that talk to the
 * database: the group, the database's socket (one that does not exist
 * when nobody is to answer) and the handler (a module in
 * DD_TEST_HANDLER_DIR) are the test's, and extra adds settings.
 */
#ifndef DD_UNIT_CONF_H
#define DD_UNIT_CONF_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dd_common.h"
#include "dd_conf.h"

static inline dd_conf_t *unit_conf(const char *group, const char *socket, const char *handler,
                                   const char *extra, char *errstr, size_t errlen)
{
    const char *dir = getenv("DD_TEST_HANDLER_DIR");
    char path[] = "/tmp/dd-unit-conf-XXXXXX";
    dd_conf_t *conf = NULL;
    FILE *f;
    int fd;

    ck_assert_msg(dir != NULL, "DD_TEST_HANDLER_DIR is not set");
    ck_assert_int_ge(fd = mkstemp(path), 0);
    ck_assert_ptr_nonnull(f = fdopen(fd, "w"));
    fprintf(f,
            "kafka = { brokers = \"127.0.0.1:1\"; group = \"%s\"; topics = [\"t\"]; };\n"
            "mysql = { socket = \"%s\"; user = \"root\"; database = \"mysql\";\n"
            "          connect_timeout = \"2s\"; };\n"
            "dedup = { key = \"k:${id}\"; };\n"
            "handler = { path = \"%s/%s.so\"; };\n"
            "%s\n",
            group, socket, dir, handler, extra);
    fclose(f);
    ck_assert_msg(dd_conf_load(&conf, path, errstr, errlen) == DD_OK, "%s", errstr);
    unlink(path);
    return conf;
}

#endif /* DD_UNIT_CONF_H */
