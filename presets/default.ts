/**
 * The default preset: the full server. Order matters only for `dependsOn`; hook order is set
 * by stage numbers (core/pipeline/stages.ts), never by registration accident.
 */
import type { Plugin } from '../core/host/proxy.ts';
import { adminPlugin } from '../plugins/admin/index.ts';
import { authPlugin } from '../plugins/auth/index.ts';
import { batchingPlugin } from '../plugins/batching/index.ts';
import { bdsPlugin } from '../plugins/bds/index.ts';
import { corsPlugin } from '../plugins/cors/index.ts';
import { directivesPlugin } from '../plugins/directives/index.ts';
import { evmGetLogsPlugin } from '../plugins/evm-getlogs/index.ts';
import { evmInterpolationPlugin } from '../plugins/evm-interpolation/index.ts';
import { evmMethodsPlugin } from '../plugins/evm-methods/index.ts';
import { evmNoncePlugin } from '../plugins/evm-nonce/index.ts';
import { filtersPlugin } from '../plugins/filters/index.ts';
import { broadcastPlugin } from '../plugins/broadcast/index.ts';
import { contractRulesPlugin } from '../plugins/contract-rules/index.ts';
import { forwardHeadersPlugin } from '../plugins/forward-headers/index.ts';
import { evmRetriesPlugin } from '../plugins/evm-retries/index.ts';
import { evmAnswerSanityPlugin } from '../plugins/evm-answer-sanity/index.ts';
import { evmStatePlugin } from '../plugins/evm-state/index.ts';
import { failsafePlugin } from '../plugins/failsafe/index.ts';
import { evmErrorsPlugin } from '../plugins/evm-errors/index.ts';
import { outboundPlugin } from '../plugins/outbound/index.ts';
import { compressionPlugin } from '../plugins/compression/index.ts';
import { tlsPlugin } from '../plugins/tls/index.ts';
import { forwardPlugin } from '../plugins/forward/index.ts';
import { headersPlugin } from '../plugins/headers/index.ts';
import { healthPlugin } from '../plugins/health/index.ts';
import { healthcheckPlugin } from '../plugins/healthcheck/index.ts';
import { tracingPlugin } from '../plugins/tracing/index.ts';
import { rateLimitPlugin } from '../plugins/rate-limit/index.ts';
import { providersPlugin } from '../plugins/providers/index.ts';
import { repositoryVendorPlugin } from '../plugins/vendor-repository/index.ts';
import { hyperVendorPlugin } from '../plugins/vendor-hyper/index.ts';
import { vendorsPlugin } from '../plugins/vendors/index.ts';
import { costPlugin } from '../plugins/cost/index.ts';
import { metricsPlugin } from '../plugins/metrics/index.ts';
import { multiplexPlugin } from '../plugins/multiplex/index.ts';
import { staticResponsesPlugin } from '../plugins/static-responses/index.ts';
import { cachePlugin } from '../plugins/cache/index.ts';
import { consensusPlugin } from '../plugins/consensus/index.ts';
import { integrityPlugin } from '../plugins/integrity/index.ts';
import { shadowPlugin } from '../plugins/shadow/index.ts';
import { selectPlugin } from '../plugins/select/index.ts';
import { selectionPlugin } from '../plugins/selection/index.ts';
import { sharedStatePlugin } from '../plugins/shared-state/index.ts';
import { websocketPlugin } from '../plugins/websocket/index.ts';
import { x402Plugin } from '../plugins/x402/index.ts';

/** Plugins of the full server, in apply order. */
export function defaultPreset(): Plugin[] {
  return [
    directivesPlugin(),
    healthPlugin(),
    selectionPlugin(),
    selectPlugin(),
    forwardPlugin(),
    evmErrorsPlugin(),
    outboundPlugin(),
    compressionPlugin(),
    tlsPlugin(),
    forwardHeadersPlugin(),
    staticResponsesPlugin(),
    multiplexPlugin(),
    cachePlugin(),
    batchingPlugin(),
    bdsPlugin(),
    failsafePlugin(),
    evmStatePlugin(),
    sharedStatePlugin(),
    evmInterpolationPlugin(),
    evmGetLogsPlugin(),
    evmRetriesPlugin(),
    evmAnswerSanityPlugin(),
    evmMethodsPlugin(),
    evmNoncePlugin(),
    filtersPlugin(),
    broadcastPlugin(),
    contractRulesPlugin(),
    headersPlugin(),
    metricsPlugin(),
    healthcheckPlugin(),
    tracingPlugin(),
    providersPlugin(),
    repositoryVendorPlugin(),
    hyperVendorPlugin(),
    vendorsPlugin(),
    costPlugin(),
    authPlugin(),
    x402Plugin(),
    adminPlugin(),
    corsPlugin(),
    rateLimitPlugin(),
    consensusPlugin(),
    integrityPlugin(),
    shadowPlugin(),
    websocketPlugin(),
  ];
}
