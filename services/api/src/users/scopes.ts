/** The scopes a service key may hold (docs/design.md §4); `*` holds them all. `portal:write` mints portal links (§11.6). */
export const SCOPES = ['webhooks:send', 'webhooks:read', 'endpoints:read', 'endpoints:write', 'portal:write'] as const;
export type Scope = (typeof SCOPES)[number];
