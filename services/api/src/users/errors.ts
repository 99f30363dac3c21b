/** A scope list that names an unknown scope, or none at all (docs/design.md §4). */
export class InvalidScopesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidScopesError';
  }
}
