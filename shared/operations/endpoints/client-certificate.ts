import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { InvalidEndpointError } from '../errors';
import { MASKED } from './headers';

/** A client certificate as the API shows it (docs/design.md §14.4): never the key, nor the PEM. */
export interface ClientCertificateView {
  /** The subject's distinguished name, RDNs joined by ", " (`CN=sender.example`). */
  subject: string;
  /** When the certificate expires, ISO 8601; null for a stored certificate that no longer parses. */
  not_after: string | null;
}

/** A PEM certificate (a chain: the client's first) and its private key, as stored. */
export interface ClientCertificatePem {
  cert: string;
  key: string;
}

/** At most this many characters of PEM each: a chain of a few certificates, an RSA-4096 key. */
const PEM_MAX_LENGTH = 16_384;
const PEM_CERTIFICATE = /^\s*-----BEGIN CERTIFICATE-----/;
const PEM_PRIVATE_KEY = /^\s*-----BEGIN (?:RSA |EC )?PRIVATE KEY-----/;

/** The API's view of a stored certificate. */
export function presentClientCertificate(cert: string | null | undefined): ClientCertificateView | null {
  if (!cert) return null;
  try {
    const parsed = new X509Certificate(cert);
    return { subject: parsed.subject.split('\n').join(', '), not_after: new Date(parsed.validTo).toISOString() };
  } catch {
    // Written by hand or by an older rule: shown as such rather than failing every read.
    return { subject: 'unreadable certificate', not_after: null };
  }
}

/**
 * An endpoint's `client_certificate` as it is stored (docs/design.md §14.4): null, or
 * `{cert, key}` in PEM, the certificate (optionally followed by its chain) and an unencrypted
 * private key that matches it. A PATCH may send the key as {@link MASKED} to keep the stored
 * one (a renewed certificate for the same key).
 *
 * @param storedKey - the endpoint's current key (null on create or when none is stored)
 * @throws InvalidEndpointError naming `client_certificate.cert` or `.key`: missing, too long,
 *   not PEM, not parsable (an encrypted key included), a key that does not match the
 *   certificate, or a masked key with none to keep
 */
export function normalizeClientCertificate(input: unknown, storedKey: string | null): ClientCertificatePem | null {
  if (input === null) return null;
  if (typeof input !== 'object' || Array.isArray(input)) throw new InvalidEndpointError('client_certificate: must be {cert, key} in PEM, or null.');
  const fields = input as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((name) => name !== 'cert' && name !== 'key');
  if (unknown.length > 0) throw new InvalidEndpointError(`client_certificate: unknown ${unknown.length === 1 ? 'field' : 'fields'} ${unknown.join(', ')}.`);
  const cert = pem(fields, 'cert');
  let key = pem(fields, 'key');
  if (key === MASKED) {
    if (storedKey === null) throw new InvalidEndpointError('client_certificate.key: there is no stored key to keep; send its value.');
    key = storedKey;
  }
  const certificate = parseCertificate(cert);
  const privateKey = parseKey(key);
  if (!certificate.checkPrivateKey(privateKey)) throw new InvalidEndpointError('client_certificate.key: does not match the certificate.');
  return { cert, key };
}

/** A stored key a change carries over without giving it again: when it leaves `client_certificate` out, or sends the key as {@link MASKED}. */
export function maskedKeyKept(storedKey: string | null, given: unknown): string[] {
  if (storedKey === null || given === null) return [];
  const key = typeof given === 'object' && !Array.isArray(given) ? (given as Record<string, unknown> | undefined)?.key : undefined;
  return given === undefined || key === MASKED ? ['client_certificate.key'] : [];
}

function pem(fields: Record<string, unknown>, name: 'cert' | 'key'): string {
  const value = fields[name];
  if (typeof value !== 'string' || value === '') throw new InvalidEndpointError(`client_certificate.${name}: a PEM string is required.`);
  if (value.length > PEM_MAX_LENGTH) throw new InvalidEndpointError(`client_certificate.${name}: at most ${PEM_MAX_LENGTH} characters.`);
  return value;
}

function parseCertificate(cert: string): X509Certificate {
  try {
    if (!PEM_CERTIFICATE.test(cert)) throw new Error('no BEGIN CERTIFICATE line');
    return new X509Certificate(cert);
  } catch (error) {
    throw new InvalidEndpointError('client_certificate.cert: not a PEM certificate (-----BEGIN CERTIFICATE-----).', { cause: error });
  }
}

function parseKey(key: string): KeyObject {
  try {
    if (!PEM_PRIVATE_KEY.test(key)) throw new Error('no BEGIN PRIVATE KEY line');
    return createPrivateKey({ key, format: 'pem' });
  } catch (error) {
    throw new InvalidEndpointError('client_certificate.key: not an unencrypted PEM private key (-----BEGIN PRIVATE KEY-----).', { cause: error });
  }
}
