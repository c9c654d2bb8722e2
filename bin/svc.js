#!/usr/bin/env node
// Entry point of the `svc` command: runs the TypeScript CLI through tsx, so `npx svc ...`
// works right after `npm ci` with no separate build step.
import { register } from 'tsx/esm/api';

register();
await import('./svc.ts');
