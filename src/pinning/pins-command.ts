/**
 * `switchboard pins <export|list|approve> --config f.yaml` (issue 31 §2; docs/pinning.md):
 * the pins in the store the gateway's replicas share, from the command line.
 *
 * - `export [--out pins.json]` writes every pinned backend's pins (the definitions the store
 *   holds) as a pins file, for `pinning.lockfile` and for review in version control; with
 *   `pinning.scope: user` only the definitions every user's pins agree on — a tool whose users'
 *   pins differ is left out, and the command says so (stderr, or its message with `--out`);
 * - `list` prints the changes waiting for approval, one line per change and user (the user as
 *   the first 8 characters of their opaque key; `all users` for `scope: backend`);
 * - `approve --backend X [--tool Y]` makes the pending definitions the pins, in every user's
 *   book, and tells every replica (a `pins-changed` broadcast): their live sessions hear
 *   `tools/list_changed`.
 *
 * Only with `redis`: the memory store is the serving process's own memory, which no other
 * process can read (the admin route, `POST /admin/pins/approve`, reaches it).
 */
import { writeFileSync } from 'node:fs';
import { ConfigError } from '../config/errors.js';
import { findConfigFile, loadConfigFile } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { createState } from '../state/create-state.js';
import { approvePending, readPins, type DifferingTool, type PendingChange } from './stored-pins.js';

export const PINS_USAGE = `usage:
  switchboard pins export --config <file.yaml> [--out <pins.json>]  the pins in the store, as a lockfile
  switchboard pins list --config <file.yaml>                        changes waiting for approval
  switchboard pins approve --config <file.yaml> --backend <name> [--tool <name>]
`;

const flag = (args: readonly string[], name: string): string | undefined => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};

const leftOut = (differing: readonly DifferingTool[]) =>
  `left out, users' pins differ (pinning.scope user): ${differing.map((d) => `${d.backend}/${d.tool} (${d.definitions} definitions)`).join(', ')}`;

const pendingLine = (c: PendingChange) =>
  `${c.backend}\t${c.tool}\tpinned ${c.pinned?.fingerprint.slice(0, 12) ?? '(none)'}\tseen ${c.seen.fingerprint.slice(0, 12)}\tsince ${c.seen.at}\t${c.user === undefined ? 'all users' : `user ${c.user.slice(0, 8)}`}`;

/** Runs one `pins` subcommand; returns what to print (`warn`: notes beside it, on stderr). */
export async function runPinsCommand(args: readonly string[], env: NodeJS.ProcessEnv, warn: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): Promise<string> {
  const [sub, ...rest] = args;
  if (sub !== 'export' && sub !== 'list' && sub !== 'approve') throw new ConfigError([], `pins needs export, list or approve\n${PINS_USAGE}`);
  const file = findConfigFile(rest, env);
  if (!file) throw new ConfigError([], `pins ${sub} needs a config file: --config <file.yaml>, $SWITCHBOARD_CONFIG or ./switchboard.yaml`);
  const config = loadConfigFile(file, env);
  if (!config.redis) throw new ConfigError(['redis'], 'pins commands read the store the replicas share, which needs redis; a gateway without redis keeps its pins in its own memory (approve with POST /admin/pins/approve on its metrics listener)');
  const pinned = config.backends.filter((b) => b.pinning.mode !== 'off').map((b) => ({ name: b.name, scope: b.pinning.scope }));
  const state = await createState(config, { warn: () => {} });
  try {
    if (sub === 'approve') return await approve(config, rest, state);
    const { pins, pending, differing } = await readPins(state.store, pinned);
    if (sub === 'export') {
      const text = `${JSON.stringify(pins, null, 2)}\n`;
      const out = flag(rest, '--out');
      if (!out) {
        if (differing.length) warn(leftOut(differing));
        return text;
      }
      writeFileSync(out, text);
      return `wrote the pins of ${pinned.length} backend(s) to ${out}${differing.length ? `; ${leftOut(differing)}` : ''}`;
    }
    return pending.length ? pending.map(pendingLine).join('\n') : 'no changes wait for approval';
  } finally {
    await state.close();
  }
}

async function approve(config: Config, args: readonly string[], state: Awaited<ReturnType<typeof createState>>): Promise<string> {
  const backend = flag(args, '--backend');
  const tool = flag(args, '--tool');
  const b = config.backends.find((x) => x.name === backend);
  if (!backend || !b) throw new ConfigError([], `pins approve needs --backend <name> of a configured backend${backend ? ` (no backend "${backend}")` : ''}`);
  if (b.pinning.lockfile) throw new ConfigError(['backends', backend, 'pinning', 'lockfile'], 'the pins of this backend are its lockfile: export the new definitions and replace the file instead');
  const approved = await approvePending(state.store, backend, tool);
  if (approved.length) await state.coordinator.broadcast({ type: 'pins-changed', backend, approved: true });
  return approved.length ? `approved ${backend}: ${approved.join(', ')}` : `nothing waits for approval on ${backend}${tool ? ` (tool ${tool})` : ''}`;
}
