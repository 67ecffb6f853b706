/*
 * libFuzzer target for the config loader.
 *
 * The loader reads files (errors must say FILE:LINE, which config_read_string
 * cannot), so each input is written to a temporary file, loaded and
 * destroyed. Anything the loader allocates must be freed by dd_conf_destroy()
 * or on its error paths; LeakSanitizer checks that.
 *
 * Inputs with @include are skipped: they would make libconfig read arbitrary
 * files (/dev/zero never ends), which tests the file system, not dedupd.
 *
 * Build and run (from the source root):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc/base \
 *     -Isrc/key -Isrc/conf tests/fuzz/fuzz_conf.c src/conf/dd_conf*.c src/base/dd_shard.c \
 *     src/base/dd_log.c src/base/dd_common.c src/base/dd_utf8.c src/base/dd_text.c \
 *     src/key/dd_json.c src/key/dd_canon.c src/key/dd_jpath.c src/key/dd_key.c \
 *     $(pkg-config --cflags --libs libconfig rdkafka libcjson libcrypto) -o /tmp/fuzz_conf
 *   cp -r tests/fuzz/corpus/conf /tmp/fuzz_conf_corpus
 *   /tmp/fuzz_conf -max_total_time=60 /tmp/fuzz_conf_corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dd_conf.h"

/* libconfig 1.5's scanner leaks the string it is building when a syntax
 * error follows it (`a = "x"s`, `a = "x""";`): reproducible with libconfig
 * alone (config_read_string + config_destroy), nothing dd_conf can free. Only
 * allocations made by the scanner are suppressed; a tree dd_conf forgot to
 * config_destroy() is allocated by the parser and would still be reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:strbuf_append\n"
           "leak:libconfig_yylex\n";
}

/* Writes data to a new temporary file; its name goes to path. A file per
 * input, removed after the load, leaves nothing behind however the fuzzer
 * exits. */
static int fuzz_write(const uint8_t *data, size_t size, char *path, size_t path_size)
{
    size_t off = 0;
    int fd;

    snprintf(path, path_size, "/tmp/dd_fuzz_conf.XXXXXX");
    if ((fd = mkstemp(path)) < 0) return -1;
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);

        if (n <= 0) break;
        off += (size_t)n;
    }
    close(fd);
    return off == size ? 0 : -1;
}

/* The duration parser also gets every input, as a string. */
static void fuzz_duration(const uint8_t *data, size_t size)
{
    char *s = strndup((const char *)data, size);
    int64_t ms;

    if (s) {
        dd_conf_parse_duration_ms(s, &ms);
        free(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dd_conf_t *conf = NULL;
    char errstr[512], path[64];
    int err;

    fuzz_duration(data, size);
    if (memmem(data, size, "@include", 8)) return 0;
    if (fuzz_write(data, size, path, sizeof(path)) != 0) abort();
    err = dd_conf_load(&conf, path, errstr, sizeof(errstr));
    unlink(path);
    if (err == 0 && !conf) abort();
    if (err != 0 && (conf || errstr[0] == '\0')) abort(); /* a failure leaves NULL and says why */
    dd_conf_destroy(conf);
    return 0;
}
