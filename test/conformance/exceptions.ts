/**
 * Rules of docs/interface.md that no test carries, with the reason, and deliberate deviations.
 * Read by bin/gen-conformance.ts (docs/conformance.md) and test/conformance/coverage.test.ts.
 */

/** Rule id → why no black-box or unit test can check it (e.g. the document leaves it "not shown"). */
export const UNTESTABLE: Record<string, string> = {
  '§4.4 #7':
    'the document leaves the rest of the svc_config and svc_project bodies "not shown"; the described fields are tested under §4.4 svc_config and §4.4 svc_project',
  '§5 #8': 'the document leaves the jwt, siwe and pay-per-request fields "not shown"',
  '§9 #3': 'the document leaves the versioning scheme of the interface "not shown"',
  '§2 ¶1': 'the document leaves the full configuration schemas "not shown"; each field it lists is a rule of its own',
  '§2.1 ¶1': 'where the cordon flag is kept is an implementation detail with no observable of its own; what a cordon does is tested under §3.1',
  '§2.6 ¶1': "restates that the three fields' defaults are the ones shown; each default is tested under its own §2.6 row",
  '§3.1 ¶4': 'the document leaves the effect of uncordoning `*` on method-scoped cordons "not shown" (svc\'s choice is listed below)',
  '§3.2 ¶1': "a recommendation to operators about their orchestrator's probe settings, not a behaviour of the service",
  '§4.1 ¶3': 'the document leaves listener ports and their configuration keys "not shown"',
  '§4.3 ¶8': 'the document leaves the values of status other than `OK` "not shown" (svc\'s choice is listed below)',
  '§4.4 ¶3': 'a cross-reference: admin authentication is the §5 rules, tested under their ids',
  '§6 ¶1': 'the document leaves push event delivery "not shown"',
  '§6 ¶2': 'introduces the §6 metrics table; each metric is a rule of its own',
  '§7 ¶1': 'the document leaves the other numeric error codes and the admin errors\' HTTP status "not shown"',
  '§8 ¶1': 'the document leaves the maximum `limit` of svc_listApiKeys "not shown"',
  '§8 ¶2': 'the document leaves those numeric values "not shown"',
  '§8 ¶3': 'the document leaves request-rate limits of the service\'s own endpoints "not shown"',
};

/** Rule id → why svc deliberately does something else than the rule says (svc's rule is written down in a docs/ page, linked from the reason). */
export const DEVIATIONS: Record<string, string> = {
  '§2.5 admin.cors.allowedOrigins':
    'no origin by default instead of `[*]`: with `*`, any page a browser on an allowed network opens could drive an admin guarded by a `network` ' +
    'strategy; an operator lists the origins of their own pages ([Admin endpoint](access.md#admin-endpoint-admin))',
  '§4.6 #2':
    'the multiplexing key is the method, the canonical params (the id is not part of it) and the directives that change where an answer comes from ' +
    '(use-upstream, skip-consensus, another integrity level: plugins/multiplex/api.ts). A call that pins an upstream or asks for a stricter answer never ' +
    "receives the answer of a call that did not; the spec's method + params key would hand it one ([Multiplexing](fault-tolerance.md#multiplexing-multiplex))",
  '§4.2 #3':
    'a batch refused as a whole before any element ran (unknown project or network, auth, drain, over-size) answers one error per element with its own id ' +
    "and keeps the refusal's HTTP status (404 as §4.1 says for unknown chains, 401, 503, 413) instead of 200, so clients, load balancers and retries see it; " +
    'a batch whose elements ran is HTTP 200 whatever they answered, as the rule says ([HTTP interface](http-interface.md), "Early refusals")',
  '§3.2 closing':
    'the listener closes once the last in-flight request has ended, at the latest when `server.waitAfterShutdown` elapses: with nothing in flight svc ' +
    'stops at once instead of idling out the window ([Healthcheck and graceful drain](http-interface.md#healthcheck-and-graceful-drain))',
  '§4.5 X-SVC-Upstreams':
    "besides the document's outcome words, a segment may carry svc's own outcome `error` for a failure that is neither a timeout, a revert nor a " +
    'rate limit, so that no spec word blames the wrong cause ([Directives and diagnostic headers](http-interface.md#directives-and-diagnostic-headers))',
  '§3.5 pending / queued request has a JSON-RPC id already pending':
    'svc numbers every outbound call itself, so two queued calls never share an id: two client calls with the same id go out in one batch ' +
    'under distinct ids and each gets its own answer. The queue implements the flush-then-re-queue rule (its test below), but through the ' +
    'batching plugin the situation never arises ([Outbound batching](fault-tolerance.md#outbound-batching-batching))',
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
  {
    where: '§4.5 ([Directives and diagnostic headers](http-interface.md#directives-and-diagnostic-headers))',
    what: "`X-SVC-Upstream-Lag` (svc's own, not in the document): how many blocks behind the network's highest block the upstream of a pinned (`use-upstream`) call was",
  },
  {
    where: '§4.5 ([Directives and diagnostic headers](http-interface.md#directives-and-diagnostic-headers))',
    what: "`X-SVC-Error` (svc's own header, not in the document): the error name of an error answer",
  },
  {
    where: '§4.2 ([HTTP interface](http-interface.md))',
    what: 'an inbound batch runs at most `server.batchConcurrency` (100) elements at a time and holds at most `server.maxBatchSize` (1000) elements (HTTP 400 -32600 beyond), so one huge batch cannot starve other clients',
  },
  {
    where: '§4.1 ([HTTP interface](http-interface.md))',
    what: 'where the document says "not shown": an unknown project or network answers HTTP 404 with JSON-RPC code -32602; a single call svc itself fails on answers HTTP 500; `Content-Type` is exactly `application/json`',
  },
  {
    where: '§4.3 ([Healthcheck and graceful drain](http-interface.md#healthcheck-and-graceful-drain))',
    what: 'where the document is silent: `simple` answers JSON rather than a bare `OK`; `status` is `OK` or `ERROR`; unhealthy is 503 in every mode',
  },
  {
    where: '§3.1 ([Admin endpoint](access.md#admin-endpoint-admin))',
    what: 'where the document is silent: uncordoning `*` leaves method-scoped cordons in place',
  },
];
