/**
 * eRPC's `driver: dynamodb` cache connector rewritten at load time into `driver: keyv` with the
 * keyv DynamoDB adapter, @keyv/dynamo (which the operator installs next to svc: `npm install
 * @keyv/dynamo`). eRPC's `dynamodb` block (common/config.go DynamoDBConnectorConfig) maps as:
 *
 * | eRPC                                    | svc                                                       |
 * |-----------------------------------------|-----------------------------------------------------------|
 * | `table` (eRPC default `erpc_json_rpc_cache`) | `keyv.options.tableName` (default `svc_json_rpc_cache`)  |
 * | `region`, `endpoint`                    | `keyv.options.region`, `keyv.options.endpoint`            |
 * | `auth.mode: secret` + `accessKeyID`/`secretAccessKey` | `keyv.options.credentials.{accessKeyId, secretAccessKey}` |
 * | `auth.mode: env`                        | nothing: the AWS SDK reads `AWS_ACCESS_KEY_ID`... itself  |
 * | `auth.mode: file` + `profile`           | `keyv.options.profile` (the AWS SDK's shared files)       |
 * | `getTimeout`, `setTimeout`              | `keyv.readTimeout`, `keyv.writeTimeout`                   |
 * | `maxRetries`                            | `keyv.options.maxAttempts` = maxRetries + 1 (AWS SDK)     |
 * | `lockRetryInterval`, `statePollInterval`| dropped (shared-state settings: no effect on a cache connector in eRPC either) |
 *
 * Refused, naming the reason: `partitionKeyName`, `rangeKeyName`, `reverseIndexName`,
 * `ttlAttributeName` (@keyv/dynamo has its own fixed table layout: one `id` key, its own TTL
 * attribute; svc keeps its reverse index as pointer keys), `auth.credentialsFile` (the AWS SDK
 * reads `AWS_SHARED_CREDENTIALS_FILE`), `initTimeout` (the adapter connects on first use; each
 * operation has its deadline). eRPC's table itself is not readable by @keyv/dynamo (another key
 * schema): point `table` at a new table, which @keyv/dynamo creates.
 */
import { isConfigObject, pathOf, type ConfigObject, type NormalizeReport } from 'svc-proxy/plugin';

/** The table svc's DynamoDB cache uses when eRPC's config names none. */
export const DEFAULT_DYNAMO_TABLE = 'svc_json_rpc_cache';

const REFUSED: Readonly<Record<string, string>> = {
  partitionKeyName: "eRPC's DynamoDB partition key name: @keyv/dynamo uses its own table layout (one `id` key); remove it and point `table` at a new table",
  rangeKeyName: "eRPC's DynamoDB range key name: @keyv/dynamo uses its own table layout (one `id` key); remove it and point `table` at a new table",
  reverseIndexName: "eRPC's DynamoDB reverse index (a GSI): svc keeps its reverse index of lookups by hash as pointer keys in the same table; remove it",
  ttlAttributeName: "eRPC's DynamoDB TTL attribute name: @keyv/dynamo sets DynamoDB TTL on its own attribute; remove it",
  initTimeout:
    "eRPC's DynamoDB init timeout: @keyv/dynamo connects on first use and svc bounds every operation with readTimeout/writeTimeout; remove initTimeout",
};

const DROPPED = ['lockRetryInterval', 'statePollInterval'] as const;

/**
 * Rewrites one `driver: dynamodb` connector into `driver: keyv` (see the module comment).
 * @param c the connector (mutated)
 * @param path its config path
 * @param out where the rewrite and refusals are reported
 */
export function mapDynamoConnector(c: ConfigObject, path: string, out: NormalizeReport): void {
  const at = pathOf(path, 'dynamodb');
  const d: ConfigObject = isConfigObject(c.dynamodb) ? { ...c.dynamodb } : {};
  if ('keyv' in c) {
    out.problem(pathOf(path, 'keyv'), "eRPC's `driver: dynamodb` becomes svc's `keyv` block: remove the `keyv` block or write `driver: keyv`");
    return;
  }
  const options: ConfigObject = { tableName: typeof d.table === 'string' && d.table !== '' ? d.table : DEFAULT_DYNAMO_TABLE };
  const keyv: ConfigObject = { adapter: '@keyv/dynamo', options };
  delete d.table;
  for (const k of ['region', 'endpoint'] as const) {
    if (d[k] !== undefined) options[k] = d[k];
    delete d[k];
  }
  if (d.getTimeout !== undefined) keyv.readTimeout = d.getTimeout;
  if (d.setTimeout !== undefined) keyv.writeTimeout = d.setTimeout;
  delete d.getTimeout;
  delete d.setTimeout;
  if (d.maxRetries !== undefined) {
    if (typeof d.maxRetries === 'number' && Number.isInteger(d.maxRetries) && d.maxRetries >= 0) options.maxAttempts = d.maxRetries + 1;
    else out.problem(pathOf(at, 'maxRetries'), 'a whole number of retries (0 or more)');
    delete d.maxRetries;
  }
  for (const k of DROPPED) delete d[k];
  if (d.auth !== undefined) {
    mapAuth(d.auth, pathOf(at, 'auth'), options, out);
    delete d.auth;
  }
  for (const [k, message] of Object.entries(REFUSED)) {
    if (k in d) out.problem(pathOf(at, k), message);
    delete d[k];
  }
  for (const k of Object.keys(d)) out.problem(pathOf(at, k), `not a key of eRPC's DynamoDB connector`);
  out.rewrite(
    pathOf(path, 'driver'),
    { driver: 'dynamodb', dynamodb: c.dynamodb ?? {} },
    { driver: 'keyv', keyv: { ...keyv, ...(isConfigObject(options.credentials) ? { options: { ...options, credentials: '(redacted)' } } : {}) } },
  );
  c.driver = 'keyv';
  delete c.dynamodb;
  c.keyv = keyv;
}

/** eRPC's `auth` block → the AWS SDK's client options. */
function mapAuth(auth: unknown, path: string, options: ConfigObject, out: NormalizeReport): void {
  if (!isConfigObject(auth)) {
    out.problem(path, 'an object: {mode: env|file|secret, ...}');
    return;
  }
  const mode = typeof auth.mode === 'string' ? auth.mode.toLowerCase() : auth.mode;
  if (auth.credentialsFile !== undefined && auth.credentialsFile !== '') {
    out.problem(
      pathOf(path, 'credentialsFile'),
      "eRPC's AWS credentials file path: the AWS SDK reads the file named by the AWS_SHARED_CREDENTIALS_FILE environment variable; set that and keep `profile`",
    );
  }
  if (mode === 'env' || mode === undefined) return;
  if (mode === 'file') {
    if (typeof auth.profile === 'string' && auth.profile !== '') options.profile = auth.profile;
    return;
  }
  if (mode === 'secret') {
    if (typeof auth.accessKeyID !== 'string' || typeof auth.secretAccessKey !== 'string') {
      out.problem(path, 'mode secret needs accessKeyID and secretAccessKey');
      return;
    }
    options.credentials = { accessKeyId: auth.accessKeyID, secretAccessKey: auth.secretAccessKey };
    return;
  }
  out.problem(pathOf(path, 'mode'), 'one of env, file, secret');
}
