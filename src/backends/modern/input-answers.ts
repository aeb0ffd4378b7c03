/**
 * The answers of a 2025-11-25 client to the requests the gateway sends it for a 2026-07-28
 * backend's `input_required` result (issue 15, "Bridging: 2025-11-25 client → 2026 backend":
 * "turns a backend `input_required` into real requests on the client's stream and retries with
 * `inputResponses`").
 *
 * The replica that relays the call to the client asks and waits; the client's answer is a
 * POST that may reach any replica. So the id of each request the gateway sends names the
 * replica that waits and the round (`sbi:<replica>:<round>:<n>`): the replica that receives
 * an answer hands it to that one over the coordinator (SPEC §5), or keeps it when it is the one.
 * A round ends when every request has its answer, when one is refused with an error, or when
 * the client gives up (its stream closed, or {@link ROUND_TIMEOUT_MS}).
 *
 * An id is no credential: it travels in the client's stream and logs, and names a round that
 * other sessions could answer too. So a round remembers who was asked — the session and its
 * user — and takes an answer only from them; anyone else's is dropped (issue 28 §6: another
 * user's session answered Alice's pending call by id). MCP 2025-11-25 "Transports" binds a
 * response to the session it was sent in.
 */
import { randomUUID } from 'node:crypto';
import type { Coordinator } from '../../state/coordinator.js';

const ID_PREFIX = 'sbi:';
/** Long enough for a person to answer an elicitation. */
export const ROUND_TIMEOUT_MS = 10 * 60_000;

export interface InputRound {
  /** The JSON-RPC id to send each input request under, by its key. */
  ids: Map<string, string>;
  /** The client's results by key (the backend's `inputResponses`); rejects on an error answer or a timeout. */
  answers: Promise<Record<string, unknown>>;
  /** Ends the round (answered or not): later answers are dropped. */
  close(): void;
}

/** Who was asked: the gateway's session with the backend (the client's session maps to it) and its user. */
export interface Asked {
  sessionId: string;
  userKey: string;
}

interface Waiting {
  asked: Asked;
  keys: string[];
  answers: Record<string, unknown>;
  resolve(answers: Record<string, unknown>): void;
  reject(error: Error): void;
}

export class InputAnswers {
  readonly #rounds = new Map<string, Waiting>();

  constructor(private readonly coordinator: Pick<Coordinator, 'replicaId' | 'send'>) {}

  /** True for the id of a request the gateway sent on a 2026 backend's behalf. */
  static isOurs(id: unknown): id is string {
    return typeof id === 'string' && id.startsWith(ID_PREFIX);
  }

  open(keys: string[], asked: Asked, timeoutMs: number = ROUND_TIMEOUT_MS): InputRound {
    const round = randomUUID();
    const ids = new Map(keys.map((key, n) => [key, `${ID_PREFIX}${this.coordinator.replicaId}:${round}:${n}`]));
    let timer: NodeJS.Timeout | undefined;
    const answers = new Promise<Record<string, unknown>>((resolve, reject) => {
      this.#rounds.set(round, { asked, keys, answers: {}, resolve, reject });
      timer = setTimeout(() => reject(new Error('the client did not answer in time')), timeoutMs);
      timer.unref();
    });
    answers.catch(() => {});
    const close = () => {
      clearTimeout(timer);
      this.#rounds.get(round)?.reject(new Error('the call ended'));
      this.#rounds.delete(round);
    };
    return { ids, answers: answers.finally(close), close };
  }

  /** A client's response to one of those requests, received on this replica in session `from`: to the replica that waits for it. */
  async deliver(message: Record<string, unknown>, from: Asked): Promise<void> {
    const [replicaId] = String(message.id).slice(ID_PREFIX.length).split(':');
    if (replicaId === this.coordinator.replicaId) return this.receive(message, from);
    await this.coordinator.send(replicaId!, { type: 'input-answer', message: JSON.stringify(message), sessionId: from.sessionId, userKey: from.userKey });
  }

  /** A response for a round of this replica (from here or handed over), taken only from the session and user that were asked. */
  receive(message: Record<string, unknown>, from: Partial<Asked>): void {
    const [, round, n] = String(message.id).slice(ID_PREFIX.length).split(':');
    const waiting = this.#rounds.get(round ?? '');
    const key = waiting?.keys[Number(n)];
    if (!waiting || key === undefined || !isAsked(waiting.asked, from)) return;
    const error = message.error as { message?: unknown } | undefined;
    if (error || !message.result || typeof message.result !== 'object') {
      waiting.reject(new Error(`the client refused the request: ${String(error?.message ?? 'no result')}`));
      return;
    }
    waiting.answers[key] = message.result;
    if (waiting.keys.every((k) => k in waiting.answers)) waiting.resolve(waiting.answers);
  }
}

/** Whether the answer comes from the session and user asked (a handed-over answer of an earlier release names neither: refused). */
function isAsked(asked: Asked, from: Partial<Asked>): boolean {
  return from.sessionId === asked.sessionId && from.userKey === asked.userKey;
}
