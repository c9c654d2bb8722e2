/**
 * The integrity plugin's heavy dependencies, loaded lazily and once: viem
 * (keccak256, RLP, transaction serialisation) and @ethereumjs/mpt (the Merkle-Patricia trie of the
 * transactions root). An svc whose calls never ask for integrity never loads either.
 */

/** viem's module namespace (hashing, RLP, transaction formatting and serialisation). */
export type Viem = typeof import('viem');
/**
 * The part of @ethereumjs/mpt the checks use (the trie that yields a transactions root), typed
 * here rather than as the package's namespace: svc's published declarations must not pull in
 * that package's own type dependencies (`debug`, `@ethereumjs/common`), which a plugin package
 * compiling against svc would then need.
 */
export interface Mpt {
  /** A fresh in-memory trie. */
  createMPT(): Promise<{ put(key: Uint8Array, value: Uint8Array): Promise<void>; root(): Uint8Array }>;
}

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
  loading ??= Promise.all([import('viem'), import('@ethereumjs/mpt')]).then(([viem, mpt]) => ({ viem, mpt: mpt as Mpt }));
  // A failed load is not cached: the next call tries again.
  loading.catch(() => {
    loading = undefined;
  });
  return loading;
}
