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
 * back together when it ends: progress notifications of a handed-over attempt arrive late, all
 * at once — the price of not routing the client's connection itself.
 */
import { isShareMessage } from './legacy-stream-shares.js';
import { randomUUID } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import type { BridgeMessage } from '../state/coordinator.js';
import { formatSseEvent, SSE_RESPONSE_HEADERS } from '../wire/sse.js';
import { gone, resumeForOtherReplica, type Continuation } from './bridge-resume.js';
import type { StatelessContext } from './context.js';
import { PARK_TTL_MS } from './parked-calls.js';

/** How long a handed-over retry waits for the holder to say it has the call. */
export const ACK_TIMEOUT_MS = 5_000;

interface Outcome {
  messages?: string[];
  status?: number;
}

interface Waiter {
  taken(): void;
  done(outcome: Outcome): void;
}

export class BridgeReplicas {
  readonly #waiting = new Map<string, Waiter>();

  /** Hands the retry to `replicaId` and answers the client with what comes back. */
  async resumeElsewhere(ctx: StatelessContext, reply: FastifyReply, replicaId: string, continuation: Continuation): Promise<FastifyReply> {
    const ticket = randomUUID();
    let onTaken!: () => void;
    let onDone!: (outcome: Outcome) => void;
    const taken = new Promise<'taken'>((resolve) => (onTaken = () => resolve('taken')));
    const done = new Promise<Outcome>((resolve) => (onDone = resolve));
    this.#waiting.set(ticket, { taken: onTaken, done: onDone });
    const timers: NodeJS.Timeout[] = [];
    const after = <T>(ms: number, value: T) => new Promise<T>((resolve) => timers.push(setTimeout(resolve, ms, value)));
    try {
      await ctx.coordinator.send(replicaId, { type: 'bridge-resume', ticket, replyTo: ctx.coordinator.replicaId, continuation: JSON.stringify(continuation) });
      const first = await Promise.race([taken, done, after(ACK_TIMEOUT_MS, {} as Outcome)]);
      const outcome = first === 'taken' ? await Promise.race([done, after(PARK_TTL_MS, {} as Outcome)]) : first;
      const messages = outcome.messages;
      if (!messages?.length) return gone(reply, continuation.attempt.id);
      reply.request.mcpOutcome = 'answered_by_gateway';
      if (messages.length === 1) return reply.code(outcome.status ?? 200).type('application/json').send(messages[0]);
      return reply
        .code(200)
        .headers(SSE_RESPONSE_HEADERS)
        .send(messages.map((data) => formatSseEvent(data)).join(''));
    } finally {
      this.#waiting.delete(ticket);
      timers.forEach(clearTimeout);
    }
  }

  /** A bridge message from another replica: a retry to serve here, or the outcome of one sent away. */
  handle(ctx: StatelessContext, message: BridgeMessage): void {
    if (message.type === 'bridge-outcome') {
      const waiter = this.#waiting.get(message.ticket);
      if (message.taken) waiter?.taken();
      else waiter?.done({ messages: message.messages, status: message.status });
      return;
    }
    if (message.type === 'bridge-resume') void this.#serve(ctx, message).catch(() => {});
    else if (message.type === 'stream-request' || message.type === 'stream-claimed' || isShareMessage(message)) ctx.legacyStreams.handle(message);
  }

  async #serve(ctx: StatelessContext, message: Extract<BridgeMessage, { type: 'bridge-resume' }>): Promise<void> {
    const { ticket, replyTo } = message;
    const continuation = JSON.parse(message.continuation) as Continuation;
    const reply = (outcome: Omit<Extract<BridgeMessage, { type: 'bridge-outcome' }>, 'type' | 'ticket'>) =>
      ctx.coordinator.send(replyTo, { type: 'bridge-outcome', ticket, ...outcome });
    if (!ctx.parkedCalls.has(continuation.parkId)) return reply({});
    await reply({ taken: true });
    let outcome: { messages: string[]; status: number } | undefined;
    try {
      outcome = await resumeForOtherReplica(ctx, continuation);
    } finally {
      await reply({ ...outcome });
    }
  }
}
