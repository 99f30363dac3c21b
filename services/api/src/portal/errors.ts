/** A portal link was asked for a user that does not exist (or was deleted meanwhile). */
export class PortalUserNotFoundError extends Error {
  constructor(readonly userId: number, options?: { cause?: unknown }) {
    super(`User ${userId} not found.`, options);
    this.name = 'PortalUserNotFoundError';
  }
}

/** No portal link has this id. */
export class PortalLinkNotFoundError extends Error {
  constructor(readonly linkId: number, options?: { cause?: unknown }) {
    super('Portal link not found.', options);
    this.name = 'PortalLinkNotFoundError';
  }
}
