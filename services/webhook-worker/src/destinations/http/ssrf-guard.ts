import { LookupAddress, LookupAllOptions, LookupOneOptions, lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { createPrivateAllowlist } from '../../../../../shared/config/private-allowlist';
import { BlockedTargetError } from './errors';

/**
 * IPv4 ranges a webhook must never reach when WEBHOOK_BLOCK_PRIVATE is on (docs/design.md §6.3): "this
 * network", private (RFC 1918), carrier-grade NAT, loopback, link-local, IETF protocol
 * assignments, documentation (TEST-NET-1..3), the deprecated 6to4 relay anycast, benchmarking,
 * multicast and reserved (IANA IPv4 Special-Purpose Address Registry).
 */
const NON_PUBLIC_V4 = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NON_PUBLIC_V4.addSubnet(network, prefix, 'ipv4');
}

/**
 * IPv6 ranges refused outright (IANA IPv6 Special-Purpose Address Registry). The ones that
 * carry an IPv4 address are refused whole rather than judged by that address, except the
 * NAT64 well-known prefix (see {@link embeddedIPv4}):
 * - `::/96` IPv4-compatible (`::a.b.c.d`, deprecated by RFC 4291; with `::` and `::1`) and
 *   `::ffff:0:0:0/96` IPv4-translated (RFC 2765): no public host is reached this way, and a
 *   stack may route them to the embedded IPv4 address, loopback and private ones included.
 * - `64:ff9b:1::/48` local-use NAT64 (RFC 8215): the operator picks where the IPv4 address
 *   sits, so it cannot be read reliably, and it exists to translate to internal networks.
 * - `2002::/16` 6to4 (deprecated by RFC 7526): a relay delivers to the embedded IPv4 address.
 * - `2001::/32` Teredo: the client's address is embedded obfuscated, reached through a relay.
 * - `fec0::/10` site-local (deprecated by RFC 3879): private by definition, like `fc00::/7`.
 * - `2001:10::/28` ORCHID (deprecated by RFC 7343) and `2001:20::/28` ORCHIDv2 (RFC 7343): the
 *   registry calls ORCHIDv2 globally reachable, but both are identifiers, never locators, and
 *   no host is reached at one.
 * - also discard-only `100::/64`, the dummy prefix `100:0:0:1::/64` (RFC 9780), benchmarking
 *   `2001:2::/48`, documentation `2001:db8::/32` and `3fff::/20` (RFC 9637), SRv6 SIDs `5f00::/16`
 *   (RFC 9602), ULA `fc00::/7`, link-local `fe80::/10`, multicast `ff00::/8`.
 * The rest of `2001::/23` (AMT, AS112, anycast services) is globally reachable and allowed.
 */
const NON_PUBLIC_V6 = new BlockList();
for (const [network, prefix] of [
  ['::', 96],
  ['::ffff:0:0:0', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['100:0:0:1::', 64],
  ['2001::', 32],
  ['2001:2::', 48],
  ['2001:10::', 28],
  ['2001:20::', 28],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
  ['5f00::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  NON_PUBLIC_V6.addSubnet(network, prefix, 'ipv6');
}

/**
 * True when `address` (an IPv4 or IPv6 literal) is not a public unicast address. IPv4-mapped
 * (`::ffff:a.b.c.d`) and NAT64 well-known-prefix (`64:ff9b::a.b.c.d`, RFC 6052) addresses are
 * judged by the IPv4 address they carry: on an IPv6-only network with DNS64 every IPv4-only
 * receiver resolves to the NAT64 form, so refusing that prefix whole would refuse them all,
 * while RFC 6052 §3.1 forbids it for non-global IPv4 addresses anyway. A string that is not
 * an IP address is false.
 */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return NON_PUBLIC_V4.check(address, 'ipv4');
  if (family !== 6) return false;
  const carried = embeddedIPv4(address);
  if (carried !== null) return NON_PUBLIC_V4.check(carried, 'ipv4');
  return NON_PUBLIC_V6.check(address, 'ipv6');
}

/**
 * The IPv4 address in the last 32 bits of an IPv4-mapped (`::ffff:0:0/96`) or NAT64
 * well-known-prefix (`64:ff9b::/96`) address; null for any other IPv6 address.
 */
function embeddedIPv4(address: string): string | null {
  const words = ipv6Words(address);
  const mapped = words.slice(0, 5).every((word) => word === 0) && words[5] === 0xffff;
  const nat64 = words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((word) => word === 0);
  if (!mapped && !nat64) return null;
  return [words[6] >> 8, words[6] & 0xff, words[7] >> 8, words[7] & 0xff].join('.');
}

/** The eight 16-bit words of a valid IPv6 literal (`::` compression and a dotted IPv4 tail allowed). */
function ipv6Words(address: string): number[] {
  const [head, tail] = address.includes('::') ? address.split('::') : [address, null];
  const parse = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [parseInt(group, 16)];
          const [a, b, c, d] = group.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const left = parse(head);
  if (tail === null) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

export { type PrivateAllowlist, createPrivateAllowlist } from '../../../../../shared/config/private-allowlist';

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
/** The `lookup` option of http.Agent / net.connect. */
export type GuardedLookup = (hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback) => void;

/** The SSRF guard of the worker's HTTP client (docs/design.md §6.3), with the operator's allowlist. */
export interface SsrfGuard {
  /**
   * Refuses a URL whose host is written as a non-public IP literal outside the allowlist.
   * Node connects to IP literals without calling the lookup function, so {@link lookup}
   * never sees them.
   * @throws BlockedTargetError
   */
  assertLiteralTargetAllowed(url: URL): void;
  /**
   * A `lookup` for http.Agent that resolves with the system resolver and refuses the name
   * when any address it resolves to is non-public and outside the allowlist's CIDRs, so the
   * check applies to the addresses actually connected to, not to the name (DNS rebinding
   * included). A listed hostname is resolved without the check.
   */
  lookup: GuardedLookup;
  /**
   * Resolves the URL's host as {@link lookup} does and refuses it on the same terms, before a
   * request goes to the egress proxy (docs/design.md §14.2): a proxy agent connects to the proxy only,
   * so no lookup of the target's name would otherwise happen here. The proxy resolves the name
   * again; a proxy doing its own egress checks closes that gap.
   * @throws BlockedTargetError; the resolver's own error (ENOTFOUND and the like) as it came
   */
  assertResolvedTargetAllowed(url: URL): Promise<void>;
}

/**
 * Creates the guard.
 * @param allowlist - WEBHOOK_PRIVATE_ALLOWLIST entries (`config.webhookPrivateAllowlist`)
 */
export function createSsrfGuard(allowlist: readonly string[] = []): SsrfGuard {
  const allowed = createPrivateAllowlist(allowlist);
  const refused = (address: string) => isNonPublicAddress(address) && !allowed.allowsAddress(address);

  const lookup: GuardedLookup = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) {
        callback(error, options.all ? [] : '');
        return;
      }
      const blocked = allowed.allowsHost(hostname) ? undefined : addresses.find((entry) => refused(entry.address));
      if (blocked) {
        callback(new BlockedTargetError(hostname, blocked.address), options.all ? [] : '');
        return;
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    });
  };

  return {
    assertLiteralTargetAllowed(url) {
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      if (allowed.allowsHost(host)) return;
      if (refused(host)) throw new BlockedTargetError(url.hostname, host);
    },

    lookup,

    assertResolvedTargetAllowed(url) {
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      return new Promise((resolve, reject) => lookup(host, { all: true }, (error) => (error ? reject(error) : resolve())));
    },
  };
}
