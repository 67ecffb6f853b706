/*
 * `dedupd mock-kafka`: hosts librdkafka's mock cluster (real Kafka protocol
 * over TCP) for scripts, tests, the demo and the bench.
 */
#ifndef DD_MOCK_H
#define DD_MOCK_H

/* argv[0] is "mock-kafka". Returns the process exit code. */
int dd_mock_main(int argc, char **argv);

#endif /* DD_MOCK_H */
