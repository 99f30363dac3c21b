/**
 * PORTAL_FRAME_ANCESTORS (docs/design.md §2, §11.6): the origins that may embed the portal page in an
 * iframe, written into its `Content-Security-Policy: frame-ancestors` (CSP Level 3
 * host-source, https://www.w3.org/TR/CSP3/#grammardef-host-source). Origins only:
 * `http(s)://host[:port]`, where the host may start with `*.` (any subdomain) and the port may
 * be `*`. Anything else (a bare `*`, a scheme alone, a path, a quoted keyword, a `;`) is
 * refused, so the value can neither widen the policy to every site nor add a directive.
 *
 * @param raw - origins separated by spaces or commas
 * @returns the origins, lower-cased, without repeats, in the order given
 * @throws Error naming the first entry that is not an origin
 */
export function parseFrameAncestors(raw: string): string[] {
  const entries = raw.split(/[\s,]+/).filter(Boolean);
  for (const entry of entries) {
    if (!ORIGIN.test(entry)) throw new Error(`${entry} is not an origin such as https://app.example.com or https://*.example.com:8443`);
  }
  return [...new Set(entries.map((entry) => entry.toLowerCase()))];
}

const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const HOST = `(?:\\*\\.)?${LABEL}(?:\\.${LABEL})*|\\[[0-9A-Fa-f:.]+\\]`;
const ORIGIN = new RegExp(`^https?://(?:${HOST})(?::(?:\\d{1,5}|\\*))?$`);
