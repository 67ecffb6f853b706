/*
 * The configuration tests' fixture: each test gets a fresh directory
 * (tmpdir, resolved as the loader resolves it) and loads the text it
 * writes to confpath there; errstr holds the loader's error.
 */
#ifndef DD_CONF_FIXTURE_H
#define DD_CONF_FIXTURE_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "dd_conf.h"

static char tmpdir[PATH_MAX];
static char confpath[PATH_MAX + 32];
static char errstr[PATH_MAX + 2048];

/* Makes /tmp/dd_test_<name>.XXXXXX the test's directory. */
static inline void conf_fixture_setup(const char *name)
{
    char made[PATH_MAX];

    snprintf(made, sizeof(made), "/tmp/dd_test_%s.XXXXXX", name);
    ck_assert_ptr_nonnull(mkdtemp(made));
    ck_assert_ptr_nonnull(realpath(made, tmpdir));
    snprintf(confpath, sizeof(confpath), "%s/dedupd.conf", tmpdir);
    errstr[0] = '\0';
}

/* Removes the test's directory with whatever it wrote there. */
static inline void conf_fixture_teardown(void)
{
    char cmd[PATH_MAX + 16];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static inline void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    ck_assert_ptr_nonnull(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Writes text as the config file and loads it; *errp (when errp is not
 * NULL) gets the result, and a failed load leaves no configuration. */
static inline dd_conf_t *load(const char *text, int *errp)
{
    dd_conf_t *conf = (dd_conf_t *)1;
    int err;

    write_file(confpath, text);
    err = dd_conf_load(&conf, confpath, errstr, sizeof(errstr));
    if (errp) *errp = err;
    if (err) ck_assert_ptr_null(conf);
    return conf;
}

static inline dd_conf_t *load_ok(const char *text)
{
    int err;
    dd_conf_t *conf = load(text, &err);

    ck_assert_msg(err == 0, "load failed: %s", errstr);
    return conf;
}

#endif /* DD_CONF_FIXTURE_H */
