/**
 * A new `msg_` or `evt_` id drawn by PostgreSQL inside a statement (the migration's
 * `webhook_new_id`, the same UUIDv7 format as newWebhookId() and newEventId()).
 */
export const newIdSql = (prefix: 'msg_' | 'evt_'): string => `webhook_new_id('${prefix}')`;

/**
 * A new id made at the time `at` holds (an SQL expression), such as an event's deliveries at
 * their event's millisecond: they share its day partition (docs/design.md §3.4). Write each row's
 * `created_at` as `webhook_id_time(id)`.
 */
export const newIdAtSql = (prefix: 'msg_' | 'evt_', at: string): string => `webhook_new_id('${prefix}', ${at})`;
