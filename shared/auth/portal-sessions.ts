import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';

/**
 * Ends every open portal session of a user (docs/design.md §11.6), for when their token is
 * replaced or revoked: a session is that user's access and must not outlive the token. Its
 * `expires_at` becomes now, so it is refused as expired. Run it in the transaction that
 * changes the token, and tell the api processes after the commit (`{kind: 'user', userId}` on
 * the credential-changes channel), so none keeps a cached session.
 *
 * @returns how many sessions ended
 */
export async function endPortalSessions(sequelize: Sequelize, userId: number, transaction?: Transaction): Promise<number> {
  const rows = await sequelize.query<{ id: number }>('UPDATE portal_sessions SET expires_at = now() WHERE user_id = $1 AND expires_at > now() RETURNING id', {
    bind: [userId],
    type: QueryTypes.SELECT,
    transaction,
  });
  return rows.length;
}
