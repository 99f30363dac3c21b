import { BlockList, isIP } from 'node:net';

/**
 * WEBHOOK_PRIVATE_ALLOWLIST, parsed (docs/design.md §6.3): hostnames match the URL's host exactly,
 * before resolution; CIDRs (and bare IP addresses, as one-address CIDRs) match the address
 * connected to, whether resolved or written in the URL.
 */
export interface PrivateAllowlist {
  /** True when the URL's host (lower case, IPv6 brackets removed) is a listed hostname. */
  allowsHost(hostname: string): boolean;
  /** True when the address lies in a listed CIDR. */
  allowsAddress(address: string): boolean;
}

/**
 * Builds the allowlist from shared/config's `webhookPrivateAllowlist` (already validated and
 * lower-cased: hostnames, `a.b.c.d/n`, `x::/n`, bare addresses).
 */
export function createPrivateAllowlist(entries: readonly string[]): PrivateAllowlist {
  const hosts = new Set<string>();
  const cidrs = new BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.split('/');
    const family = isIP(address);
    if (family === 0) hosts.add(entry.toLowerCase());
    else {
      const type = family === 4 ? 'ipv4' : 'ipv6';
      cidrs.addSubnet(address, bits === undefined ? (family === 4 ? 32 : 128) : Number(bits), type);
    }
  }
  return {
    allowsHost: (hostname) => hosts.has(hostname.toLowerCase()),
    allowsAddress: (address) => {
      const family = isIP(address);
      return family !== 0 && cidrs.check(address, family === 4 ? 'ipv4' : 'ipv6');
    },
  };
}
