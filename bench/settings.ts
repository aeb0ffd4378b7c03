/**
 * What a bench run does and for how long: `--quick` (a smoke run of about four minutes) or
 * the full run (about twelve), and the flags that override either. See bench/README.md.
 */
export interface Settings {
  mode: 'quick' | 'full';
  profile: boolean;
  connections: number;
  warmupMs: number;
  /** Closed-loop rounds under the undici load generator (bench/load.ts), per path. */
  throughputRounds: number;
  throughputMs: number;
  /** Closed-loop rounds under autocannon (bench/autocannon.ts), per path. */
  autocannonRounds: number;
  autocannonMs: number;
  latencyRounds: number;
  latencyMs: number;
  /** Rounds per gateway of the Redis Cluster comparison (bench/cluster.ts). */
  clusterRounds: number;
  newSessions: number;
  idleStreams: number;
  monitorCalls: number;
  /** The answer-shape phase (bench/shapes.ts): rounds per path under each generator, their length, open-loop rounds. */
  shapes: { rounds: number; autocannonRounds: number; roundMs: number; warmupMs: number; latencyRounds: number };
  /** The whole run is aborted after this long. */
  deadlineMs: number;
}

const QUICK: Settings = {
  mode: 'quick',
  profile: false,
  connections: 16,
  warmupMs: 2000,
  throughputRounds: 2,
  throughputMs: 2000,
  autocannonRounds: 2,
  autocannonMs: 2000,
  latencyRounds: 2,
  latencyMs: 2000,
  clusterRounds: 2,
  newSessions: 100,
  idleStreams: 1000,
  monitorCalls: 300,
  // One round each: the three shapes must fit in --quick's few minutes.
  shapes: { rounds: 1, autocannonRounds: 1, roundMs: 1500, warmupMs: 1000, latencyRounds: 1 },
  // +2 min for the stdio phase (bench/stdio.ts).
  deadlineMs: 1_035_000,
};

const FULL: Settings = {
  mode: 'full',
  profile: false,
  connections: 16,
  warmupMs: 3000,
  throughputRounds: 5,
  throughputMs: 4000,
  autocannonRounds: 3,
  autocannonMs: 4000,
  latencyRounds: 3,
  latencyMs: 4000,
  clusterRounds: 3,
  newSessions: 200,
  idleStreams: 10_000,
  monitorCalls: 1000,
  shapes: { rounds: 3, autocannonRounds: 2, roundMs: 2500, warmupMs: 2000, latencyRounds: 2 },
  // +5 min for the stdio phase (bench/stdio.ts).
  deadlineMs: 2_310_000,
};

const USAGE =
  'usage: npm run bench -- [--quick] [--profile] [--streams K] [--rounds N] [--seconds S]\n' +
  '  --quick     ~4 minute smoke run (fewer/shorter rounds, 1,000 idle streams)\n' +
  '  --profile   run the default-configuration gateway with --cpu-prof and print its top self-time functions\n' +
  '  --rounds N  throughput rounds per path under each load generator\n' +
  '  --seconds S length of every throughput and latency round\n';

export function parseArgs(argv: string[]): Settings {
  if (argv.includes('--help')) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const s: Settings = { ...(argv.includes('--quick') ? QUICK : FULL) };
  s.profile = argv.includes('--profile');
  const num = (flag: string): number | undefined => {
    const i = argv.indexOf(flag);
    if (i < 0) return undefined;
    const v = Number(argv[i + 1]);
    if (!Number.isFinite(v) || v <= 0) throw new Error(`${flag} needs a positive number`);
    return v;
  };
  s.idleStreams = num('--streams') ?? s.idleStreams;
  const rounds = num('--rounds');
  if (rounds) s.throughputRounds = s.autocannonRounds = s.clusterRounds = rounds;
  const seconds = num('--seconds');
  if (rounds) s.shapes = { ...s.shapes, rounds, autocannonRounds: rounds, latencyRounds: rounds };
  if (seconds) s.throughputMs = s.autocannonMs = s.latencyMs = seconds * 1000;
  if (seconds) s.shapes = { ...s.shapes, roundMs: seconds * 1000 };
  return s;
}
