/** Types of scripts/provision.mjs (`npm test`'s set-up step), for the TypeScript tests. */

/** Where Debian installs PostgreSQL's server binaries, one folder per major version. */
export declare const DEBIAN_PG_ROOT: string;
/** The Debian packages the tests need, in install order. */
export declare const PACKAGES: readonly ['redis-server', 'postgresql', 'openssl', 'prometheus'];

/** Where and as whom to look; each field defaults to the real environment. */
export interface ProvisionOptions {
  /** PATH string to search (default process.env.PATH). */
  path?: string;
  /** Debian PostgreSQL root (default /usr/lib/postgresql). */
  pgRoot?: string;
  /** The caller's uid (default process.getuid()). */
  uid?: number;
  /** Never install, only report (default: SVC_TEST_NO_INSTALL is set). */
  noInstall?: boolean;
}

/** What is installed and whether packages may be installed. */
export interface Found {
  /** Debian package names that are missing, in PACKAGES order. */
  missing: string[];
  /** Root, apt-get on PATH, and installing not disabled. */
  canInstall: boolean;
}

/** The set-up step's decision. */
export type Plan = { action: 'none' } | { action: 'install'; packages: string[]; command: string } | { action: 'fail'; packages: string[]; message: string };

/** Full path of an executable `name` on `path`, or undefined. */
export declare function which(name: string, path: string | undefined): string | undefined;
/** True when `<pgRoot>/<version>/bin/postgres` is executable, or initdb and postgres are on `path`. */
export declare function hasPostgres(path: string | undefined, pgRoot?: string): boolean;
/** Looks for the packages' binaries. */
export declare function detect(opts?: ProvisionOptions): Found;
/** The apt command installing `packages`, with `sudo ` when `sudo`. */
export declare function installCommand(packages: readonly string[], sudo?: boolean): string;
/** Nothing to do, install, or fail with a one-line message naming the command. */
export declare function plan(found: { missing: readonly string[]; canInstall: boolean }, uid?: number): Plan;
/** Detects, installs when allowed and checks again; returns the exit code (0 or 1). */
export declare function provision(opts?: ProvisionOptions): number;
