/**
 * The PostgreSQL driver of API keys, on pg. One table (created when missing):
 * the primary key (project_id, connector_id, api_key) is the main row, and an index on
 * (project_id, connector_id, user_id) is the reverse index. Pages are keyset-paged on api_key.
 */
import type { Pool } from 'pg';
import { checkedRecord, tokenAfter, type ApiKeyPage, type ApiKeyStore } from './store.ts';
import type { ApiKeyRecord } from '../api.ts';

/** Queries give up after this long, ms: a lookup must not hold a request. */
const QUERY_TIMEOUT_MS = 1000;

/**
 * Opens a pool and makes sure the table exists.
 * @param table a validated identifier (`^[A-Za-z_][A-Za-z0-9_]*$`)
 */
export async function openPostgres(connectionUri: string, table: string, onError: (e: unknown) => void): Promise<Pool> {
  const pg = (await import('pg')).default;
  const pool = new pg.Pool({ connectionString: connectionUri, max: 4, query_timeout: QUERY_TIMEOUT_MS, connectionTimeoutMillis: 2000 });
  pool.on('error', onError);
  await pool.query(`CREATE TABLE IF NOT EXISTS ${table} (
    project_id text NOT NULL, connector_id text NOT NULL, api_key text NOT NULL, user_id text,
    enabled boolean NOT NULL DEFAULT true, rate_limit_budget text,
    created_at text NOT NULL, updated_at text NOT NULL,
    PRIMARY KEY (project_id, connector_id, api_key))`);
  await pool.query(`CREATE INDEX IF NOT EXISTS ${table}_by_user ON ${table} (project_id, connector_id, user_id)`);
  return pool;
}

interface Row {
  api_key: string;
  user_id: string | null;
  enabled: boolean;
  rate_limit_budget: string | null;
  created_at: string;
  updated_at: string;
}

function recordOf(r: Row): ApiKeyRecord {
  return checkedRecord({
    key: r.api_key,
    userId: r.user_id,
    enabled: r.enabled,
    rateLimitBudget: r.rate_limit_budget ?? undefined,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  });
}

const COLUMNS = 'api_key, user_id, enabled, rate_limit_budget, created_at, updated_at';

/** See the module comment. */
export class PostgresApiKeyStore implements ApiKeyStore {
  constructor(
    private readonly pool: Pool,
    private readonly table: string,
    private readonly projectId: string,
    private readonly connectorId: string,
  ) {}

  async get(key: string): Promise<ApiKeyRecord | undefined> {
    const r = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM ${this.table} WHERE project_id = $1 AND connector_id = $2 AND api_key = $3`, [
      this.projectId,
      this.connectorId,
      key,
    ]);
    return r.rows[0] ? recordOf(r.rows[0]) : undefined;
  }

  async add(x: ApiKeyRecord): Promise<boolean> {
    const r = await this.pool.query(
      `INSERT INTO ${this.table} (project_id, connector_id, ${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
      [this.projectId, this.connectorId, x.key, x.userId, x.enabled, x.rateLimitBudget ?? null, x.createdAt, x.updatedAt],
    );
    return r.rowCount === 1;
  }

  async put(x: ApiKeyRecord): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.table} SET user_id = $4, enabled = $5, rate_limit_budget = $6, updated_at = $7 WHERE project_id = $1 AND connector_id = $2 AND api_key = $3`,
      [this.projectId, this.connectorId, x.key, x.userId, x.enabled, x.rateLimitBudget ?? null, x.updatedAt],
    );
  }

  async delete(key: string): Promise<ApiKeyRecord | undefined> {
    const r = await this.pool.query<Row>(`DELETE FROM ${this.table} WHERE project_id = $1 AND connector_id = $2 AND api_key = $3 RETURNING ${COLUMNS}`, [
      this.projectId,
      this.connectorId,
      key,
    ]);
    return r.rows[0] ? recordOf(r.rows[0]) : undefined;
  }

  async list(limit: number, after: string | undefined): Promise<ApiKeyPage> {
    // COLLATE "C": byte order, the same order as the memory and Redis drivers and the token.
    const r = await this.pool.query<Row>(
      `SELECT ${COLUMNS} FROM ${this.table} WHERE project_id = $1 AND connector_id = $2 AND ($3::text IS NULL OR api_key COLLATE "C" > $3::text COLLATE "C") ORDER BY api_key COLLATE "C" LIMIT $4`,
      [this.projectId, this.connectorId, after ?? null, limit + 1],
    );
    const hasMore = r.rows.length > limit;
    const rows = r.rows.slice(0, limit);
    return { records: rows.map(recordOf), hasMore, nextToken: hasMore && rows.length ? tokenAfter(rows[rows.length - 1]!.api_key) : '' };
  }

  async keysOf(userId: string): Promise<string[]> {
    const r = await this.pool.query<{ api_key: string }>(
      `SELECT api_key FROM ${this.table} WHERE project_id = $1 AND connector_id = $2 AND user_id = $3 ORDER BY api_key COLLATE "C"`,
      [this.projectId, this.connectorId, userId],
    );
    return r.rows.map((x) => x.api_key);
  }

  async close(): Promise<void> {
    // The pool is shared; its owner ends it.
  }
}
