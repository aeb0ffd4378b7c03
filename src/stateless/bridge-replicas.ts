/**
 * A bridged call's retry that reaches another replica than the one holding the call (issue 15:
 * "the parked backend call (on any replica, with a timeout and cancellation)"). The backend's
 * SSE answer cannot move, so the retry moves: the replica the client reached hands the
 * continuation to the holder over the coordinator (SPEC §5, the pub/sub every replica already
 * listens on), the holder answers the backend and reads the next attempt, and sends the
 * attempt's messages back, which the first replica relays as its own answer.
 *
 * The holder acknowledges at once (`taken`), so a retry naming a replica that is gone fails
 * within {@link ACK_TIMEOUT_MS} rather than waiting out the call. The attempt's messages come
 * back one coordinator message each as the backend sends them, numbered (outcome-queue.ts), and
 * are written to the client's SSE stream as they arrive: progress notifications of a
 * handed-over attempt reach the client while the call runs. The client leaving is sent on
 * (`bridge-cancel`): the holder stops the attempt as it would for a client of its own — the
 * backend's stream closed, unless the call parked again.
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { BridgeMessage } from '../state/coordinator.js';
import { formatSseEvent, SSE_RESPONSE_HEADERS } from '../wire/sse.js';
import { gone, resumeForOtherReplica, type Continuation } from './bridge-resume.js';
import type { AttemptMessage } from './bridged-call.js';
import type { StatelessContext } from './context.js';
import { isShareMessage } from './legacy-stream-shares.js';
import { PARK_TTL_MS } from './parked-calls.js';
import { OutcomeQueue, type OutcomePiece } from './outcome-queue.js';

/** How long a handed-over retry waits for the holder to say it has the call. */
export const ACK_TIMEOUT_MS = 5_000;

interface Waiter {
  taken(): void;
  piece(piece: OutcomePiece): void;
}

export class BridgeReplicas {
  readonly #waiting = new Map<string, Waiter>();
  /** The handed-over attempts this replica serves, by ticket: aborted when their client leaves. */
  readonly #serving = new Map<string, AbortController>();

  /**
   * Hands the retry to `replicaId` and answers the client with what comes back: one message as
   * JSON (with its status), more as an SSE stream written as the pieces arrive, so progress
   * notifications reach the client while the call runs on the other replica.
   */
  async resumeElsewhere(ctx: StatelessContext, reply: FastifyReply, replicaId: string, continuation: Continuation): Promise<FastifyReply> {
    const ticket = randomUUID();
    const queue = new OutcomeQueue();
    let onTaken!: () => void;
    const taken = new Promise<void>((resolve) => (onTaken = resolve));
    this.#waiting.set(ticket, { taken: onTaken, piece: (piece) => (onTaken(), queue.put(piece)) });
    // The response's `close` before its end: the client left, while waiting or while streaming.
    const left = () => {
      if (!reply.raw.writableFinished) ctx.coordinator.send(replicaId, { type: 'bridge-cancel', ticket }).catch(() => {});
    };
    reply.raw.once('close', left);
    let streaming = false;
    try {
      await ctx.coordinator.send(replicaId, { type: 'bridge-resume', ticket, replyTo: ctx.coordinator.replicaId, continuation: JSON.stringify(continuation), pieces: true });
      let timer: NodeJS.Timeout | undefined;
      const acknowledged = await Promise.race([taken.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ACK_TIMEOUT_MS, false)))]);
      clearTimeout(timer);
      const first = acknowledged ? await queue.next(PARK_TTL_MS) : undefined;
      if (!first?.messages?.length) return gone(reply, continuation.attempt.id);
      reply.request.mcpOutcome = 'answered_by_gateway';
      if (!first.more && first.messages.length === 1) return reply.code(first.status ?? 200).type('application/json').send(first.messages[0]);
      streaming = true;
      const events = this.#events(ticket, queue, first);
      return reply.code(200).headers(SSE_RESPONSE_HEADERS).send(Readable.from(events, { objectMode: false }));
    } finally {
      if (!streaming) this.#waiting.delete(ticket);
    }
  }

  /** The SSE events of a handed-over attempt, from its first piece to its last (or until the holder falls silent for the parking time). */
  async *#events(ticket: string, queue: OutcomeQueue, first: OutcomePiece): AsyncGenerator<string> {
    try {
      let piece: OutcomePiece | undefined = first;
      while (piece) {
        for (const data of piece.messages ?? []) yield formatSseEvent(data);
        piece = piece.more ? await queue.next(PARK_TTL_MS) : undefined;
      }
    } finally {
      this.#waiting.delete(ticket);
    }
  }

  /** A bridge message from another replica: a retry to serve here, or the outcome of one sent away. */
  handle(ctx: StatelessContext, message: BridgeMessage): void {
    if (message.type === 'bridge-outcome') {
      const waiter = this.#waiting.get(message.ticket);
      if (message.taken) waiter?.taken();
      else waiter?.piece({ messages: message.messages, status: message.status, seq: message.seq, more: message.more });
      return;
    }
    if (message.type === 'bridge-cancel') this.#serving.get(message.ticket)?.abort();
    else if (message.type === 'bridge-resume') void this.#serve(ctx, message).catch(() => {});
    else if (message.type === 'stream-request' || message.type === 'stream-claimed' || isShareMessage(message)) ctx.legacyStreams.handle(message);
  }

  async #serve(ctx: StatelessContext, message: Extract<BridgeMessage, { type: 'bridge-resume' }>): Promise<void> {
    const { ticket, replyTo } = message;
    const continuation = JSON.parse(message.continuation) as Continuation;
    const reply = (outcome: OutcomeFields) => ctx.coordinator.send(replyTo, { type: 'bridge-outcome', ticket, ...outcome });
    if (!ctx.parkedCalls.has(continuation.parkId)) return reply({});
    const left = new AbortController();
    this.#serving.set(ticket, left);
    await reply({ taken: true });
    try {
      if (message.pieces) await sendPieces(resumeForOtherReplica(ctx, continuation, left.signal), reply);
      else await sendWhole(resumeForOtherReplica(ctx, continuation, left.signal), reply);
    } finally {
      this.#serving.delete(ticket);
    }
  }
}

export type OutcomeFields = Omit<Extract<BridgeMessage, { type: 'bridge-outcome' }>, 'type' | 'ticket'>;

/** Each message goes back as it comes, numbered (the other replica writes them in order). */
export async function sendPieces(attempt: AsyncGenerator<AttemptMessage>, reply: (outcome: OutcomeFields) => Promise<void>): Promise<void> {
  let seq = 0;
  let ended = false;
  try {
    for await (const sent of attempt) {
      ended = sent.final !== undefined;
      await reply({ seq: seq++, messages: [sent.data], status: sent.final?.status, more: !ended });
    }
  } finally {
    if (!ended) await reply({ seq: seq++, more: false });
  }
}

/**
 * The whole attempt in one message, as a replica of an earlier release reads it (a rolling
 * upgrade): no progress until the end, but nothing taken for the whole that is not; an attempt
 * that fails before its final message sends nothing, as that release did.
 */
export async function sendWhole(attempt: AsyncGenerator<AttemptMessage>, reply: (outcome: OutcomeFields) => Promise<void>): Promise<void> {
  const messages: string[] = [];
  let status: number | undefined;
  try {
    for await (const sent of attempt) {
      messages.push(sent.data);
      status = sent.final?.status ?? status;
    }
  } finally {
    // Without its final message the attempt is no answer: the other replica says the call is gone.
    await reply(status === undefined ? {} : { messages, status });
  }
}
