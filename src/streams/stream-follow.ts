/**
 * Following a stream that another replica is still reading (SPEC §5): the client lost its
 * connection to replica A and reconnected to us with `Last-Event-ID` while A still reads
 * the backend's answer. We subscribe to the stream's channel first, then replay the log,
 * then pass on what A appends — so no event is missed or sent twice. If A stops holding the
 * stream without finishing it (A died), we take the stream over ourselves.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Coordinator } from '../state/coordinator.js';
import type { StateStore, StoredEvent, StreamKey } from '../state/store.js';
import type { SseWriter } from './sse-writer.js';
import { eventId } from './stream-relay.js';
import { LEASE_TTL_MS } from './stream-leases.js';

export interface FollowContext {
  coordinator: Coordinator;
  store: StateStore;
  key: StreamKey;
  log: FastifyBaseLogger;
}

/** How often the follower checks that the reading replica is still alive. */
const CHECK_EVERY_MS = LEASE_TTL_MS / 4;

export async function followRemoteStream(
  ctx: FollowContext,
  writer: SseWriter,
  afterSeq: number,
  takeOver: (writer: SseWriter, lastSeq: number) => Promise<unknown>,
): Promise<void> {
  let lastSeq = afterSeq;
  let ended = false;
  let buffered: StoredEvent[] | undefined = [];
  let settle!: () => void;
  const done = new Promise<void>((resolve) => (settle = resolve));

  const deliver = (events: StoredEvent[]) => {
    for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
      if (e.seq <= lastSeq && !e.end) continue;
      if (e.data !== undefined && e.seq > lastSeq) writer.message(e.data, eventId(ctx.key.streamId, e.seq));
      lastSeq = Math.max(lastSeq, e.seq);
      if (e.end) ended = true;
    }
    if (ended) finish();
  };
  const unwatch = await ctx.coordinator.watchStream(ctx.key, (events) => (buffered ? buffered.push(...events) : deliver(events)));
  const timer = setInterval(() => void checkHolder(), CHECK_EVERY_MS);
  timer.unref();
  let finished = false;
  const finish = (handOver = false) => {
    if (finished) return;
    finished = true;
    clearInterval(timer);
    void unwatch();
    if (!handOver) writer.end();
    settle();
  };
  writer.onClose(() => finish(true));

  const checkHolder = async () => {
    if (finished) return;
    const holder = await ctx.coordinator.streamHolder(ctx.key).catch(() => 'unknown');
    if (holder !== undefined || finished) return;
    // Nobody reads the stream any more and it did not end: the reader is gone. Whatever it
    // appended is in the log; take over from there.
    deliver(await ctx.store.readEvents(ctx.key).catch(() => []));
    if (finished) return;
    ctx.log.info({ streamId: ctx.key.streamId }, 'the replica reading this stream is gone; taking it over');
    finish(true);
    await takeOver(writer, lastSeq).catch((err: Error) => {
      ctx.log.warn({ err: err.message }, 'could not take the stream over');
      writer.end();
    });
  };

  const stored = await ctx.store.readEvents(ctx.key);
  deliver(stored);
  const early = buffered;
  buffered = undefined;
  deliver(early);
  await done;
}
