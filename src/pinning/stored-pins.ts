/**
 * The pins in the store across books (issue 31 §2, issue 41 §2), for the operator: approving
 * a backend's pending changes in every book that holds one (the backend's and each user's),
 * listing them, and the definitions a lockfile may take (`switchboard pins export`): with
 * `pinning.scope: user`, only those every user's pins agree on. Used by the CLI and by the
 * admin route (through pinning.ts); the caller broadcasts `pins-changed` so every replica
 * reads the pins again.
 *
 * Users are found through two indexes the books keep (pin-book.ts): who has pins of a backend
 * (`pins-users:{backend}`) and who may have changes pending (`pins-pending-users:{backend}`).
 */
import type { PinningScope } from '../config/pinning-schema.js';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';
import { bookKeys, parsePins, type Pin, type PinsFile } from './pin-book.js';

/** One change waiting for approval in one book. */
export interface PendingChange {
  backend: string;
  tool: string;
  /** Whose book (an opaque user key); undefined: the backend's (`scope: backend`). */
  user?: string;
  pinned?: Pin;
  seen: Pin;
}

/** A tool left out of an export: users' pins of it hold different definitions. */
export interface DifferingTool {
  backend: string;
  tool: string;
  definitions: number;
}

/** Books read or written at once (the store is shared with serving replicas). */
const AT_ONCE = 16;

async function eachUser(users: readonly string[], work: (user: string) => Promise<void>): Promise<void> {
  for (let i = 0; i < users.length; i += AT_ONCE) await Promise.all(users.slice(i, i + AT_ONCE).map(work));
}

const usersIn = async (store: StateStore, index: string): Promise<string[]> => Object.keys(await store.getFields(index));

/**
 * Approves the pending changes of a backend (one tool, or all) in every book: each becomes
 * the pin of the book it waited in, marked as the operator's (`approvedAt`), and leaves the
 * pending list. Returns the tools approved (each once, however many users had it pending).
 */
export async function approvePending(store: StateStore, backend: string, tool?: string): Promise<string[]> {
  const approved = new Set<string>();
  const at = new Date().toISOString();
  await approveBook(store, bookKeys(backend), tool, at, approved);
  const index = ValueKeys.pinPendingUsers(backend);
  await eachUser(await usersIn(store, index), async (user) => {
    // Out of the index first, back in when something still waits: a change a replica records
    // meanwhile (pending first, then the index) is never left out of it.
    await store.deleteField(index, user);
    if (await approveBook(store, bookKeys(backend, user), tool, at, approved)) await store.putField(index, user, at);
  });
  return [...approved];
}

/** Approves one book's pending changes; true when some are still pending afterwards. */
async function approveBook(store: StateStore, keys: { pins: string; pending: string }, tool: string | undefined, at: string, approved: Set<string>): Promise<boolean> {
  for (const [name, pin] of parsePins(await store.getFields(keys.pending))) {
    if (tool !== undefined && name !== tool) continue;
    await store.putField(keys.pins, name, JSON.stringify({ ...pin, approvedAt: at }));
    await store.deleteField(keys.pending, name);
    approved.add(name);
  }
  return Object.keys(await store.getFields(keys.pending)).length > 0;
}

/** A pin as a lockfile holds it: operator data, without whose list it came from. */
const asLocked = (pin: Pin): Pin => ({ fingerprint: pin.fingerprint, tool: pin.tool, at: pin.at });

/**
 * Every pending change of the backends named, and the pins to export: for `scope: backend`
 * the backend's pins; for `scope: user` each tool whose users' pins all hold one definition
 * (the earliest of them), the others listed in `differing`.
 */
export async function readPins(store: StateStore, backends: ReadonlyArray<{ name: string; scope: PinningScope }>): Promise<{ pins: PinsFile; pending: PendingChange[]; differing: DifferingTool[] }> {
  const pins: PinsFile = { schema: 'switchboard.pins/v1', backends: {} };
  const pending: PendingChange[] = [];
  const differing: DifferingTool[] = [];
  for (const { name: backend, scope } of backends) {
    const shared = parsePins(await store.getFields(bookKeys(backend).pins));
    pending.push(...changesOf(backend, undefined, shared, parsePins(await store.getFields(bookKeys(backend).pending))));
    const byUser = new Map<string, Map<string, Pin>>();
    const users = new Set([...(await usersIn(store, ValueKeys.pinUsers(backend))), ...(await usersIn(store, ValueKeys.pinPendingUsers(backend)))]);
    await eachUser([...users], async (user) => {
      const keys = bookKeys(backend, user);
      const [own, waiting] = await Promise.all([store.getFields(keys.pins), store.getFields(keys.pending)]);
      byUser.set(user, parsePins(own));
      pending.push(...changesOf(backend, user, byUser.get(user)!, parsePins(waiting)));
    });
    if (scope === 'backend') pins.backends[backend] = Object.fromEntries([...shared].map(([tool, pin]) => [tool, asLocked(pin)]));
    else pins.backends[backend] = agreed(backend, byUser, differing);
  }
  return { pins, pending, differing };
}

function changesOf(backend: string, user: string | undefined, pins: ReadonlyMap<string, Pin>, waiting: ReadonlyMap<string, Pin>): PendingChange[] {
  return [...waiting].map(([tool, seen]) => ({ backend, tool, ...(user === undefined ? {} : { user }), pinned: pins.get(tool), seen }));
}

/** The tools whose pins agree across users (one fingerprint), each as its earliest pin. */
function agreed(backend: string, byUser: ReadonlyMap<string, ReadonlyMap<string, Pin>>, differing: DifferingTool[]): Record<string, Pin> {
  const seen = new Map<string, Map<string, Pin>>();
  for (const pins of byUser.values()) {
    for (const [tool, pin] of pins) {
      const versions = seen.get(tool) ?? new Map<string, Pin>();
      const known = versions.get(pin.fingerprint);
      if (!known || pin.at < known.at) versions.set(pin.fingerprint, pin);
      seen.set(tool, versions);
    }
  }
  const out: Record<string, Pin> = {};
  for (const [tool, versions] of [...seen].sort(([a], [b]) => a.localeCompare(b))) {
    if (versions.size === 1) out[tool] = asLocked([...versions.values()][0]!);
    else differing.push({ backend, tool, definitions: versions.size });
  }
  return out;
}
