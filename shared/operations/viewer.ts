/**
 * Who reads or changes operations data (docs/design.md §11.1): an operator (a service key with the
 * route's scope, or the CLI) sees everything; a user sees only their own endpoints and the
 * deliveries to them. The api's `visibilityFor()` returns this shape.
 */
export type Viewer = { operator: true } | { operator: false; userId: number };

/** The CLI's and other trusted callers' viewer. */
export const OPERATOR: Viewer = { operator: true };
