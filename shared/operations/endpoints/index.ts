// The endpoint operations (docs/design.md §11.1, §14.1), one file per concern: the table's reads and
// writes, the static headers, the signing keys and masked credentials, OAuth2 auth, the client
// certificate, the rules between them, the filter, the view.
export { type EndpointAuthView, normalizeEndpointAuth, presentAuth } from './auth';
export { type ClientCertificatePem, type ClientCertificateView, normalizeClientCertificate, presentClientCertificate } from './client-certificate';
export { DEVELOPMENT_RULES, type EndpointRules, endpointRulesOf } from './credential-rules';
export { assertEndpointFilter } from './filter';
export { MASKED, normalizeEndpointHeaders, presentHeaders } from './headers';
export type { EndpointChanges } from './changes';
export {
  type NewEndpoint,
  type RotatedSecret,
  USERINFO_REFUSED,
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
