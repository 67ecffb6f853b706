/*
 * Test handler that exports no dedupd_handler_v1 symbol (e.g. a shared object
 * given by mistake): loading it must fail with a message naming the symbol.
 */
#include "dedupd/handler.h"

/* A public symbol with a different name, so the object is not empty. */
int th_no_symbol_marker(void);

int th_no_symbol_marker(void)
{
    return 42;
}
