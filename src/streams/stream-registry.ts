/**
 * The SSE relays this replica is running right now. A reconnecting client is attached to
 * its live relay when it lands on the replica that runs it; otherwise the stream is rebuilt
 * from the replay log in the store (see stream-service.ts). Each session has at most one
 * standalone (GET) stream, where gateway-originated notifications go.
 */
import { OpenListens } from './open-listens.js';
import type { StreamRelay } from './stream-relay.js';

export class StreamRegistry {
  readonly #relays = new Map<string, StreamRelay>();
  readonly #standalone = new Map<string, StreamRelay>();
  /** Open relays per user (`streams.maxPerUser`). */
  readonly #perUser = new Map<string, number>();
  /** The 2026-07-28 `subscriptions/listen` streams open here: where the same list changes reach clients without a session (open-listens.ts). */
  readonly listens = new OpenListens();

  add(relay: StreamRelay): void {
    const { userKey, sessionId: session, streamId } = relay.key;
    const id = relayId(userKey, session, streamId);
    if (this.#relays.get(id) === relay) return;
    this.#relays.set(id, relay);
    this.#perUser.set(userKey, this.forUser(userKey) + 1);
    if (relay.meta.kind === 'get') this.#standalone.set(sessionId(userKey, session), relay);
    // The keys are computed again at the end rather than held by the callback: an idle stream
    // keeps fewer strings (issue 29).
    relay.onFinish(() => this.#remove(relay));
  }

  #remove(relay: StreamRelay): void {
    const { userKey, sessionId: session, streamId } = relay.key;
    const id = relayId(userKey, session, streamId);
    if (this.#relays.get(id) === relay) this.#relays.delete(id);
    const standalone = sessionId(userKey, session);
    if (this.#standalone.get(standalone) === relay) this.#standalone.delete(standalone);
    const left = this.forUser(userKey) - 1;
    if (left > 0) this.#perUser.set(userKey, left);
    else this.#perUser.delete(userKey);
  }

  /** How many relays of this user run here. */
  forUser(userKey: string): number {
    return this.#perUser.get(userKey) ?? 0;
  }

  get(userKey: string, session: string, streamId: string): StreamRelay | undefined {
    return this.#relays.get(relayId(userKey, session, streamId));
  }

  standalone(userKey: string, session: string): StreamRelay | undefined {
    return this.#standalone.get(sessionId(userKey, session));
  }

  /** The standalone (GET) streams running here, one per session: where a config reload or a pin approval tells sessions their lists changed (src/reload/list-changes.ts). */
  standaloneStreams(): StreamRelay[] {
    return [...this.#standalone.values()];
  }

  /** Stops every relay of a session (DELETE). */
  stopSession(userKey: string, session: string): void {
    const prefix = `${sessionId(userKey, session)}:`;
    for (const [id, relay] of this.#relays) if (id.startsWith(prefix)) relay.stop();
  }

  /**
   * Ends every relay of one backend or virtual server (a config reload removed it or pointed
   * it at another server): each client gets `retry` as the stream's last event, a client
   * following the stream from another replica sees it end too, and the reconnection then
   * meets what the reload left (404 for a removed backend).
   */
  stopBackend(backend: string): void {
    for (const relay of this.#relays.values()) if (relay.backend === backend) relay.stop(true);
    // A 2026-07-28 client's listen on /mcp/{backend} ends too: it would hear nothing more.
    this.listens.endAll(backend);
  }

  /** Stops everything: clients get `retry` and reconnect elsewhere. */
  stopAll(): void {
    for (const relay of this.#relays.values()) relay.stop();
  }

  /**
   * Graceful shutdown (SPEC §5): every client stream gets `retry` and ends so the client
   * reconnects to another replica; standalone streams and listens stop, while POST streams keep reading
   * their backend (into the replay log, followed from elsewhere) until they finish or the
   * deadline passes.
   */
  async drain(deadlineMs: number): Promise<void> {
    // A 2026-07-28 client's listens end as a server ends one (its result, then the end): the client
    // listens again on another replica. Left open, each held the close until the client went.
    for (const endpoint of this.listens.endpoints()) this.listens.endAll(endpoint);
    const pending: Promise<void>[] = [];
    const relays = [...this.#relays.values()];
    for (const relay of relays) {
      if (relay.meta.kind === 'get') {
        relay.stop();
        continue;
      }
      pending.push(new Promise((resolve) => relay.onFinish(resolve)));
      relay.detach();
    }
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadlineMs)));
    await Promise.race([Promise.all(pending), deadline]);
    clearTimeout(timer);
    this.stopAll();
    await Promise.all(relays.map((r) => r.flushed()));
  }

  get size(): number {
    return this.#relays.size;
  }
}

/**
 * Map keys built by `join`, which makes one flat string: a template literal makes a tree of
 * concatenated-string nodes, which a key held for a stream's life keeps (issue 29).
 */
const sessionId = (userKey: string, session: string) => [userKey, session].join(':');
const relayId = (userKey: string, session: string, streamId: string) => [userKey, session, streamId].join(':');
