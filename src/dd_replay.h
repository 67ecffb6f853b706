/*
 * `dedupd replay`: reads a range of a topic with assign() (no group, no
 * commits) and compares each message's business key and request hash with
 * the dedup table, to reconcile the database against the topic; with
 * --apply, runs missing keys through the normal claim + handler transaction.
 */
#ifndef DD_REPLAY_H
#define DD_REPLAY_H

/* argv[0] is "replay". Returns the exit code. */
int dd_replay_main(int argc, char **argv);

#endif /* DD_REPLAY_H */
