import type { Cluster, Redis } from 'ioredis';

/**
 * Every Redis connection of this system: one Redis (REDIS_URL), the primary a set of Redis
 * Sentinels names (REDIS_SENTINELS), or a Redis Cluster (REDIS_CLUSTER_NODES, docs/design.md §13.1).
 * All speak the same commands; code that needs more than commands (`nodes()`, `duplicate()`)
 * checks `isCluster` (index.ts).
 */
export type RedisClient = Redis | Cluster;
