/*
 * Reading mysql.hosts ("host:port[,host:port...]"). A bracketed IPv6
 * address keeps its colons: "[::1]:3306".
 */
#include "dd_db_hosts.h"

#include <stdlib.h>
#include <string.h>

#include "dd_common.h"

int dd_db_hosts_count(const char *hosts)
{
    int n = 0;

    for (const char *p = hosts; p && *p; p++)
        if (*p != ',' && *p != ' ' && (p == hosts || p[-1] == ',' || p[-1] == ' ')) n++;
    return n;
}

/* The i-th element's text (without the spaces around it) in [*a, *b). */
static int dd_db_hosts_elem(const char *hosts, int i, const char **a, const char **b)
{
    const char *p = hosts;

    for (int k = 0; p && *p; k++) {
        while (*p == ',' || *p == ' ')
            p++;
        if (!*p) break;
        *a = p;
        while (*p && *p != ',' && *p != ' ')
            p++;
        *b = p;
        if (k == i) return 1;
    }
    return 0;
}

int dd_db_hosts_get(const char *hosts, int i, char *host, size_t host_size, int *port, char *errstr,
                    size_t errstr_size)
{
    const char *a, *b, *colon = NULL;
    size_t len;
    long v = 3306;
    char *end;

    if (!dd_db_hosts_elem(hosts, i, &a, &b)) goto bad;
    if (*a == '[') { /* [v6]:port */
        const char *close = memchr(a, ']', (size_t)(b - a));
        if (!close) goto bad;
        colon = close + 1 < b && close[1] == ':' ? close + 1 : NULL;
        if (!colon && close + 1 != b) goto bad;
        a++;
        len = (size_t)(close - a);
    } else {
        colon = memchr(a, ':', (size_t)(b - a));
        len = (size_t)((colon ? colon : b) - a);
    }
    if (colon) {
        v = strtol(colon + 1, &end, 10);
        if (end != b || v < 1 || v > 65535) goto bad;
    }
    if (len == 0 || len >= host_size) goto bad;
    memcpy(host, a, len);
    host[len] = '\0';
    *port = (int)v;
    return DD_OK;
bad:
    dd_errstr_set(errstr, errstr_size,
                  "mysql.hosts \"%s\": element %d is not host[:port] (port 1-65535)", hosts, i + 1);
    return DD_ERR_CONFIG;
}
