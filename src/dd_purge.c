/* stub: being written */
#include <stdio.h>
#include "dd_purge.h"
#include "dd_common.h"
int dd_purge_start(dd_purge_t **purgep, const dd_conf_t *conf, char *errstr, size_t errstr_size)
{
    *purgep = NULL;
    return DD_OK;
}
void dd_purge_stop(dd_purge_t *purge) {}
int64_t dd_purge_window_s(const dd_conf_t *conf) { return 0; }
int dd_purge_main(int argc, char **argv) { fprintf(stderr, "not yet\n"); return 1; }
int dd_stats_main(int argc, char **argv) { fprintf(stderr, "not yet\n"); return 1; }
