/** `"<ErrorName>: <message>"` of what `fn` throws, or `"no error"`: one string to assert on. */
export function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
  return 'no error';
}
