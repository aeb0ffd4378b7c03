/**
 * The state interface (SPEC §5). Redis is the source of truth in production; the memory
 * store implements the same contract for the embedded default and unit tests, and one
 * contract test suite runs against both (test/state/store-contract.test.ts).
 *
 * Every key starts with the user (`userKey`, a digest of iss+sub), then the MCP session:
 * a session id presented by another user simply does not exist for them.
 */

/** What the gateway remembers about one client MCP session. */
export interface SessionRecord {
  /** Backend this session is bound to (`/mcp/{backend}`). */
  backend: string;
  /** The backend's own `Mcp-Session-Id`, if it issued one. */
  backendSessionId?: string;
  /** Protocol revision negotiated in `initialize`. */
  protocolVersion: string;
  /** The client's declared capabilities (e.g. whether it handles URL-mode elicitation). */
  clientCapabilities: Record<string, unknown>;
  createdAt: number;
  /**
   * Set while the backend session waits for the user to link their account (SPEC §8
   * "Linking"): the backend refused `initialize` without the user's token, so the gateway
   * answered it and opens the backend session once a token exists.
   */
  link?: PendingLink;
}

/** What opening the backend session later needs, besides the record's revision and capabilities. */
export interface PendingLink {
  /** The client's `clientInfo`, repeated to the backend (bounded in size). */
  clientInfo?: unknown;
  /** The lists the gateway's answer announced, whose `list_changed` the client expects. */
  announced: string[];
}

/** Identifies one SSE stream of one session of one user. */
export interface StreamKey {
  userKey: string;
  sessionId: string;
  streamId: string;
}

/** What a stream is for, so that any replica can resume it (written as the stream's first entry). */
export interface StreamMeta {
  kind: 'post' | 'get';
  /** JSON-RPC request ids whose responses this stream will carry (POST streams). */
  requestIds: Array<string | number>;
}

/** One entry of a stream's replay log. */
export interface StoredEvent {
  /** Gateway sequence number within the stream; the SSE id is `<streamId>-<seq>`. */
  seq: number;
  /** The JSON-RPC message text sent to the client. */
  data?: string;
  /** The backend's SSE id for this event, used to resume the backend stream. */
  backendEventId?: string;
  /** First entry only. */
  meta?: StreamMeta;
  /** The stream delivered everything it owed (its responses); nothing follows. */
  end?: boolean;
}

export interface ReplayLimits {
  maxEvents: number;
  ttlMs: number;
}

/**
 * Byte budgets of the replay logs (issue 13; config `streams.replayBytes`,
 * `streams.replayBytesPerUser`), fixed when the store is made: the per-user total spans all
 * of a user's streams, so it cannot vary from call to call. Past a budget the oldest events
 * go — the relay still delivers live; only resuming very old events is lost. A stream keeps
 * its meta entry and its newest entry whatever their size (resumption needs the kind of
 * stream and the last sequence number); a user's other streams are dropped whole, least
 * recently appended first, before the stream being appended loses more.
 */
export interface ReplayBudget {
  /** Bytes of serialized entries one stream's log keeps. */
  maxBytes: number;
  /** Bytes all of one user's stream logs keep together. */
  maxBytesPerUser: number;
}

export const DEFAULT_REPLAY_BUDGET: ReplayBudget = { maxBytes: 1024 * 1024, maxBytesPerUser: 8 * 1024 * 1024 };

/** A session ended to make room under `sessions.maxPerUser`, with the record it had. */
export interface EvictedSession {
  sessionId: string;
  record: SessionRecord;
}

