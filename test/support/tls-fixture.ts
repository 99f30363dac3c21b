import { readFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';

const DIR = path.join(__dirname, 'tls');

/**
 * A self-signed P-256 certificate for `localhost` and `127.0.0.1`, valid 2020 to 2120, and its
 * key (PEM, in `tls/`): test servers only. It signs itself (CA:TRUE), so trusting it is enough
 * to verify a server presenting it.
 */
export const TEST_TLS = {
  key: readFileSync(path.join(DIR, 'localhost-key.pem'), 'utf8'),
  cert: readFileSync(path.join(DIR, 'localhost-cert.pem'), 'utf8'),
};

/**
 * Adds {@link TEST_TLS}'s certificate to the CAs this process's TLS clients trust by default,
 * as NODE_EXTRA_CA_CERTS does for a process that starts with it, so code under test verifies
 * a local HTTPS server without an option of its own.
 *
 * @returns a function that restores the previous defaults
 */
export function trustTestCertificate(): () => void {
  const before = tls.getCACertificates('default');
  tls.setDefaultCACertificates([...before, TEST_TLS.cert]);
  return () => tls.setDefaultCACertificates(before);
}
