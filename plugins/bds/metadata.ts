/**
 * `grpc.headers` → the gRPC metadata sent on every call of a BDS upstream. What the config schema (./index.ts) refuses is exactly
 * what would fail later: grpc-js refuses a value outside printable ASCII or a name outside its alphabet when the metadata is built
 * (at start, or halfway through a reload), and Node's HTTP/2 refuses connection-specific headers on every call (RFC 9113 §8.2.2:
 * `connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`, and `te` other than `trailers`), as gRPC's own
 * names (`grpc-*`), binary ones (`*-bin`, which would need base64 bytes) and pseudo-headers (`:authority`) would break the call.
 */
import { Metadata } from '@grpc/grpc-js';

/** Header names HTTP/2 forbids in a request (RFC 9113 §8.2.2), `te` aside; plus `host`, which `:authority` replaces. */
export const CONNECTION_HEADERS: readonly string[] = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host'];

/** A regular expression source matching `word` in any letter case (JSON Schema patterns have no `i` flag). */
function anyCase(word: string): string {
  return word.replace(/[a-z]/g, (c) => `[${c.toUpperCase()}${c}]`);
}

/**
 * A metadata name `grpc.headers` may hold (any case: names are lower-cased before sending): letters, digits, `-`, `_`, `.`; not a
 * reserved `grpc-*` name, a binary `*-bin` one, or one of {@link CONNECTION_HEADERS}.
 */
export const METADATA_NAME = `^(?!${anyCase('grpc')}-)(?!.*-${anyCase('bin')}$)(?!(?:${CONNECTION_HEADERS.map(anyCase).join('|')})$)[A-Za-z0-9_.-]+$`;

/** A metadata value: printable ASCII (grpc-js refuses anything else). */
export const METADATA_VALUE = '^[ -~]*$';

/** The one value HTTP/2 allows for `te`. */
export const TE_VALUE = 'trailers';

const NAME = new RegExp(METADATA_NAME);
const VALUE = new RegExp(METADATA_VALUE);

/**
 * The metadata of `grpc.headers`, names lower-cased.
 * @param headers name → value, as configured
 * @throws TypeError naming the header (never its value, which is often a credential) when it cannot be sent
 */
export function metadataOf(headers: Readonly<Record<string, string>>): Metadata {
  const md = new Metadata();
  for (const [name, value] of Object.entries(headers)) {
    const key = name.toLowerCase();
    const ok = key === 'te' ? value === TE_VALUE : NAME.test(name) && typeof value === 'string' && VALUE.test(value);
    if (ok) {
      try {
        md.set(key, value);
        continue;
      } catch {
        // grpc-js's message quotes the value: replaced below by one that does not.
      }
    }
    throw new TypeError(
      `grpc.headers: ${JSON.stringify(name.slice(0, 64))} cannot be sent as gRPC metadata (names: letters, digits, '-', '_', '.', not grpc-*, *-bin or a connection header; values: printable ASCII; te: trailers only)`,
    );
  }
  return md;
}
