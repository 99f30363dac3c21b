/** A scope list that names an unknown scope, or none at all (DESIGN §4). */
export class InvalidScopesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidScopesError';
  }
}
