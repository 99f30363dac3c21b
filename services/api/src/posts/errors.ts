/** No free random Layout B pid (10000..99999) was found within the retry budget. */
export class PostIdsExhaustedError extends Error {
  constructor(attempts: number, options?: { cause?: unknown }) {
    super(`no free post id in 10000..99999 after ${attempts} attempts`, options);
    this.name = 'PostIdsExhaustedError';
  }
}
