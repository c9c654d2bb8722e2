/**
 * The integrity plugin's heavy dependencies, loaded lazily and once (issue #14 item 2): viem
 * (keccak256, RLP, transaction serialisation) and @ethereumjs/mpt (the Merkle-Patricia trie of the
 * transactions root). An svc whose calls never ask for integrity never loads either.
 */

/** viem's module namespace (hashing, RLP, transaction formatting and serialisation). */
export type Viem = typeof import('viem');
/** @ethereumjs/mpt's module namespace (the trie that yields a transactions root). */
export type Mpt = typeof import('@ethereumjs/mpt');

/** The libraries every check function is handed. */
export interface IntegrityLibs {
  viem: Viem;
  mpt: Mpt;
}

let loading: Promise<IntegrityLibs> | undefined;

/**
 * Loads viem and @ethereumjs/mpt on first use; later calls share the same promise.
 * @returns both module namespaces
 * @throws whatever `import()` throws when a package is missing (the plugin turns it into ErrInternal)
 */
export function loadLibs(): Promise<IntegrityLibs> {
  loading ??= Promise.all([import('viem'), import('@ethereumjs/mpt')]).then(([viem, mpt]) => ({ viem, mpt }));
  // A failed load is not cached: the next call tries again.
  loading.catch(() => {
    loading = undefined;
  });
  return loading;
}
