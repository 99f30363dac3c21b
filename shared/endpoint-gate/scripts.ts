import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RedisClient } from '../redis';

/** The gate's Lua scripts, as ioredis custom commands (EVALSHA with an EVAL fallback). */
export type GateScriptClient = RedisClient & {
  webhookGateAcquire(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  webhookGateRelease(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<(number | string)[]>;
  webhookRateReserve(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
  webhookRateStart(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
};

/** Where the scripts live: beside this module, in the sources and in dist/ alike (the build copies them). */
const LUA_DIR = path.join(__dirname, 'lua');
const INCLUDE = /^--- @include "([\w/-]+)"$/gm;

/**
 * A script's text with its includes in place, as BullMQ writes them: a line
 * `--- @include "includes/<name>"` stands for `lua/includes/<name>.lua`.
 *
 * @throws the file system's error for a script or include that is missing
 */
function loadScript(name: string): string {
  return readFileSync(path.join(LUA_DIR, `${name}.lua`), 'utf8').replace(INCLUDE, (_, include: string) =>
    readFileSync(path.join(LUA_DIR, `${include}.lua`), 'utf8'),
  );
}

/** Read once, when the module loads (a process's start), never per call. */
const SCRIPTS = {
  webhookGateAcquire: loadScript('acquire'),
  webhookGateRelease: loadScript('release'),
  webhookRateReserve: loadScript('reserve-rate-slot'),
  webhookRateStart: loadScript('start-attempt'),
};

/**
 * Defines the gate's commands on a connection once (a later call on it is a no-op).
 * @returns the same connection, typed with the commands
 */
export function withGateScripts(redis: RedisClient): GateScriptClient {
  const client = redis as GateScriptClient;
  if (typeof client.webhookGateAcquire !== 'function') {
    for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { lua });
  }
  return client;
}
