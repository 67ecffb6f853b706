/*
 * The runner every unit test's main() ends with: runs suite s (taking
 * it), and returns the process's exit status.
 */
#ifndef DD_CHECK_RUN_H
#define DD_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int dd_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* DD_CHECK_RUN_H */
