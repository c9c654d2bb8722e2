/** `npm run bench:hedge`: only the hedging scenario of `npm run bench`, short runs. */
import { hedgeScenario } from './hedge.ts';
import { benchSettings } from './lib.ts';
process.stdout.write((await hedgeScenario({ ...benchSettings(), durationS: 3, reps: 1, warmupS: 1 })) + '\n');
