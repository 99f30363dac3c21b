import type { Config } from '../../config';
import { createPrivateAllowlist, type PrivateAllowlist } from '../../config/private-allowlist';
import type { EndpointAuth } from '../../db';
import { InvalidEndpointError } from '../errors';

/** The deployment's part in the endpoint rules: whether credentials must travel over https, and how many endpoints a user may own. */
export interface EndpointRules {
  /** NODE_ENV=production: an endpoint with `auth` needs https for `url` and `token_url`. */
  httpsForAuth: boolean;
  /** Hosts exempt from that (WEBHOOK_PRIVATE_ALLOWLIST: a listed hostname, or an IP literal in a listed CIDR). */
  allowlist: PrivateAllowlist;
  /** MAX_ENDPOINTS_PER_USER: endpoints one user may own at once (operator endpoints are not counted). */
  maxEndpointsPerUser: number;
}

/** MAX_ENDPOINTS_PER_USER's default. */
const DEFAULT_MAX_ENDPOINTS_PER_USER = 100;

/** Outside production: no https requirement; the default endpoint limit. */
export const DEVELOPMENT_RULES: EndpointRules = {
  httpsForAuth: false,
  allowlist: createPrivateAllowlist([]),
  maxEndpointsPerUser: DEFAULT_MAX_ENDPOINTS_PER_USER,
};

/** The rules of a process's configuration. */
export function endpointRulesOf(config: Pick<Config, 'nodeEnv' | 'webhookPrivateAllowlist' | 'maxEndpointsPerUser'>): EndpointRules {
  return {
    httpsForAuth: config.nodeEnv === 'production',
    allowlist: createPrivateAllowlist(config.webhookPrivateAllowlist),
    maxEndpointsPerUser: config.maxEndpointsPerUser,
  };
}

/** An endpoint's credentials and where they go, as a create or a change leaves them. */
export interface EndpointCredentials {
  url: string;
  headers: Record<string, string>;
  auth: EndpointAuth | null;
  clientCert: string | null;
}

/**
 * The rules between an endpoint's fields (docs/design.md §14.4): `auth` brings its own
 * Authorization, so a stored `authorization` header would be overwritten (400 naming both); a
 * client certificate needs an https `url` (mutual TLS); in production, `url` and
 * `auth.token_url` of an endpoint with `auth` are https unless their host is allowlisted.
 *
 * @throws InvalidEndpointError naming the field
 */
export function assertCredentialsFit(endpoint: EndpointCredentials, rules: EndpointRules): void {
  if (endpoint.auth && endpoint.headers.authorization !== undefined) {
    throw new InvalidEndpointError('auth: cannot be set together with headers.authorization (the worker sends Authorization: Bearer); remove the header.');
  }
  if (endpoint.clientCert !== null && !isHttps(endpoint.url)) {
    throw new InvalidEndpointError('client_certificate: needs an https url; mutual TLS cannot run over http.');
  }
  if (!endpoint.auth || !rules.httpsForAuth) return;
  for (const [field, url] of [['url', endpoint.url], ['auth.token_url', endpoint.auth.token_url]] as const) {
    if (!isHttps(url) && !allowlisted(url, rules.allowlist)) {
      throw new InvalidEndpointError(`${field}: must be https for an endpoint with auth in production, unless its host is in WEBHOOK_PRIVATE_ALLOWLIST.`);
    }
  }
}

function isHttps(url: string): boolean {
  return url.toLowerCase().startsWith('https:');
}

function allowlisted(url: string, allowlist: PrivateAllowlist): boolean {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  return allowlist.allowsHost(host) || allowlist.allowsAddress(host);
}
