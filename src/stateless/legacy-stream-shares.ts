/**
 * A `subscriptions/listen` on one replica, of a 2025-11-25 backend session whose GET stream
 * another replica reads (issue 15, "subscriptions/listen maps onto the backend's GET stream";
 * legacy-streams.ts). A backend gives one GET stream per session, so the replica that opened
 * it first is the only one that hears the session's notifications; a listen that lands
 * elsewhere asks that replica, over the coordinator, to pass them on:
 *
 * - the listening replica offers `stream-listen` to every replica; the one reading the stream
 *   answers `stream-listening` (within {@link SHARE_TIMEOUT_MS}, else the listen fails as
 *   before: no stream);
 * - the reader sends each notification as `stream-notification`, and `stream-ended` when the
 *   backend's stream ends; the listener's `stream-unlisten` makes it stop. The share counts as
 *   a listener of the stream there, so the stream stays open while it lasts.
 *
 * A reader that cannot deliver a notification (the listening replica is gone) drops the share.
 * A reader that goes away without `stream-ended` (killed) is found out: the listener asks
 * `stream-check` every {@link SharesOptions.checkEveryMs} (the SSE keep-alive interval,
 * `streams.keepAlive`) and the reader answers `stream-still`, or `stream-ended` for a share it
 * no longer serves; two intervals without a word from the reader end the listen, and the
 * client listens again (on a stream this replica may now read itself). Only a reader that
 * says it answers checks (`stream-listening` with `checks`) is checked: one of an earlier
 * release, during a rolling upgrade, would otherwise have its shares ended every two intervals.
 */
import { randomUUID } from 'node:crypto';
import type { BackendMessage } from '../backends/backend-messages.js';
import type { BridgeMessage, Coordinator } from '../state/coordinator.js';

/** How long a listening replica waits for the reader to take its share. */
export const SHARE_TIMEOUT_MS = 2_000;

export type ShareMessage = Extract<BridgeMessage, { type: 'stream-listen' | 'stream-listening' | 'stream-notification' | 'stream-ended' | 'stream-unlisten' | 'stream-check' | 'stream-still' }>;

const SHARE_TYPES: ReadonlySet<string> = new Set(['stream-listen', 'stream-listening', 'stream-notification', 'stream-ended', 'stream-unlisten', 'stream-check', 'stream-still']);

export interface SharesOptions {
  /** How often a listener asks whether the reader still serves its share. */
  checkEveryMs: number;
}

export function isShareMessage(message: BridgeMessage): message is ShareMessage {
  return SHARE_TYPES.has(message.type);
}

/** What listening gives: whether it could, when the stream ended, and how to stop. */
export interface Listening {
  opened: boolean;
  ended: Promise<void>;
  detach(): void;
}

/** The reader's side: attaches a listener to the stream of `key` when this replica reads it (undefined otherwise). */
export type AttachToStream = (key: string, listener: (message: BackendMessage) => void, onEnd: () => void) => (() => void) | undefined;

interface Remote {
  listener: (message: BackendMessage) => void;
  ended: () => void;
  taken: (holder: string, checks: boolean) => void;
  /** When the reader was last heard from (a notification or `stream-still`). */
  heardAt: number;
}

export class StreamShares {
  /** Listens of this replica served by another, by listen id. */
  readonly #remote = new Map<string, Remote>();
  /** Listens of other replicas this replica serves, by listen id: how to stop (telling the listener, or not). */
  readonly #served = new Map<string, (tell: boolean) => void>();

  constructor(
    private readonly coordinator: Pick<Coordinator, 'replicaId' | 'broadcast' | 'send'>,
    private readonly attach: AttachToStream,
    private readonly options: SharesOptions,
  ) {}

