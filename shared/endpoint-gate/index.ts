/**
 * The endpoint gate (docs/design.md §6.4, §6.5; §14.1, `rate_limit_per_s`): per gate key,
 * shared by every worker through Redis, the concurrency cap, the circuit breaker, the rate
 * limit, the jobs parked behind them and the FIFO line's head; its keys live in the gate key's
 * queue partition. Its Lua scripts are in lua/.
 */
export * from './circuit-state';
export * from './delivery-gate';
export * from './gate-keys';
export * from './rate-limiter';
