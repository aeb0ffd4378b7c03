/**
 * Coordination between replicas that share one Redis (SPEC §5): who holds a session's
 * standalone SSE stream, who is still reading a backend stream whose client went away,
 * messages addressed to the replica that holds a stream, and a mailbox for gateway
 * notifications sent while a session has no stream open anywhere.
 *
 * Leases are short and renewed while held, so a replica that dies loses them by itself.
 */
import type { StoredEvent, StreamKey } from './store.js';

/** Who holds a session's standalone stream. */
export interface StreamHolder {
  replicaId: string;
  streamId: string;
}

/** Messages about one session and its streams (sessions/session-notifier.ts). */
export type SessionMessage =
  /** A gateway-originated message for the session's standalone stream. */
  | { type: 'deliver'; userKey: string; sessionId: string; streamId: string; data: string }
  /** Another replica took the stream over, or its follower's client left: stop relaying it here. */
  | { type: 'stop'; userKey: string; sessionId: string; streamId: string }
  /** A client follows, from another replica, the standalone stream this one opened ahead of it. */
  | { type: 'followed'; userKey: string; sessionId: string; streamId: string }
  /** A session ended (sent to every replica): drop it from caches. */
  | { type: 'ended'; userKey: string; sessionId: string }
  /** A session's record changed (sent to every replica): drop the cached copy. */
  | { type: 'changed'; userKey: string; sessionId: string };

/** Messages about a call bridged between the MCP eras (stateless/bridge-replicas.ts, backends/modern/input-answers.ts). */
export type BridgeMessage =
  /**
   * A client's retry of a bridged call, handed to the replica that holds the call
   * (stateless/bridge-replicas.ts); `continuation` is that layer's JSON. `pieces`: the sender
   * reads the outcome in numbered pieces (a replica of an earlier release, which does not say
   * so, gets it whole, in one message).
   */
  | { type: 'bridge-resume'; ticket: string; replyTo: string; continuation: string; pieces?: boolean }
  /**
   * The holder's answer to a handed-over retry: `taken` first, then the attempt's messages as
   * they come, numbered by `seq`, `more` on all but the last (none at all: the call is gone);
   * the HTTP status with an attempt's final message.
   */
  | { type: 'bridge-outcome'; ticket: string; taken?: boolean; messages?: string[]; status?: number; seq?: number; more?: boolean }
  /** The client of a handed-over retry left: the holder stops the attempt, as it would for a client of its own. */
  | { type: 'bridge-cancel'; ticket: string }
  /**
   * A 2025 client's answer to a request the gateway sent for a 2026 backend, to the replica
   * waiting for it (backends/modern/input-answers.ts), with the session and user it came from:
   * only those asked may answer (absent from a replica of an earlier release: not taken).
   */
  | { type: 'input-answer'; message: string; sessionId?: string; userKey?: string }
  /** A request a 2025 backend sent on the session GET stream this replica reads, for a call running on another replica (stateless/legacy-streams.ts). */
  | { type: 'stream-request'; ticket: string; from: string; key: string; message: string }
  /** A replica took that request into its call. */
  | { type: 'stream-claimed'; ticket: string }
  /** A listen on the sender wants the notifications of the session GET stream `key`, from the replica that reads it (stateless/legacy-stream-shares.ts). */
  | { type: 'stream-listen'; listenId: string; key: string; from: string }
  /** The reader took that listen; `checks`: it answers `stream-check` (a reader of an earlier release does not say so, and is not checked). */
  | { type: 'stream-listening'; listenId: string; from: string; checks?: boolean }
  /** A notification the reader heard, for that listen. */
  | { type: 'stream-notification'; listenId: string; message: string }
  /** The backend ended the stream (or the reader stopped): the listen is over. */
  | { type: 'stream-ended'; listenId: string }
  /** The listen closed: the reader stops passing notifications on. */
  | { type: 'stream-unlisten'; listenId: string }
  /** The listener asks whether the reader still serves the listen (it answers `stream-still`, or `stream-ended`). */
  | { type: 'stream-check'; listenId: string; from: string }
  /** The reader still serves the listen. */
  | { type: 'stream-still'; listenId: string }
  /** A session the gateway keeps for a 2026 backend changed (its log level; sent to every replica): drop the cached copy. */
  | { type: 'adapted-changed'; userKey: string; sessionId: string; /** The replica that changed it (which has refreshed its own listens). */ from?: string };

