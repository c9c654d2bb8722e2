/**
 * The operator page at `/admin/ui` (docs/admin-ui.md), part of the admin plugin because it is
 * guarded by the same authenticator as `POST /admin`. Off unless `admin.ui.enabled`: while off,
 * every `/admin/ui` path falls through to the routes after it, answered as any unknown path.
 *
 * Routes (GET only):
 * - `/admin/ui`, `/admin/ui/app.js`, `/admin/ui/style.css`, `/admin/ui/uplot.js`,
 *   `/admin/ui/uplot.css`: the static shell, no data, served to anyone once enabled;
 * - `/admin/ui/snapshot`: the data as JSON ({@link UiSnapshot});
 * - `/admin/ui/events`: the same data pushed every `admin.ui.pushInterval` as Server-Sent Events.
 *
 * Both data routes need a credential `admin.auth` accepts, sent in a header (401 otherwise, as
 * `/admin`), and refuse a browser's cross-site request (`Sec-Fetch-Site: cross-site` or
 * `same-site`, or an `Origin` of another host: 403); they send no CORS headers. The page's cordon buttons are plain calls to
 * `POST /admin` (`svc_cordonUpstream`, `svc_uncordonUpstream`) with `Content-Type:
 * application/json` and the credential in a header: svc keeps no session or cookie, so there is
 * no ambient credential a cross-site page could ride on (docs/admin-ui.md, "Auth and CSRF").
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import { Duration, type Network, type PluginHost, Strict, Type, type Upstream } from 'svc-proxy/plugin';
import { asSvcError, type SvcError, ErrAuthUnauthorized, ErrInvalidRequest, ErrServiceShuttingDown, toJsonRpcError } from 'svc-proxy/plugin/errors';
import type { Authenticator } from 'svc-proxy/plugins/auth';
import { BREAKERS_SERVICE } from 'svc-proxy/plugins/failsafe';
import { SELECTION_API_SERVICE } from 'svc-proxy/plugins/selection';
import { readAsset } from './assets.ts';
import {
  buildSnapshot,
  type BreakerState,
  type MetricSample,
  type NetworkLike,
  SNAPSHOT_METRICS,
  type UiSnapshot,
  type UpstreamLike,
  worstBreaker,
} from './snapshot.ts';
import { EventStreams } from './stream.ts';
import { networkChainState } from 'svc-proxy/plugins/evm-state';

export { buildSnapshot, type UiSnapshot } from './snapshot.ts';

/** Default `admin.ui.maxStreams`. */
export const DEFAULT_MAX_STREAMS = 8;
/** Default `admin.ui.pushInterval`, ms. */
export const DEFAULT_PUSH_INTERVAL_MS = 1000;

/** The `admin.ui` block of the config schema. */
export const AdminUiSchema = Strict(
  {
    enabled: Type.Optional(
      Type.Boolean({
        default: false,
        description:
          'serve the operator page at /admin/ui (its data and actions need an admin.auth credential); off: /admin/ui is answered as any unknown path',
      }),
    ),
    pushInterval: Type.Optional(Duration({ default: '1s', description: 'how often /admin/ui/events pushes a snapshot to each open page (at least 100ms)' })),
    maxStreams: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: DEFAULT_MAX_STREAMS,
        description: 'most /admin/ui/events streams open at once; the next one is refused with 503',
      }),
    ),
  },
  {
    description:
      'the operator page at /admin/ui: upstreams with scores, error rates, latency, head lag, breakers and cordon buttons, cache hit ratios, rate-limit rejections, consensus disputes, live over Server-Sent Events',
  },
);

/** `admin.ui` as resolved (durations in ms). */
export interface AdminUiSettings {
  enabled?: boolean;
  pushInterval?: number;
  maxStreams?: number;
}

/** The page's lifecycle, driven by the admin plugin. */
export interface AdminUi {
  /** Reads `admin.ui` (the `configured` hook). */
  configure(settings: AdminUiSettings | undefined): void;
  /** Mounts the `/admin/ui` routes (the `routes` hook). */
  mount(router: Router): void;
  /** Ends every open stream (the `closing` hook). */
  close(): void;
  /** Builds the data once (the snapshot route; tests). */
  snapshot(): Promise<UiSnapshot>;
}

/** Longest an event stream stays open before the page must reconnect (and authenticate again), ms. */
export const MAX_STREAM_MS = 10 * 60_000;

/**
 * Creates the page of one svc.
 * @param host the plugin host (projects, chain state, services, metrics registry)
 * @param authenticator the admin authenticator of the moment (undefined while `admin.auth` has no strategy)
 * @param hostCheck the admin's DNS-rebinding guard (host-guard.ts): the refusal of a request's Host, if any
 */
