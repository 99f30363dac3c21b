import type { FastifyRequest } from 'fastify';
import { ApiError } from '../../errors';

/**
 * preValidation hook: turns a multipart/form-data create request into a body object for
 * the route's Joi schema. Fields become strings, the file its bytes. Luminova's form, one
 * field `body` holding the whole JSON, is unpacked when no `title` field was sent.
 * Multipart limit errors (413) pass through; any other parse failure is a 400.
 */
export async function readMultipartBody(request: FastifyRequest): Promise<void> {
  if (!request.isMultipart()) return;
  const fields: Record<string, unknown> = {};
  const add = (name: string, value: unknown) => {
    const previous = fields[name];
    // A repeated field becomes a list, which the schema then refuses as not a string.
    fields[name] = previous === undefined ? value : [previous, value].flat();
  };
  try {
    for await (const part of request.parts()) {
      add(part.fieldname, part.type === 'file' ? await part.toBuffer() : part.value);
    }
  } catch (err) {
    if (typeof (err as { statusCode?: unknown }).statusCode === 'number') throw err;
    throw new ApiError(400, 'Malformed multipart body.', { cause: err });
  }
  request.body = unpackJsonField(fields);
}

function unpackJsonField(fields: Record<string, unknown>): Record<string, unknown> {
  if (fields.title !== undefined || typeof fields.body !== 'string') return fields;
  try {
    const parsed: unknown = JSON.parse(fields.body);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return fields;
    const { body: _json, ...rest } = fields;
    return { ...(parsed as Record<string, unknown>), ...rest };
  } catch {
    return fields;
  }
}
