/**
 * Everything one benchmark opened (processes, databases, Redis keys, temporary folders), closed
 * in reverse order by `close()`, even when the benchmark failed half-way. Open scopes are also
 * closed when the run is interrupted (see {@link closeAllScopes}).
 */
export class Scope {
  private readonly closers: Array<{ label: string; close: () => Promise<void> }> = [];

  constructor() {
    openScopes.add(this);
  }

  /** Registers `close` to run when the scope closes; the label names it in error messages. */
  add(label: string, close: () => Promise<void>): void {
    this.closers.push({ label, close });
  }

  /** Runs every closer, last added first; a failing closer is reported and the rest still run. */
  async close(): Promise<void> {
    openScopes.delete(this);
    while (this.closers.length > 0) {
      const { label, close } = this.closers.pop()!;
      try {
        await close();
      } catch (error) {
        process.stderr.write(`bench: cleanup of ${label} failed: ${(error as Error).message}\n`);
      }
    }
  }
}

const openScopes = new Set<Scope>();

/** Closes every scope still open, newest first: used when the run is interrupted. */
export async function closeAllScopes(): Promise<void> {
  for (const scope of [...openScopes].reverse()) await scope.close();
}

/**
 * On SIGINT or SIGTERM, closes every open scope (stopping child processes, dropping databases
 * and Redis keys) before exiting, so an interrupted run leaves nothing behind.
 */
export function closeScopesOnSignal(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`bench: ${signal}, cleaning up\n`);
      void closeAllScopes().finally(() => process.exit(130));
    });
  }
}

/** Runs `work` with a scope of its own, closed (its processes stopped) as soon as `work` is done or fails. */
export async function withScope<T>(work: (scope: Scope) => Promise<T>): Promise<T> {
  const scope = new Scope();
  try {
    return await work(scope);
  } finally {
    await scope.close();
  }
}
