/**
 * Redaction of the config the admin endpoint returns (`svc_config`, `svc_project`; spec §4.4). The rules live in core (`redactTree`, shared with every
 * log line and internal error text), replacing with `#redacted=<short_hash>`:
 * - every value under a credential-looking key at any depth (`secret.value`, `redis.password`,
 *   JWT `verificationKeys`, `aws.secretAccessKey`, a provider's `settings.apiKey`, any `*Token`,
 *   `X-Api-Key`…), whole subtrees included;
 * - every value of every `headers` map (an upstream's resolved `headers` and `jsonRpc.headers`,
 *   a provider's, the tracing exporter's), whatever the header's name;
 * - the credentials, path and query of every URL (`https://host/v2/<KEY>` keeps only its origin).
 */
import { redactTree, redactUrl } from 'svc-proxy/util';

export { redactUrl };

/**
 * A JSON copy of a config subtree with every secret replaced (see the module comment).
 * Functions, Maps and other non-JSON values are left out.
 * @param value a resolved config or part of it (a JSON copy: class instances are walked as plain objects)
 */
export function redactConfig(value: unknown): unknown {
  return redactTree(value);
}
