/**
 * The standalone GET stream of the gateway's session with a 2025-11-25 backend, read once per
 * replica for everything the stateless era needs from it (issue 15, "Bridging"):
 *
 * - a server→client request the backend sends there — what SDK servers do when they call
 *   `server.request()` without `relatedRequestId`, as the conformance suite's reference server
 *   does — goes to the call that is running in that session on this replica, as if it had come
 *   on the call's own stream, so it becomes part of that call's `input_required` round
 *   (bridged-call.ts). With no call or several calls running it cannot be attributed, and the
 *   backend gets an error for it rather than waiting for ever;
 * - notifications go to the `subscriptions/listen` streams open on the session
 *   (legacy-listen.ts).
 *
 * A 2025 server drops a request sent while no GET stream is open, so the stream is opened
 * before a call goes out and kept for {@link IDLE_MS} after the last user of it, so that a
 * client's next call does not wait for it again. A backend holds one GET stream per session: a
 * stream another replica holds is not opened here (that replica's calls get its requests).
 */
import { randomUUID } from 'node:crypto';
import type { BackendResponse } from '../backends/backend.js';
import type { BridgeMessage, Coordinator } from '../state/coordinator.js';
import { BackendMessages, type BackendMessage } from '../backends/backend-messages.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import { isShareMessage, StreamShares, type Listening, type ShareMessage, type SharesOptions } from './legacy-stream-shares.js';

/** How long an unused stream stays open. */
export const IDLE_MS = 30_000;
/** How long a request for a call on another replica waits for that replica to take it. */
export const CLAIM_TIMEOUT_MS = 2_000;

export interface StreamSession {
  /** Names the backend session (backend and session id). */
  key: string;
  /** Opens the session's GET stream. */
  open(): Promise<BackendResponse>;
  /** Answers one of the backend's requests in the session. */
  respond(message: BackendMessage): Promise<void>;
}

/** A call's place on the stream: held from before its POST goes out, bound to its answer's messages once they come. */
export interface CallInbox {
  bind(messages: BackendMessages): void;
  /** The call ended without an SSE answer (or is over): what came for it is refused. */
  release(): void;
}

interface Inbox {
  target?: BackendMessages;
  waiting: BackendMessage[];
}

interface Watch {
  calls: Set<Inbox>;
  listeners: Set<(message: BackendMessage) => void>;
  opened: Promise<boolean>;
  /** The backend offers no GET stream at all (405): no replica reads one, so calls need no place on it. */
  absent?: boolean;
  messages?: BackendMessages;
  idle?: NodeJS.Timeout;
}

export class LegacyStreams {
  readonly #watches = new Map<string, Watch>();
  /** Calls of this replica by session key, whether or not this replica reads the session's stream. */
  readonly #calls = new Map<string, Set<Inbox>>();
  readonly #claims = new Map<string, () => void>();
  /** Listens sharing a stream another replica reads, and the shares this replica serves. */
  readonly #shares: StreamShares;

  /** `checkEveryMs`: how often a listen heard through another replica checks that replica still serves it (legacy-stream-shares.ts). */
  constructor(
    private readonly coordinator: Pick<Coordinator, 'replicaId' | 'broadcast' | 'send'>,
    options: SharesOptions,
  ) {
    this.#shares = new StreamShares(coordinator, (key, listener, onEnd) => this.#attach(key, listener, onEnd), options);
  }

