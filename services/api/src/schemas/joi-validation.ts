import type { FastifySchemaCompiler } from 'fastify';
import type Joi from 'joi';
import { RequestValidationError } from '../errors';

const JOI = Symbol('joi');
const SHORTCUT = Symbol('shortcut');
/**
 * A fast path for the common, valid input of a route part: the value Joi would return for
 * `data`, or undefined to let Joi decide (anything unusual, and every error).
 */
export type Shortcut = (data: unknown) => object | undefined;
type WithJoi = { [JOI]?: Joi.Schema; [SHORTCUT]?: Shortcut };

// Error codes about the body's shape rather than a field's rules (see RequestValidationError).
const STRUCTURAL_CODES = new Set(['object.base', 'object.unknown']);

/**
 * Pairs a route's JSON Schema (which documents the part in OpenAPI) with the Joi schema
 * that validates it, and optionally a {@link Shortcut} tried first on every request (hot
 * routes: Joi costs microseconds per call). Returns the same JSON Schema object.
 */
export function validatedBy<T extends object>(jsonSchema: T, joi: Joi.Schema, shortcut?: Shortcut): T {
  Object.defineProperty(jsonSchema, JOI, { value: joi, enumerable: false });
  if (shortcut) Object.defineProperty(jsonSchema, SHORTCUT, { value: shortcut, enumerable: false });
  return jsonSchema;
}

/**
 * Fastify validator compiler running the Joi schema attached by {@link validatedBy}. It
 * never throws: it returns `{ value }` (converted, defaults applied) or `{ error }` with
 * the first failing rule. A missing body is validated as `{}`, so it reports the first
 * required field rather than a shape error.
 *
 * @throws Error at start-up when a route part has no Joi schema, so no part goes unvalidated
 */
export const joiValidatorCompiler: FastifySchemaCompiler<object> = ({ schema, method, url, httpPart }) => {
  const joi = (schema as WithJoi)[JOI];
  const shortcut = (schema as WithJoi)[SHORTCUT];
  if (!joi) throw new Error(`${method} ${url}: the ${httpPart} schema has no Joi validator (use validatedBy)`);
  return (data: unknown) => {
    const quick = shortcut?.(data);
    if (quick !== undefined) return { value: quick };
    const input = httpPart === 'body' && data == null ? {} : data;
    const { value, error } = joi.validate(input, { abortEarly: true, convert: true });
    if (!error) return { value };
    const detail = error.details[0];
    return { error: new RequestValidationError(detail.message, STRUCTURAL_CODES.has(detail.type), { cause: error }) };
  };
};