/**
 * A backend's tool-definition pins changed (sent to every replica; src/pinning/): a change was
 * seen, or an operator approved one (`approved`: live sessions then hear `tools/list_changed`).
 */
export interface PinsMessage {
  type: 'pins-changed';
  backend: string;
  approved?: boolean;
  /** Whose pins changed (`pinning.scope: user`, an opaque user key): replicas read that user's pins again, not every user's. */
  user?: string;
}

export type ReplicaMessage = SessionMessage | BridgeMessage | PinsMessage;

const NOT_BRIDGE_MESSAGES: ReadonlySet<string> = new Set(['deliver', 'stop', 'followed', 'ended', 'changed', 'pins-changed']);

export function isBridgeMessage(message: ReplicaMessage): message is BridgeMessage {
  return !NOT_BRIDGE_MESSAGES.has(message.type);
}

export interface StandaloneClaim {
  granted: boolean;
  /** The holder before this claim (the one refused against, or the one taken over from). */
  previous?: StreamHolder;
  /** Messages that waited for the session while it had no stream (granted claims only). */
  mailbox: string[];
}

export interface Coordinator {
  readonly replicaId: string;
  /**
   * Claims the session's one standalone stream for this replica. Without `force` an existing
   * holder wins (a second GET gets 409); with `force` (a client resuming its own stream with
   * Last-Event-ID) the claim takes the stream over. A granted claim drains the mailbox.
   */
  claimStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number, force: boolean): Promise<StandaloneClaim>;
  /** Renews this replica's claim; false when it was lost (taken over or expired). */
  renewStandalone(userKey: string, sessionId: string, streamId: string, ttlMs: number): Promise<boolean>;
  /**
   * Renews many claims of this replica at once, in as few round trips as the topology allows
   * (issue 45 §3: 10,000 idle streams renewed one by one were 3,000 calls a second, and their
   * garbage grew the replica's heap between collections). Per claim, in order: false when it
   * was lost, as {@link renewStandalone}.
   */
  renewStandalones(claims: readonly StreamKey[], ttlMs: number): Promise<boolean[]>;
  releaseStandalone(userKey: string, sessionId: string, streamId: string): Promise<void>;
  standaloneHolder(userKey: string, sessionId: string): Promise<StreamHolder | undefined>;

  /** Marks a stream as being read by this replica with no client attached (renew by calling again). */
  holdStream(key: StreamKey, ttlMs: number): Promise<void>;
  releaseStream(key: StreamKey): Promise<void>;
  /** The replica still reading this stream's backend, if any. */
  streamHolder(key: StreamKey): Promise<string | undefined>;
  /**
   * Live events appended to a stream by whichever replica reads it. Resolves once
   * subscribed, so a replay read afterwards cannot miss an event.
   */
  watchStream(key: StreamKey, onEvents: (events: StoredEvent[]) => void): Promise<() => Promise<void>>;

  send(replicaId: string, message: ReplicaMessage): Promise<void>;
  /** Sends to every replica, this one included. */
  broadcast(message: ReplicaMessage): Promise<void>;
  onMessage(handler: (message: ReplicaMessage) => void): void;
  /** Keeps a message for the session until its next standalone stream opens. */
  postToMailbox(userKey: string, sessionId: string, data: string, ttlMs: number, maxMessages: number): Promise<void>;

  close(): Promise<void>;
}
