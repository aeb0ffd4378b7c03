/**
 * Coordination for a single replica (the in-memory default). Leases and the mailbox are
 * plain maps; a replica's messages go to itself. `watchStream` has nothing to watch: with
 * one replica a stream still being read is always found in the local stream registry.
 */
import { randomUUID } from 'node:crypto';
import type { Coordinator, ReplicaMessage, StandaloneClaim, StreamHolder } from './coordinator.js';
import type { StreamKey } from './store.js';

interface Expiring<T> {
  value: T;
  expiresAt: number;
}

export class MemoryCoordinator implements Coordinator {
  readonly replicaId = randomUUID();
  readonly #standalone = new Map<string, Expiring<StreamHolder>>();
  readonly #streams = new Map<string, Expiring<string>>();
  readonly #mailboxes = new Map<string, Expiring<string[]>>();
  readonly #handlers: Array<(message: ReplicaMessage) => void> = [];

  async claimStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number, force: boolean): Promise<StandaloneClaim> {
    const key = `${userKey}:${sessionId}`;
    const previous = live(this.#standalone, key);
    if (previous && !force) return { granted: false, previous, mailbox: [] };
    this.#standalone.set(key, { value: { replicaId: this.replicaId, streamId }, expiresAt: Date.now() + ttlMs });
    const mailbox = live(this.#mailboxes, key) ?? [];
    this.#mailboxes.delete(key);
    return { granted: true, previous, mailbox };
  }

  async renewStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number): Promise<boolean> {
    const entry = this.#standalone.get(`${userKey}:${sessionId}`);
    if (!entry || entry.expiresAt <= Date.now() || entry.value.streamId !== streamId) return false;
    entry.expiresAt = Date.now() + ttlMs;
    return true;
  }

  async renewStandalones(claims: readonly StreamKey[], ttlMs: number): Promise<boolean[]> {
    return Promise.all(claims.map((c) => this.renewStandalone(c.userKey, c.sessionId, c.streamId, ttlMs)));
  }

  async releaseStandalone(userKey: string, sessionId: string, streamId: string): Promise<void> {
    const key = `${userKey}:${sessionId}`;
    if (this.#standalone.get(key)?.value.streamId === streamId) this.#standalone.delete(key);
  }

  async standaloneHolder(userKey: string, sessionId: string): Promise<StreamHolder | undefined> {
    return live(this.#standalone, `${userKey}:${sessionId}`);
  }

  async holdStream(key: StreamKey, ttlMs: number): Promise<void> {
    this.#streams.set(streamId(key), { value: this.replicaId, expiresAt: Date.now() + ttlMs });
  }

  async releaseStream(key: StreamKey): Promise<void> {
    this.#streams.delete(streamId(key));
  }

  async streamHolder(key: StreamKey): Promise<string | undefined> {
    return live(this.#streams, streamId(key));
  }

  async watchStream(): Promise<() => Promise<void>> {
    return async () => {};
  }

  async send(replicaId: string, message: ReplicaMessage): Promise<void> {
    if (replicaId !== this.replicaId) return;
    for (const handler of this.#handlers) handler(message);
  }

  async broadcast(message: ReplicaMessage): Promise<void> {
    await this.send(this.replicaId, message);
  }

  onMessage(handler: (message: ReplicaMessage) => void): void {
    this.#handlers.push(handler);
  }

  async postToMailbox(userKey: string, sessionId: string, data: string, ttlMs: number, maxMessages: number): Promise<void> {
    const key = `${userKey}:${sessionId}`;
    const entry = live(this.#mailboxes, key) ?? [];
    entry.push(data);
    if (entry.length > maxMessages) entry.splice(0, entry.length - maxMessages);
    this.#mailboxes.set(key, { value: entry, expiresAt: Date.now() + ttlMs });
  }

  async close(): Promise<void> {
    this.#standalone.clear();
    this.#streams.clear();
    this.#mailboxes.clear();
  }
}

function live<T>(map: Map<string, Expiring<T>>, key: string): T | undefined {
  const entry = map.get(key);
  if (!entry) return undefined;
  if (entry.expiresAt > Date.now()) return entry.value;
  map.delete(key);
  return undefined;
}

const streamId = (k: StreamKey) => `${k.userKey}:${k.sessionId}:${k.streamId}`;
