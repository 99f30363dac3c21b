import { ConnectionError, DatabaseError } from 'sequelize';

// SQLSTATE codes (PostgreSQL manual, Appendix A) meaning "the server cannot serve now", not
// "this statement is wrong": class 08 connection exceptions, shutdowns, start-up, an idle
// session ended, too many connections, and a read-only transaction (25006): the code never
// asks for one, so it is a standby answering, or a primary made read-only, during a failover
// (docs/design.md §13.3).
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '57P05', '53300', '25006']);
const SQLSTATE = /^[0-9A-Z]{5}$/;
// node-postgres reports a connection lost mid-query with these messages and no SQLSTATE,
// or with the socket's error code.
const LOST_CONNECTION = /Connection terminated|not queryable|Query read timeout|timeout exceeded when trying to connect|connection is closed|Client has encountered a connection error/i;
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE']);

/**
 * Whether `error` (or an error it wraps, through `cause`, `parent` or `original`) means
 * PostgreSQL is unreachable or not accepting work right now: Sequelize's connection errors
 * (refused, timed out, pool acquire timeout, a standby reached: {@link StandbyReachedError};
 * not a server's refusal such as an unknown database or a wrong password), SQLSTATE class
 * 08, 57P01-57P03, 57P05, 53300 and 25006 (read-only), or a connection node-postgres lost
 * mid-query (reset, refused, timed out, closed). Such a failure is temporary: answer 503,
 * retry later.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (const current of errorChain(error)) {
    if (current instanceof ConnectionError) return !isMisconfiguration(current.parent);
    const code = (current as { code?: unknown }).code;
    if (isUnavailableSqlState(code) || (typeof code === 'string' && SOCKET_ERRORS.has(code))) return true;
    if (current instanceof DatabaseError && code === undefined && LOST_CONNECTION.test(current.message)) return true;
  }
  return false;
}

// A connection node-postgres lost after a statement went out: its outcome is the server's secret.
const LOST_MID_STATEMENT = /Connection terminated|not queryable|Query read timeout|connection is closed|Client has encountered a connection error/i;
const LOST_SOCKET_ERRORS = new Set(['ECONNRESET', 'ETIMEDOUT', 'EPIPE']);
// Class 08 is the connection's, but 08001 and 08004 say it was never made; 57P01 and 57P02 end a session mid-statement.
const SESSION_ENDED_SQLSTATES = new Set(['57P01', '57P02']);

/**
 * Whether `error` (or one it wraps) leaves unknown whether the work it interrupted committed:
 * the connection was lost, or the server ended the session, after a statement (COMMIT
 * included) went out and before its answer came back. A failure to connect (Sequelize's
 * `ConnectionError`: refused, pool acquire timeout) sent nothing, and a statement the server
 * refused with any other SQLSTATE rolled its transaction back: both committed nothing.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  for (const current of errorChain(error)) {
    if (current instanceof ConnectionError) return false;
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && ((code.startsWith('08') && code !== '08001' && code !== '08004') || SESSION_ENDED_SQLSTATES.has(code))) return true;
    if (typeof code === 'string' && LOST_SOCKET_ERRORS.has(code)) return true;
    if (current instanceof DatabaseError && code === undefined && LOST_MID_STATEMENT.test(current.message)) return true;
  }
  return false;
}

/**
 * Whether a connection on which a statement failed with `error` (node-postgres' own error)
 * must leave the pool: no SQLSTATE (reset, read timeout: it may be mid-protocol), a FATAL or
 * PANIC one (the server closes it next), or an outage SQLSTATE (25006: its server is read-only
 * now; a new connection reaches whatever the address points to after a failover).
 */
export function spoilsConnection(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as { code?: unknown; severity?: unknown };
  return !SQLSTATE.test(String(code)) || severity === 'FATAL' || severity === 'PANIC' || isUnavailableSqlState(code);
}

/**
 * A primary's new connection reached a standby (`pg_is_in_recovery()` true): the address does
 * not point at the primary yet, during a failover. The connection was closed; inside
 * Sequelize's ConnectionError, an outage to {@link isDatabaseUnavailable}.
 */
export class StandbyReachedError extends Error {
  constructor() {
    super('the server at DATABASE_URL is a standby (pg_is_in_recovery() is true), not the primary');
    this.name = 'StandbyReachedError';
  }
}

/**
 * `error` and the errors it wraps, outermost first: Sequelize's `parent` and `original`, else
 * the standard `cause`, else the first of an AggregateError's `errors` (happy eyeballs: the
 * first address's failure speaks for all); at most five. Duck-typed, any object with a
 * `message`: errors from Node's internals need not be instances of this realm's Error.
 */
export function* errorChain(error: unknown): Generator<Error> {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && isErrorLike(current); depth += 1) {
    yield current;
    const wrapped = current as { cause?: unknown; parent?: unknown; original?: unknown; errors?: unknown };
    current = wrapped.parent ?? wrapped.original ?? wrapped.cause ?? (Array.isArray(wrapped.errors) ? wrapped.errors[0] : undefined);
  }
}

function isErrorLike(value: unknown): value is Error {
  return value instanceof Error || (typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string');
}

function isUnavailableSqlState(code: unknown): boolean {
  return typeof code === 'string' && (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code));
}

/**
 * A server that answered with another SQLSTATE (no such database, a wrong password) is
 * misconfigured, not away: waiting will not help, so that stays a 500 and a loud log.
 */
function isMisconfiguration(cause: unknown): boolean {
  const code = (cause as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^(?=.*\d)[0-9A-Z]{5}$/.test(code) && !isUnavailableSqlState(code);
}

// The transaction lost to another one and committed nothing: deadlock_detected and
// serialization_failure (PostgreSQL manual, Appendix A, class 40). The manual's advice is to
// run it again.
const CONFLICT_SQLSTATES = new Set(['40P01', '40001']);

/**
 * Whether `error` (or an error it wraps, through `cause`, `parent` or `original`) is PostgreSQL
 * ending a transaction because it conflicted with another: a deadlock (40P01) or a
 * serialization failure (40001). Nothing of the transaction committed, and running it again
 * usually succeeds.
 */
export function isTransactionConflict(error: unknown): boolean {
  for (const current of errorChain(error)) {
    if (CONFLICT_SQLSTATES.has((current as { code?: unknown }).code as string)) return true;
  }
  return false;
}
