import { QueryTypes, UniqueConstraintError } from 'sequelize';
import type { Database } from '../db';
import { isReservedEventName } from '../deliveries/operational-event-names';
import { EventTypeExistsError, ReservedEventNameError, UnknownEventTypeError } from './errors';

/** One entry of the event catalog (docs/design.md §11.1): `schema` is a JSON Schema of the event's data. */
export interface EventType {
  name: string;
  description: string | null;
  schema: object | null;
}

/** Lowercase dotted names, as the catalog's table CHECK enforces: `invoice.paid`, `user.plan-changed`. */
export const EVENT_TYPE_NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)+$/;

const ISO_TIME = { type: 'string', format: 'date-time' } as const;

// What the posts repository sends (docs/design.md §6.1): times are ISO 8601, `image` the stored file name.
const POST_CHANGED_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  required: ['pid', 'uuid', 'user_id', 'title', 'content', 'image', 'created_at', 'updated_at'],
  additionalProperties: false,
  properties: {
    pid: { type: 'integer', minimum: 1 },
    uuid: { type: 'string', format: 'uuid' },
    user_id: { type: 'integer', minimum: 1, maximum: 99999 },
    title: { type: 'string', maxLength: 255 },
    content: { type: 'string' },
    image: { type: ['string', 'null'] },
    created_at: ISO_TIME,
    updated_at: ISO_TIME,
  },
};

const NULLABLE_STATUS = { type: ['integer', 'null'], minimum: 100, maximum: 599 } as const;

// What the endpoint events share (docs/design.md §6.6; shared/deliveries/episodes.ts
// `endpointEventData` writes it): the endpoint, the failure episode and why.
const ENDPOINT_EVENT_PROPERTIES = {
  endpoint_id: { type: 'integer', minimum: 1 },
  url: { type: 'string', description: 'The endpoint URL without userinfo, query string or fragment.' },
  user_id: { type: ['integer', 'null'], minimum: 1, maximum: 99999, description: "The endpoint's owner; null for an operator endpoint." },
  reason: { type: 'string' },
  failing_since: { ...ISO_TIME, description: "The episode's first failed attempt." },
  consecutive_failures: { type: 'integer', minimum: 1, description: 'Failed attempts in the episode, without a success between.' },
  last_status_code: { ...NULLABLE_STATUS, description: "The episode's last failed attempt's HTTP status; null when it got no answer." },
  last_error: { type: ['string', 'null'], description: "The episode's last failed attempt's error (timeout, connection); null when it got an answer." },
  occurred_at: ISO_TIME,
  episode_id: { type: 'string', pattern: '^epi_', description: 'The failure episode: from a failed attempt after a success to the next success or re-enable.' },
} as const;

const ENDPOINT_EVENT_REQUIRED = Object.keys(ENDPOINT_EVENT_PROPERTIES);

/** The JSON Schema of an endpoint event's data, with `extra` properties of its own. */
const endpointEventSchema = (extra: Record<string, object> = {}) => ({
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  required: [...ENDPOINT_EVENT_REQUIRED, ...Object.keys(extra)],
  additionalProperties: false,
  properties: { ...ENDPOINT_EVENT_PROPERTIES, ...extra },
});

/**
 * The built-in event types: the post events of docs/design.md §6.1, the endpoint test of §11.1 and the
 * operational events of §6.6 (shared/deliveries/operational-event-names.ts), which
 * endpoints receive only when they list them by name. Operators add others (stored in
 * webhook_event_types).
 */
