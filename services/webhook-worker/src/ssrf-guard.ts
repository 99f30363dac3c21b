import { LookupAddress, LookupAllOptions, LookupOneOptions, lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { BlockedTargetError } from './errors';

/**
 * Ranges a webhook must never reach when WEBHOOK_BLOCK_PRIVATE is on (DESIGN §6): loopback,
 * private (RFC 1918, RFC 4193), link-local, carrier-grade NAT, "this network", multicast and
 * reserved. IPv4-mapped IPv6 addresses are matched against the IPv4 rules by BlockList.
 */
const NON_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  NON_PUBLIC.addSubnet(network, prefix, 'ipv6');
}

/** True when `address` (an IPv4 or IPv6 literal) is not a public unicast address. */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  return NON_PUBLIC.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/**
 * Refuses a URL whose host is written as a non-public IP literal. Node connects to IP
 * literals without calling the lookup function, so {@link guardedLookup} never sees them.
 *
 * @throws BlockedTargetError
 */
export function assertLiteralTargetAllowed(url: URL): void {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isNonPublicAddress(host)) throw new BlockedTargetError(url.hostname, host);
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.Agent that resolves with the system resolver and refuses the name when
 * any address it resolves to is non-public, so the check applies to the address actually
 * connected to, not to the name (DNS rebinding included).
 */
export function guardedLookup(hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) {
      callback(error, options.all ? [] : '');
      return;
    }
    const blocked = addresses.find((entry) => isNonPublicAddress(entry.address));
    if (blocked) {
      callback(new BlockedTargetError(hostname, blocked.address), options.all ? [] : '');
      return;
    }
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0].address, addresses[0].family);
  });
}
