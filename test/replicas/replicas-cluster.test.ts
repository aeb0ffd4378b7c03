/**
 * The main replica suite (replicas.test.ts) on a real 3-master Redis Cluster (issue 17):
 * every session, stream, lease and mailbox key of a user in one hash slot, replay logs
 * appended per slot, stream events over sharded pub/sub, replica messages over classic
 * pub/sub. Each test file runs in a process of its own, so the variable stays here.
 */
process.env.SWITCHBOARD_TEST_REDIS_TOPOLOGY = 'cluster';
await import('./replicas.test.js');
