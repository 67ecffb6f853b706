/* stub: being written */
#include "dd_http.h"
#include "dd_common.h"
int dd_http_start(dd_http_t **httpp, const dd_conf_t *conf, dd_pipeline_t *pl, char *errstr,
                  size_t errstr_size)
{
    *httpp = NULL;
    return DD_OK;
}
void dd_http_stop(dd_http_t *http) {}
