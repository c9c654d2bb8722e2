/**
 * The `/metrics` listener (spec §6): GET `/metrics` answers the exposition text, anything else
 * 404. Shared by the metrics plugin (one process) and the primary of `server.workers` (the
 * workers' metrics summed), so both answer alike.
 */
import { createServer, type Server } from 'node:http';

/** What a scrape reads: the exposition text and its content type. */
export interface MetricsSource {
  /** Prometheus text (or OpenMetrics) of the metrics; rejects when they cannot be read. */
  metrics(): Promise<string>;
  /** Content type of that text. */
  readonly contentType: string;
}

/**
 * An HTTP server (not yet listening) serving `GET /metrics` from a source: 200 with the text,
 * 500 with the error message when reading fails, 404 for any other path.
 * @param source where the text comes from, read on every scrape
 */
export function createMetricsServer(source: MetricsSource): Server {
  return createServer((req, res) => {
    if (req.method === 'GET' && (req.url ?? '').split('?')[0] === '/metrics') {
      source.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': source.contentType });
          res.end(text);
        },
        (e: Error) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(e.message);
        },
      );
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found: metrics are served at /metrics\n');
  });
}
