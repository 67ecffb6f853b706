/* stub: being written */
#include <stdio.h>
#include "dd_replay.h"
int dd_replay_main(int argc, char **argv) { fprintf(stderr, "not yet\n"); return 1; }
