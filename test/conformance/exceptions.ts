/**
 * Rules of docs/interface.md that no test carries, with the reason, and deliberate deviations.
 * Read by bin/gen-conformance.ts (docs/conformance.md) and test/conformance/coverage.test.ts.
 */

/** Rule id → why no black-box or unit test can check it (e.g. the document leaves it "not shown"). */
export const UNTESTABLE: Record<string, string> = {
  '§4.4 #7': 'the document leaves the rest of the svc_config and svc_project bodies "not shown"; the described fields are tested under §4.4 svc_config and §4.4 svc_project',
  '§5 #8': 'the document leaves the jwt, siwe and pay-per-request fields "not shown"',
  '§9 #3': 'the document leaves the versioning scheme of the interface "not shown"',
};

/** Rule id → why svc deliberately does something else than the rule says (svc's rule is written down in a docs/ page, linked from the reason). */
export const DEVIATIONS: Record<string, string> = {
  '§2.5 admin.cors.allowedOrigins':
    'no origin by default instead of `[*]`: with `*`, any page a browser on an allowed network opens could drive an admin guarded by a `network` ' +
    'strategy; an operator lists the origins of their own pages ([Admin endpoint](access.md#admin-endpoint-admin))',
  '§4.6 #2':
    'the multiplexing key is the method, the canonical params (the id is not part of it) and the directives that change where an answer comes from ' +
    '(use-upstream, skip-consensus, another integrity level: core/provenance.ts). A call that pins an upstream or asks for a stricter answer never ' +
    'receives the answer of a call that did not; the spec\'s method + params key would hand it one ([Multiplexing](fault-tolerance.md#multiplexing-multiplex))',
};

/** A documented choice (a docs/ page) where svc goes beyond or differs from the document without one rule id. */
export interface ReadmeDeviation {
  /** Where: the spec section and a markdown link to the docs section (relative to docs/conformance.md, where it is rendered). */
  where: string;
  /** What svc does and why. */
  what: string;
}

/** Documented choices of the docs pages that go beyond or differ from the document. */
export const README_DEVIATIONS: ReadmeDeviation[] = [
  { where: '§4.5 ([Directives and diagnostic headers](http-interface.md#directives-and-diagnostic-headers))', what: '`X-SVC-Upstream-Lag` (svc\'s own, not in the document): how many blocks behind the network\'s highest block the upstream of a pinned (`use-upstream`) call was' },
  { where: '§4.5 ([Directives and diagnostic headers](http-interface.md#directives-and-diagnostic-headers))', what: '`X-SVC-Error` (svc\'s own): the error name of an error answer; trace outcome `error` (svc\'s own word) for a failure that is neither a timeout, a revert nor a rate limit, so that no spec word blames the wrong cause' },
  { where: '§4.2 ([HTTP interface](http-interface.md))', what: 'an inbound batch runs at most `server.batchConcurrency` (100) elements at a time and holds at most `server.maxBatchSize` (1000) elements (HTTP 400 -32600 beyond), so one huge batch cannot starve other clients' },
  { where: '§4.1 ([HTTP interface](http-interface.md))', what: 'where the document says "not shown": an unknown project or network answers HTTP 404 with JSON-RPC code -32602; a single call svc itself fails on answers HTTP 500; `Content-Type` is exactly `application/json`' },
  { where: '§4.3 ([Healthcheck and graceful drain](http-interface.md#healthcheck-and-graceful-drain))', what: 'where the document is silent: `simple` answers JSON rather than a bare `OK`; `status` is `OK` or `ERROR`; unhealthy is 503 in every mode' },
  { where: '§3.1 ([Admin endpoint](access.md#admin-endpoint-admin))', what: 'where the document is silent: uncordoning `*` leaves method-scoped cordons in place' },
  {
    where: '§4.1, §4.2 #3 ([HTTP interface](http-interface.md), "Early refusals")',
    what:
      'a batch refused as a whole before any element ran (unknown project or network, auth, drain, over-size) answers one error per element with its own id ' +
      'and keeps the refusal\'s HTTP status (404 as §4.1 says for unknown chains, 401, 503, 413), so clients, load balancers and retries see it; a batch whose ' +
      'elements ran is HTTP 200 whatever they answered, as §4.2 #3 says',
  },
  {
    where: '§3.2 closing → stopped ([Healthcheck and graceful drain](http-interface.md#healthcheck-and-graceful-drain))',
    what: 'the listener closes once the last in-flight request has ended, at the latest when `server.waitAfterShutdown` elapses: with nothing in flight svc stops at once instead of idling out the window',
  },
];