  /**
   * Routes the session's GET-stream requests to the call about to be sent, until it closes.
   * Resolves once the stream is open (or could not be), so a request the backend sends at once
   * finds it; at once, without a place, for a backend known to have no such stream (the hot
   * path of a bridged call: `npm run bench`, issue 15).
   */
  openCall(key: string, describe: () => StreamSession): CallInbox | Promise<CallInbox> {
    if (this.#watches.get(key)?.absent) return NO_PLACE;
    return this.#placeCall(describe());
  }

  async #placeCall(session: StreamSession): Promise<CallInbox> {
    const watch = this.#watch(session);
    const inbox: Inbox = { waiting: [] };
    watch.calls.add(inbox);
    const calls = this.#calls.get(session.key) ?? new Set();
    this.#calls.set(session.key, calls.add(inbox));
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      for (const message of inbox.waiting.splice(0)) refuse(session, message, 'the call it came for has ended');
      calls.delete(inbox);
      if (!calls.size) this.#calls.delete(session.key);
      this.#release(session.key, watch, () => watch.calls.delete(inbox));
    };
    await watch.opened;
    return {
      bind: (messages) => {
        inbox.target = messages;
        for (const message of inbox.waiting.splice(0)) messages.inject(message);
        messages.onClose(release);
      },
      release,
    };
  }

  /**
   * Feeds the session's GET-stream notifications to `listener`: read here, or passed on by the
   * replica that reads the stream (legacy-stream-shares.ts). `opened` false when neither can
   * be. Detach with the returned function.
   */
  async listen(session: StreamSession, listener: (message: BackendMessage) => void): Promise<Listening> {
    const watch = this.#watch(session);
    watch.listeners.add(listener);
    const detach = () => this.#release(session.key, watch, () => watch.listeners.delete(listener));
    const opened = await watch.opened;
    if (!opened && !watch.absent) {
      // Held by another replica (a backend allows one GET stream per session): listen through it.
      detach();
      return this.#shares.listen(session.key, listener);
    }
    const ended = new Promise<void>((resolve) => (watch.messages ? watch.messages.onClose(resolve) : resolve()));
    return { opened, ended, detach };
  }

  /** A listener of another replica on the stream of `key`, when this replica reads it. */
  #attach(key: string, listener: (message: BackendMessage) => void, onEnd: () => void): (() => void) | undefined {
    const watch = this.#watches.get(key);
    if (!watch?.messages) return undefined;
    clearTimeout(watch.idle);
    watch.listeners.add(listener);
    watch.messages.onClose(onEnd);
    return () => this.#release(key, watch, () => watch.listeners.delete(listener));
  }

  #watch(session: StreamSession): Watch {
    let watch = this.#watches.get(session.key);
    if (watch) {
      clearTimeout(watch.idle);
      return watch;
    }
    const created: Watch = { calls: new Set(), listeners: new Set(), opened: Promise.resolve(false) };
    created.opened = this.#open(session, created);
    this.#watches.set(session.key, (watch = created));
    return watch;
  }

  async #open(session: StreamSession, watch: Watch): Promise<boolean> {
    const res = await session.open().catch(() => undefined);
    if (res?.status !== 200 || res.contentType !== 'text/event-stream') {
      watch.absent = res?.status === 405;
      await res?.body.dump().catch(() => {});
      // Remembered for a while: a backend without the stream (405), or whose stream another
      // replica holds (409), is not asked again on every call.
      const forget = setTimeout(() => {
        if (this.#watches.get(session.key) === watch) this.#watches.delete(session.key);
      }, IDLE_MS);
      forget.unref();
      return false;
    }
    const messages = (watch.messages = new BackendMessages(res.body, res.contentType));
    void this.#read(session, watch, messages);
    return true;
  }

  async #read(session: StreamSession, watch: Watch, messages: BackendMessages): Promise<void> {
    for (let message = await messages.next(); message; message = await messages.next()) {
      if (message.method === undefined) continue;
      if (message.id === undefined) {
        for (const listener of watch.listeners) listener(message);
        continue;
      }
      const call = attributed(watch.calls);
      if (call === undefined) void this.#elsewhere(session, message);
      else if (call === 'ambiguous') refuse(session, message, 'several calls run in this session, and the request names none of them');
      else deliver(call, message);
    }
    messages.close();
    if (this.#watches.get(session.key) === watch) this.#watches.delete(session.key);
  }

  #release(key: string, watch: Watch, remove: () => void): void {
    remove();
    if (watch.calls.size || watch.listeners.size || this.#watches.get(key) !== watch) return;
    clearTimeout(watch.idle);
    watch.idle = setTimeout(() => {
      if (watch.calls.size || watch.listeners.size) return;
      this.#watches.delete(key);
      watch.messages?.close();
    }, IDLE_MS);
    watch.idle.unref();
  }

  /**
   * A request for no call of this replica: the session's calls may run on another replica (a
   * backend gives one GET stream per session, held by whichever replica opened it first).
   * Offered to every replica; refused unless one with exactly one call in the session takes it.
   */
  async #elsewhere(session: StreamSession, message: BackendMessage): Promise<void> {
    const ticket = randomUUID();
    const claimed = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), CLAIM_TIMEOUT_MS);
      this.#claims.set(ticket, () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    try {
      await this.coordinator.broadcast({ type: 'stream-request', ticket, from: this.coordinator.replicaId, key: session.key, message: JSON.stringify(message) });
      if (!(await claimed)) refuse(session, message, 'no call of a MCP 2026-07-28 client is running in this session');
    } finally {
      this.#claims.delete(ticket);
    }
  }

  /** A request offered by the replica reading the stream, or the news that one took it. */
  handle(message: Extract<BridgeMessage, { type: 'stream-request' | 'stream-claimed' }> | ShareMessage): void {
    if (isShareMessage(message)) {
      this.#shares.handle(message);
      return;
    }
    if (message.type === 'stream-claimed') {
      this.#claims.get(message.ticket)?.();
      return;
    }
    if (message.from === this.coordinator.replicaId) return;
    // The one call running in the session on this replica, as on the reading one.
    const call = attributed(this.#calls.get(message.key) ?? new Set());
    if (call === undefined || call === 'ambiguous') return;
    deliver(call, JSON.parse(message.message) as BackendMessage);
    void this.coordinator.send(message.from, { type: 'stream-claimed', ticket: message.ticket }).catch(() => {});
  }

  /** Closes every stream (the gateway is stopping). */
  close(): void {
    this.#shares.close();
    for (const watch of this.#watches.values()) {
      clearTimeout(watch.idle);
      watch.messages?.close();
    }
    this.#watches.clear();
  }
}

/** The place of a call in a session whose backend has no GET stream: nothing can come for it there. */
const NO_PLACE: CallInbox = { bind: () => {}, release: () => {} };

function refuse(session: StreamSession, message: BackendMessage, why: string): void {
  const refusal = errorResponse(message.id as JsonRpcId, ErrorCode.MethodNotFound, `"${String(message.method)}" cannot be relayed: ${why}`);
  void session.respond(refusal as unknown as BackendMessage).catch(() => {});
}

function deliver(call: Inbox, message: BackendMessage): void {
  if (call.target) call.target.inject(message);
  else call.waiting.push(message);
}

/**
 * The call a request with no call named belongs to: the one call running in the session; a
 * parked call only when none runs (its handler waits for the client, so it seldom asks more —
 * and a call a client abandoned stays parked for minutes).
 */
function attributed(calls: ReadonlySet<Inbox>): Inbox | 'ambiguous' | undefined {
  const all = [...calls];
  const running = all.filter((call) => !call.target?.parked);
  const candidates = running.length ? running : all;
  if (candidates.length === 0) return undefined;
  return candidates.length === 1 ? candidates[0] : 'ambiguous';
}
