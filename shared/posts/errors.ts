/** No free random Layout B pid (10000..99999) was found within the retry budget. */
export class PostIdsExhaustedError extends Error {
  constructor(attempts: number, options?: { cause?: unknown }) {
    super(`no free post id in 10000..99999 after ${attempts} attempts`, options);
    this.name = 'PostIdsExhaustedError';
  }
}

/**
 * The request's Idempotency-Key records post `pid` already, made by another holder of the key
 * (one that took it over after a lease lapsed, or the one it was taken from), and that post no
 * longer exists. No post was made for this request.
 */
export class RecordedPostGoneError extends Error {
  constructor(readonly pid: number) {
    super(`the Idempotency-Key records post ${pid}, which no longer exists`);
    this.name = 'RecordedPostGoneError';
  }
}
