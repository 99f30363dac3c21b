/** The URL's origin (scheme, host and port, as the URL standard compares them), or null for one that does not parse (never the same as a valid one). */
export function originOf(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}
