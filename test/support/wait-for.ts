type Falsy = false | null | undefined | 0 | '';

/**
 * Polls `check` every 25 ms until it returns a truthy value, and returns that value.
 * @param timeoutMs - how long to keep polling, ms
 * @param what - names the awaited condition in the timeout error
 * @throws Error `timed out after <timeoutMs> ms waiting for <what>` past the bound
 */
export async function waitFor<T>(
  check: () => Promise<T | Falsy> | T | Falsy,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<Exclude<T, Falsy>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Exclude<T, Falsy>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