export function adminUi(
  host: PluginHost,
  authenticator: () => Authenticator | undefined,
  hostCheck: (k: Koa.Context) => SvcError | undefined = () => undefined,
): AdminUi {
  let enabled = false;
  let intervalMs = DEFAULT_PUSH_INTERVAL_MS;
  let streams: EventStreams | undefined;

  const breaker = (_n: NetworkLike, u: UpstreamLike): BreakerState => {
    // The failsafe plugin's breakers (BREAKERS_SERVICE); without that plugin: none.
    const list = host.services.get(BREAKERS_SERVICE)?.get(u as Upstream);
    return list ? worstBreaker(list.map((b) => b.state)) : 'none';
  };

  const snapshot = async (): Promise<UiSnapshot> => {
    const samples = new Map<string, readonly MetricSample[]>();
    for (const name of SNAPSHOT_METRICS) {
      const m = host.metrics.getSingleMetric(name);
      if (m) samples.set(name, (await m.get()).values as MetricSample[]);
    }
    const selection = host.services.get(SELECTION_API_SERVICE);
    return buildSnapshot({
      projects: host.projects.values(),
      chainState: (n) => networkChainState(host, n as Network),
      selection: (p, n) => selection?.state(p, n),
      breaker,
      samples,
      version: host.version,
      lifecycle: host.lifecycle,
      intervalMs,
      now: Date.now,
    });
  };

  /** The admin door for a data route: true when the request may read; otherwise the answer is written. */
  const admit = async (k: Koa.Context): Promise<boolean> => {
    const refused = hostCheck(k);
    if (refused) {
      fail(k, refused.httpStatus, refused);
      return false;
    }
    const site = (k.get('Sec-Fetch-Site') || '').toLowerCase();
    // A browser sends Origin on a GET only when it is cross-origin (older browsers have no Sec-Fetch-Site).
    const origin = k.get('Origin');
    if (site === 'cross-site' || site === 'same-site' || (origin !== '' && !sameOrigin(origin, k.host))) {
      fail(k, 403, new ErrInvalidRequest("the admin ui data is not served to another site's page"));
      return false;
    }
    const a = authenticator();
    if (!a) {
      fail(k, 401, new ErrAuthUnauthorized('admin is not enabled: admin.auth.strategies has no strategy'));
      return false;
    }
    try {
      await a.authenticate(host.requestInfo(k));
      return true;
    } catch (e) {
      const err = asSvcError(e);
      fail(k, err.httpStatus, err);
      return false;
    }
  };

  const page =
    (name: string): Koa.Middleware =>
    (k, next) => {
      if (!enabled) return next();
      const refused = hostCheck(k);
      if (refused) {
        fail(k, refused.httpStatus, refused);
        return Promise.resolve();
      }
      const asset = readAsset(name);
      if (!asset) return next();
      k.status = 200;
      k.type = asset.type;
      k.set('Cache-Control', 'no-cache');
      k.set('X-Content-Type-Options', 'nosniff');
      k.set('Referrer-Policy', 'no-referrer');
      if (name === '') {
        // Same-origin scripts only; never framed (no clickjacking of the cordon buttons).
        k.set(
          'Content-Security-Policy',
          "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        );
        k.set('X-Frame-Options', 'DENY');
      }
      k.body = asset.body;
      return Promise.resolve();
    };

  return {
    configure(settings) {
      enabled = settings?.enabled === true;
      intervalMs = Math.max(100, settings?.pushInterval ?? DEFAULT_PUSH_INTERVAL_MS);
      streams?.closeAll();
      streams = new EventStreams({
        maxStreams: settings?.maxStreams ?? DEFAULT_MAX_STREAMS,
        intervalMs,
        produce: async () => JSON.stringify(await snapshot()),
        serving: () => host.lifecycle === 'serving',
        onError: (e) => host.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'admin ui: a snapshot failed'),
      });
    },
    mount(router) {
      router.get('/admin/ui', page(''));
      for (const name of ['app.js', 'style.css', 'uplot.js', 'uplot.css']) router.get(`/admin/ui/${name}`, page(name));
      router.get('/admin/ui/snapshot', async (k, next) => {
        if (!enabled) return next();
        if (!(await admit(k))) return;
        k.status = 200;
        k.type = 'application/json';
        k.set('Cache-Control', 'no-store');
        k.body = JSON.stringify(await snapshot());
      });
      router.get('/admin/ui/events', async (k, next) => {
        if (!enabled) return next();
        if (!(await admit(k))) return;
        if (host.lifecycle !== 'serving') {
          fail(k, 503, new ErrServiceShuttingDown('svc is shutting down'));
          return;
        }
        const res = k.res;
        const body = streams?.add(() => res.writableLength);
        if (!body) {
          fail(k, 503, new ErrInvalidRequest('too many admin ui streams are open (admin.ui.maxStreams)'));
          return;
        }
        // A stream is authenticated once, when it opens: it ends after MAX_STREAM_MS and the page
        // reconnects, so a credential revoked meanwhile (a deleted key, an expired JWT) stops it.
        const lifetime = setTimeout(() => body.end(), MAX_STREAM_MS);
        lifetime.unref();
        body.once('close', () => clearTimeout(lifetime));
        k.req.socket.setNoDelay(true);
        k.req.socket.setTimeout(0);
        k.status = 200;
        k.type = 'text/event-stream';
        k.set('Cache-Control', 'no-store');
        // Never gzipped (a compressor would hold the events back) nor buffered by a reverse proxy.
        k.set('Content-Encoding', 'identity');
        k.set('X-Accel-Buffering', 'no');
        // The socket closes with the stream (on shutdown or drain), so close() is not held by it.
        k.set('Connection', 'close');
        k.body = body;
      });
    },
    close() {
      streams?.closeAll();
    },
    snapshot,
  };
}

/**
 * Whether an `Origin` header names the host the request was sent to (`null`, an opaque origin,
 * never does).
 * @param origin the header's value
 * @param host the request's Host, with port
 */
function sameOrigin(origin: string, host: string): boolean {
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

/** Writes a JSON-RPC-shaped error answer (the shape `/admin` answers with). */
function fail(k: Koa.Context, status: number, err: ReturnType<typeof asSvcError>): void {
  k.status = status;
  k.type = 'application/json';
  k.body = JSON.stringify({ jsonrpc: '2.0', id: null, error: toJsonRpcError(err, undefined, false) });
}