export interface StateStore {
  readonly kind: 'memory' | 'redis';
  /**
   * Stores a new session and adds it to the user's index as just used. With `maxPerUser`,
   * the user's live sessions beyond that many are deleted in the same atomic step and
   * returned, so the caller can end their streams and backend sessions (issue 13). Which go
   * (SPEC §8 "Budgets", issue 28 §7): sessions not marked in use first, least recently used
   * first; sessions marked in use ({@link markSessionsInUse}) only after every idle one,
   * least recently used first too; never the session being created.
   */
  createSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number, maxPerUser?: number): Promise<EvictedSession[]>;
  /** Reads a session, slides its idle TTL and records the use (eviction order), in one round trip. */
  touchSession(userKey: string, sessionId: string, ttlMs: number): Promise<SessionRecord | undefined>;
  /**
   * Marks live sessions of one user as in use — a client stream open, a call in flight —
   * for `leaseMs` from now (the caller renews it while the use lasts), and records a use of
   * each. Eviction takes sessions in use last; a replica that dies lets its marks lapse.
   * Unknown or ended sessions are ignored.
   */
  markSessionsInUse(userKey: string, sessionIds: readonly string[], leaseMs: number): Promise<void>;
  /**
   * Ends the in-use mark of a session (whatever replica set it) and records a use: nothing
   * on the calling replica uses it any more. A replica still using it marks it again at its
   * next renewal.
   */
  releaseSessionInUse(userKey: string, sessionId: string): Promise<void>;
  /**
   * Replaces a live session's record (sliding its TTL); does nothing for one that ended or
   * expired, so an update racing a DELETE cannot bring the session back. True when replaced.
   */
  replaceSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number): Promise<boolean>;
  /** Returns whether the session existed. */
  deleteSession(userKey: string, sessionId: string): Promise<boolean>;
  /**
   * Appends to a stream's bounded replay log (at most `limits.maxEvents` events besides its
   * meta entry, and the store's {@link ReplayBudget}), refreshing its TTL, atomically. An
   * append whose newest entry is already the log's newest has run before (sent again after
   * its answer was lost) and changes nothing: a stream's entries carry increasing sequence
   * numbers, so a new append never repeats the newest one.
   */
  appendEvents(key: StreamKey, events: readonly StoredEvent[], limits: ReplayLimits): Promise<void>;
  /** The stream's retained log, oldest first (empty when unknown or expired). */
  readEvents(key: StreamKey): Promise<StoredEvent[]>;
  /**
   * Small keyed values for the browser flows and the token vault (SPEC §4): elicitations,
   * single-use OAuth `state`, browser sessions, encrypted tokens, locks. Callers build keys
   * that start with the user where the value belongs to one.
   *
   * Every TTL this contract takes (`ttlMs`, `leaseMs`, `limits.ttlMs`) may be fractional: it
   * is rounded up to whole milliseconds, which is all Redis takes (ttl.ts). NaN, Infinity,
   * 0 and negatives are refused with an InvalidTtlError before anything is stored.
   */
  putValue(key: string, value: string, ttlMs?: number): Promise<void>;
  getValue(key: string): Promise<string | undefined>;
  /** Reads and deletes in one step: what makes `state` values single use. */
  takeValue(key: string): Promise<string | undefined>;
  /** Sets only when absent (a lock or a claim); true when this call set it. */
  putValueIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean>;
  deleteValue(key: string): Promise<boolean>;
  /** Deletes only while the value is still `expected` (releasing one's own lock), atomically. */
  deleteValueIf(key: string, expected: string): Promise<boolean>;
  /**
   * Small maps of named fields under one key, kept without expiry (tool-definition pins,
   * src/pinning/): the fields of one key are read together, and a field is set only when
   * absent in one atomic step, so two replicas that see a definition first agree on it.
   */
  putFieldIfAbsent(key: string, field: string, value: string): Promise<boolean>;
  putField(key: string, field: string, value: string): Promise<void>;
  /** Every field of the key (empty when none). */
  getFields(key: string): Promise<Record<string, string>>;
  deleteField(key: string, field: string): Promise<boolean>;
  /** How many sessions are alive (for the sessions gauge; may be approximate and cached). */
  countSessions(): Promise<number>;
  /** Throws when the store cannot serve requests (readiness). */
  ping(): Promise<void>;
  /** What the store is connected to and how, for /readyz (e.g. `redis sentinel, connection reconnecting`; no addresses or secrets). */
  describe?(): string;
  close(): Promise<void>;
}
