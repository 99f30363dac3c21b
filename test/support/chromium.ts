/**
 * The Chromium the browser tests drive: Debian's package, which `npm test` installs when it
 * is missing (scripts/test-prerequisites.sh), or the executable CHROMIUM_PATH names.
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Headless, and nothing that reaches past 127.0.0.1 (updates, sync, QUIC probes). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