  /** Listens to the stream of `key` through whichever replica reads it. */
  async listen(key: string, listener: (message: BackendMessage) => void): Promise<Listening> {
    const listenId = randomUUID();
    let resolveEnded!: () => void;
    const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
    let holder: string | undefined;
    let answersChecks = false;
    let checks: NodeJS.Timeout | undefined;
    const taken = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), SHARE_TIMEOUT_MS);
      this.#remote.set(listenId, {
        listener,
        ended: () => {
          clearInterval(checks);
          this.#remote.delete(listenId);
          resolveEnded();
        },
        taken: (from, answers) => {
          clearTimeout(timer);
          if (holder === undefined) [holder, answersChecks] = [from, answers];
          resolve(true);
        },
        heardAt: Date.now(),
      });
    });
    await this.coordinator.broadcast({ type: 'stream-listen', listenId, key, from: this.coordinator.replicaId }).catch(() => {});
    const opened = await taken;
    const detach = () => {
      clearInterval(checks);
      if (!this.#remote.delete(listenId)) return;
      if (holder !== undefined) void this.coordinator.send(holder, { type: 'stream-unlisten', listenId }).catch(() => {});
    };
    if (!opened) detach();
    // Silent too long: detached (a reader only slow, not gone, must not go on serving a listen nobody hears), and over.
    else if (answersChecks) checks = this.#checkReader(listenId, holder!, () => (detach(), resolveEnded()));
    return { opened, ended, detach };
  }

  /** Asks the reader, every interval, whether it still serves the share; `silent` when it has said nothing for two. */
  #checkReader(listenId: string, holder: string, silent: () => void): NodeJS.Timeout {
    const every = this.options.checkEveryMs;
    const checks = setInterval(() => {
      const remote = this.#remote.get(listenId);
      if (!remote) return clearInterval(checks);
      if (Date.now() - remote.heardAt > 2 * every) return silent();
      void this.coordinator.send(holder, { type: 'stream-check', listenId, from: this.coordinator.replicaId }).catch(() => {});
    }, every);
    checks.unref();
    return checks;
  }

  handle(message: ShareMessage): void {
    switch (message.type) {
      case 'stream-listen':
        return this.#serve(message);
      case 'stream-listening':
        return this.#remote.get(message.listenId)?.taken(message.from, message.checks === true);
      case 'stream-notification':
        return this.#heard(message.listenId)?.listener(JSON.parse(message.message) as BackendMessage);
      case 'stream-still':
        return void this.#heard(message.listenId);
      case 'stream-ended':
        return this.#remote.get(message.listenId)?.ended();
      case 'stream-unlisten':
        return this.#served.get(message.listenId)?.(false);
      case 'stream-check': {
        const answer: ShareMessage = this.#served.has(message.listenId) ? { type: 'stream-still', listenId: message.listenId } : { type: 'stream-ended', listenId: message.listenId };
        return void this.coordinator.send(message.from, answer).catch(() => {});
      }
    }
  }

  /** The listen the reader just spoke for, marked as heard from. */
  #heard(listenId: string): Remote | undefined {
    const remote = this.#remote.get(listenId);
    if (remote) remote.heardAt = Date.now();
    return remote;
  }

  /** Ends every share this replica serves (the gateway is stopping): their listeners hear the end. */
  close(): void {
    for (const end of [...this.#served.values()]) end(true);
  }

  #serve(message: Extract<ShareMessage, { type: 'stream-listen' }>): void {
    const { listenId, from } = message;
    if (from === this.coordinator.replicaId) return;
    const tell = (sent: ShareMessage) => this.coordinator.send(from, sent);
    let stop: (() => void) | undefined;
    const end = (notify: boolean) => {
      if (!this.#served.delete(listenId)) return;
      stop?.();
      if (notify) void tell({ type: 'stream-ended', listenId }).catch(() => {});
    };
    stop = this.attach(
      message.key,
      (heard) => void tell({ type: 'stream-notification', listenId, message: JSON.stringify(heard) }).catch(() => end(false)),
      () => end(true),
    );
    if (!stop) return;
    this.#served.set(listenId, end);
    void tell({ type: 'stream-listening', listenId, from: this.coordinator.replicaId, checks: true }).catch(() => end(false));
  }
}
