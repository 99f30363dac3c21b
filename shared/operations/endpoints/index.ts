// The endpoint operations (DESIGN §11, §14), one file per concern: the table's reads and
// writes, the static headers, the signing keys and masked credentials, the filter, the view.
export { assertEndpointFilter } from './filter';
export { MASKED, normalizeEndpointHeaders, presentHeaders } from './headers';
export {
  type EndpointChanges,
  type NewEndpoint,
  type RotatedSecret,
  assertEndpointUrl,
  createEndpoint,
  deleteEndpoint,
  findVisibleEndpoint,
  getEndpoint,
  listEndpoints,
  rotateEndpointSecret,
  updateEndpoint,
} from './repository';
export { assertEndpointSecret, generateEndpointSecret } from './secrets';
export { type EndpointOrdering, type EndpointView, type SignatureScheme, presentEndpoint } from './view';