export const BUILT_IN_EVENT_TYPES: readonly EventType[] = [
  { name: 'post.created', description: 'A post was created.', schema: POST_CHANGED_SCHEMA },
  { name: 'post.updated', description: 'A post was updated.', schema: POST_CHANGED_SCHEMA },
  {
    name: 'post.deleted',
    description: 'A post was deleted.',
    schema: {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      required: ['pid', 'uuid', 'user_id'],
      additionalProperties: false,
      properties: {
        pid: { type: 'integer', minimum: 1 },
        uuid: { type: 'string', format: 'uuid' },
        user_id: { type: 'integer', minimum: 1, maximum: 99999 },
      },
    },
  },
  {
    name: 'webhook.test',
    description: 'A test delivery asked for with POST /api/v1/endpoints/{id}/test.',
    schema: {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      required: ['endpoint_id', 'message', 'sent_at'],
      additionalProperties: false,
      properties: {
        endpoint_id: { type: 'integer', minimum: 1 },
        message: { type: 'string' },
        sent_at: ISO_TIME,
      },
    },
  },
  {
    name: 'endpoint.disabled',
    description: 'An endpoint was disabled: it answered 410 Gone, or failed with no success for WEBHOOK_DISABLE_AFTER_S.',
    schema: endpointEventSchema({ disabled_at: ISO_TIME }),
  },
  {
    name: 'endpoint.failing',
    description: "An endpoint's circuit breaker opened, the first time in its episode of failures: its deliveries wait for the next probe.",
    schema: endpointEventSchema(),
  },
  {
    name: 'endpoint.recovered',
    description: 'An endpoint that was announced failing or disabled succeeded again, or was re-enabled: its episode of failures ended.',
    schema: endpointEventSchema(),
  },
  {
    name: 'delivery.exhausted',
    description: 'A delivery ended failed with every attempt of its retry schedule used; it stays replayable and recoverable.',
    schema: {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      required: ['delivery_id', 'endpoint_id', 'event', 'attempt_count', 'last_status_code', 'last_error', 'occurred_at', 'episode_id'],
      additionalProperties: false,
      properties: {
        delivery_id: { type: 'string', pattern: '^msg_', description: 'The webhook-id of the delivery given up.' },
        endpoint_id: { type: ['integer', 'null'], minimum: 1, description: 'Its endpoint; null for an ad-hoc send (POST /api/v1/webhooks).' },
        event: { type: ['string', 'null'] },
        attempt_count: { type: 'integer', minimum: 1 },
        last_status_code: NULLABLE_STATUS,
        last_error: { type: ['string', 'null'] },
        occurred_at: ISO_TIME,
        episode_id: { type: ['string', 'null'], pattern: '^epi_', description: "Its endpoint's failure episode; null for an ad-hoc send." },
      },
    },
  },
];

const BUILT_IN_NAMES = new Set(BUILT_IN_EVENT_TYPES.map((type) => type.name));

/** The whole catalog: the built-in types, then the operators' by name. */
export async function listEventTypes(db: Database): Promise<EventType[]> {
  const added = await db.models.WebhookEventType.findAll({ order: [['name', 'ASC']] });
  return [
    ...BUILT_IN_EVENT_TYPES,
    ...added.map((type) => ({ name: type.name, description: type.description, schema: type.schema })),
  ];
}

/**
 * Adds an operator's event type to the catalog.
 *
 * @param type.name - lowercase and dotted ({@link EVENT_TYPE_NAME}); the caller validates it
 * @throws ReservedEventNameError for the name of an operational event (docs/design.md §6.6)
 * @throws EventTypeExistsError when the name is built in or already added
 */
export async function addEventType(db: Database, type: EventType): Promise<EventType> {
  if (isReservedEventName(type.name)) throw new ReservedEventNameError(type.name);
  if (BUILT_IN_NAMES.has(type.name)) throw new EventTypeExistsError(type.name);
  try {
    const row = await db.models.WebhookEventType.create({ name: type.name, description: type.description, schema: type.schema });
    return { name: row.name, description: row.description, schema: row.schema };
  } catch (error) {
    if (error instanceof UniqueConstraintError) throw new EventTypeExistsError(type.name, { cause: error });
    throw error;
  }
}

/**
 * Checks that every name is in the catalog; sending and subscribing use catalog names only.
 *
 * @throws UnknownEventTypeError naming each unknown name, in the order given
 */
export async function assertKnownEventTypes(db: Database, names: readonly string[]): Promise<void> {
  const candidates = [...new Set(names)].filter((name) => !BUILT_IN_NAMES.has(name));
  if (candidates.length === 0) return;
  const rows = await db.sequelize.query<{ name: string }>('SELECT name FROM webhook_event_types WHERE name = ANY($1::text[])', {
    bind: [candidates],
    type: QueryTypes.SELECT,
  });
  const known = new Set(rows.map((row) => row.name));
  const unknown = candidates.filter((name) => !known.has(name));
  if (unknown.length > 0) throw new UnknownEventTypeError(unknown);
}
