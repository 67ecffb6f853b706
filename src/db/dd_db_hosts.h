/*
 * mysql.hosts: the nodes of one cluster as "host:port[,host:port...]", the
 * form kafka.brokers has. dd_db tries them in turn (see dd_db.c); these
 * read the list.
 */
#ifndef DD_DB_HOSTS_H
#define DD_DB_HOSTS_H

#include <stddef.h>

/* How many nodes hosts names (0 for NULL or empty). */
int dd_db_hosts_count(const char *hosts);
/* Node i of hosts: its host into host, its port (3306 when not given)
 * into *port. Returns 0, or DD_ERR_CONFIG (errstr) for an element that is
 * not host[:port] with a port of 1-65535. */
int dd_db_hosts_get(const char *hosts, int i, char *host, size_t host_size, int *port, char *errstr,
                    size_t errstr_size);

#endif /* DD_DB_HOSTS_H */
