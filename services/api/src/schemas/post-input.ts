import Joi from 'joi';

/** Characters as PostgreSQL's VARCHAR counts them (code points), not UTF-16 units or bytes. */
export function characterCount(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

export const TITLE_MAX_CHARACTERS = 255;
/** Longest post content (Layout A `body`, Layout B `content`), in characters: one post stays small enough to cache and to page. */
export const CONTENT_MAX_CHARACTERS = 65_535;

/**
 * A required-when-present text field with docs/design.md §5's messages: null, empty or
 * whitespace-only counts as missing; any non-string is "must be a string".
 */
function text(subject: string, maxCharacters?: number) {
  return Joi.any()
    .custom((value: unknown, helpers) => {
      if (value === null || (typeof value === 'string' && value.trim() === '')) return helpers.error('text.required');
      if (typeof value !== 'string') return helpers.error('text.string');
      // PostgreSQL text cannot hold U+0000: refuse it here rather than fail the insert with a 500.
      if (value.includes('\u0000')) return helpers.error('text.nul');
      if (maxCharacters !== undefined && characterCount(value) > maxCharacters) return helpers.error('text.max');
      return value;
    })
    .messages({
      'any.required': `${subject} is required.`,
      'text.required': `${subject} is required.`,
      'text.string': `${subject} must be a string.`,
      'text.nul': `${subject} cannot contain a NUL character.`,
      ...(maxCharacters === undefined ? {} : { 'text.max': `${subject} cannot exceed ${maxCharacters} characters.` }),
    });
}

const title = () => text('Post title', TITLE_MAX_CHARACTERS);
const content = () => text('Post content', CONTENT_MAX_CHARACTERS);

const userId = Joi.any()
  .custom((value: unknown, helpers) => {
    if (value === null || value === '') return helpers.error('userId.required');
    const id = typeof value === 'string' && /^\d{1,9}$/.test(value) ? Number(value) : value;
    return Number.isSafeInteger(id) && (id as number) > 0 ? id : helpers.error('userId.integer');
  })
  .messages({
    'any.required': 'User ID is required.',
    'userId.required': 'User ID is required.',
    'userId.integer': 'User ID must be a positive integer.',
  });

const image = Joi.any()
  .custom((value: unknown, helpers) => (Buffer.isBuffer(value) ? value : helpers.error('image.file')))
  .messages({ 'image.file': 'Image must be an uploaded file.' });

// Keys are validated in declaration order, so the first message is the title's, then the content's.
const body = (keys: Joi.PartialSchemaMap) =>
  Joi.object(keys).messages({
    'object.base': 'Request body must be a JSON object.',
    'object.unknown': 'Unknown field: {#key}.',
  });

/** Layout A create: `{title, body, userId}` plus an optional uploaded `image` (multipart). */
export const createPostA = body({ title: title().required(), body: content().required(), userId: userId.required(), image });

/**
 * Layout A update: optional `title` and `content`, at least one. `body` (the name create
 * uses) is accepted as `content`; both given with different values is refused.
 */
export const updatePostA = body({ title: title(), content: content(), body: content() })
  .or('title', 'content', 'body')
  .custom((value: { title?: string; content?: string; body?: string }, helpers) => {
    if (value.body === undefined) return value;
    if (value.content !== undefined && value.content !== value.body) return helpers.error('update.contentAndBody');
    const { body: alias, ...rest } = value;
    return { ...rest, content: alias };
  })
  .messages({
    'object.missing': 'Post title or content is required.',
    'update.contentAndBody': 'Fields content and body differ: send one of them.',
  });

/** Layout B create and update: `title` and `content`, both required. */
export const writePostB = body({ title: title().required(), content: content().required() });

/**
 * A text field {@link text} takes as it is: a string, not blank, without NUL, and (with a
 * maximum) no longer in UTF-16 units, so surely not in characters. Anything else is Joi's to judge.
 */
function plainText(value: unknown, maxCharacters?: number): value is string {
  return typeof value === 'string' && value.trim() !== '' && !value.includes('\u0000') && (maxCharacters === undefined || value.length <= maxCharacters);
}

/** A body with exactly `count` own keys: an unknown key or a missing one is Joi's to report. */
function hasKeys(value: unknown, count: number): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === count;
}

/** {@link writePostB}'s value for a plainly valid `{title, content}`; undefined (Joi decides) for anything else. */
export function writePostBShortcut(input: unknown): object | undefined {
  if (!hasKeys(input, 2)) return undefined;
  return plainText(input.title, TITLE_MAX_CHARACTERS) && plainText(input.content, CONTENT_MAX_CHARACTERS) ? input : undefined;
}

/** {@link createPostA}'s value for a plainly valid JSON `{title, body, userId}` (userId a number); undefined (Joi decides) for anything else. */
export function createPostAShortcut(input: unknown): object | undefined {
  if (!hasKeys(input, 3)) return undefined;
  const { userId: id } = input;
  const valid = plainText(input.title, TITLE_MAX_CHARACTERS) && plainText(input.body, CONTENT_MAX_CHARACTERS) && typeof id === 'number' && Number.isSafeInteger(id) && id > 0;
  return valid ? input : undefined;
}

/** A numeric path id; digits only by the route's pattern, so any size is a (possibly absent) post. */
export const postIdParams = Joi.object({ id: Joi.number().integer().unsafe().required() });

// At most 15 digits: always a safe integer, which Number() reads exactly as Joi does.
const SHORT_DIGITS = /^\d{1,15}$/;
const shortNumber = (value: unknown) => (typeof value === 'string' && SHORT_DIGITS.test(value) ? Number(value) : undefined);

/** {@link postIdParams}'s value for an id of at most 15 digits; undefined (Joi decides) for anything else. */
export function postIdParamsShortcut(params: unknown): { id: number } | undefined {
  const id = shortNumber((params as { id?: unknown }).id);
  return id === undefined ? undefined : { id };
}

const pageNumber = (name: string, min: number, max: number, fallback: number) =>
  Joi.number()
    .integer()
    .min(min)
    .max(max)
    .default(fallback)
    .messages({ '*': `${name} must be an integer from ${min} to ${max}.` });

const MAX_OFFSET = 2_147_483_647;

/** Pagination query; other query keys are ignored. */
export function pageQuery(defaultLimit: number, maxLimit: number) {
  return Joi.object({
    limit: pageNumber('limit', 1, maxLimit, defaultLimit),
    offset: pageNumber('offset', 0, MAX_OFFSET, 0),
  }).unknown(true);
}

/**
 * {@link pageQuery}'s value for a query whose limit and offset are absent or plain digits in
 * range; undefined (Joi decides) for anything else, every error included.
 */
export function pageQueryShortcut(defaultLimit: number, maxLimit: number): (query: unknown) => object | undefined {
  return (query) => {
    const given = query as { limit?: unknown; offset?: unknown };
    const limit = given.limit === undefined ? defaultLimit : shortNumber(given.limit);
    const offset = given.offset === undefined ? 0 : shortNumber(given.offset);
    if (limit === undefined || offset === undefined || limit < 1 || limit > maxLimit || offset > MAX_OFFSET) return undefined;
    return { ...given, limit, offset };
  };
}
