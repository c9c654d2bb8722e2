/**
 * The PostgreSQL processes a storage-stall test stops (SIGSTOP) and resumes: the postmaster and
 * its backends (one per client connection), found through the cluster's pid file and /proc.
 * Shared by test/e2e/storage-stall.test.ts and the hostile suite.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

/**
 * The postmaster's pid (the first line of its cluster's `postmaster.pid`).
 * @param url a connection URL of the server
 */
export async function postmasterPid(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const dir = (await client.query<{ d: string }>(`select current_setting('data_directory') as d`)).rows[0]!.d;
    return Number(readFileSync(join(dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } finally {
    await client.end();
  }
}

/**
 * The postmaster and its children now.
 * @param postmaster the postmaster's pid
 */
export function postgresPids(postmaster: number): number[] {
  const children = readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        // Fields after the command name (which may hold spaces): state, ppid...
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
      } catch {
        return false;
      }
    })
    .map(Number);
  return [postmaster, ...children];
}
