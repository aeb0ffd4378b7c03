/**
 * A 2026-07-28 backend's answer to `subscriptions/listen`, relayed by answer-relay.ts, also
 * carries the list changes the gateway itself causes (MCP 2026-07-28 "Subscriptions"; issue 31,
 * pinning; issue 32 §1, reload): a pin approval changes what `tools/list` answers without the
 * backend knowing, so the backend never says so on its stream.
 *
 * The backend's acknowledgement (`notifications/subscriptions/acknowledged`) says which
 * notifications it honours and under which subscription id; once it has passed, the listen is
 * kept in this replica's open listens (streams/open-listens.ts) with that filter and id. A
 * notice for it is written into the relayed stream between two of the backend's events, never
 * inside one: the relay yields whole events, and the notices queue until the next boundary
 * (at once when the backend is silent).
 */
import { listenResultFor, listsAsked, type OpenListens } from '../streams/open-listens.js';
import type { JsonRpcId } from '../wire/jsonrpc.js';
import { META } from '../wire/revision-2026.js';
import { formatSseEvent } from '../wire/sse.js';

const ACKNOWLEDGED = 'notifications/subscriptions/acknowledged';

export interface ListenOwner {
  userKey: string;
  /** The endpoint the listen was opened on. */
  endpoint: string;
  /** The listen request's id: the subscription id when the backend's acknowledgement names none. */
  id: JsonRpcId;
}

export class RelayedListen {
  readonly #listens: OpenListens;
  readonly #owner: ListenOwner;
  #queued: string[] = [];
  #wake: (() => void) | undefined;
  #forget: (() => void) | undefined;
  #over = false;
  /** Set by `end`: the relay stops after the queued messages, the listen's result last. */
  #ending = false;

  constructor(listens: OpenListens, owner: ListenOwner) {
    this.#listens = listens;
    this.#owner = owner;
  }

  /** Each message the backend sends on the listen, as text: its acknowledgement opens the listen to the gateway's notices. */
  observe(text: string): void {
    if (this.#forget || this.#over || !text.includes(ACKNOWLEDGED)) return;
    let message: { method?: unknown; params?: { notifications?: unknown; _meta?: Record<string, unknown> } };
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      return;
    }
    if (message.method !== ACKNOWLEDGED) return;
    const named = message.params?._meta?.[META.subscriptionId];
    const subscriptionId = typeof named === 'string' || typeof named === 'number' ? named : (this.#owner.id as string | number);
    this.#forget = this.#listens.add({
      userKey: this.#owner.userKey,
      endpoint: this.#owner.endpoint,
      lists: listsAsked(message.params?.notifications),
      subscriptionId,
      write: (m) => this.#inject(m),
      end: () => {
        this.#inject(listenResultFor(this.#owner.id, subscriptionId));
        this.#ending = true;
      },
    });
  }

  #inject(message: string): void {
    if (this.#over) return;
    this.#queued.push(formatSseEvent(message));
    this.#wake?.();
  }

  /**
   * The backend's events (whole events per chunk) with the gateway's notices between them.
   * `stop` closes the backend's answer when the gateway ends the listen itself (`end`): the
   * client's stream then ends normally, which alone would leave the backend's listen open.
   */
  async *relay(events: AsyncIterable<Buffer>, stop: () => void): AsyncGenerator<Buffer> {
    const source = events[Symbol.asyncIterator]();
    let next = source.next();
    try {
      for (;;) {
        const woken = new Promise<undefined>((resolve) => (this.#wake = () => resolve(undefined)));
        const step = await Promise.race([next, woken]);
        this.#wake = undefined;
        if (this.#queued.length) yield Buffer.from(this.#queued.splice(0).join(''));
        if (this.#ending) return stop();
        if (step === undefined) continue;
        if (step.done) return;
        yield step.value;
        next = source.next();
      }
    } finally {
      this.#over = true;
      this.#forget?.();
      // Not awaited: the backend's body may still be read; the relay's cancellation closes it (answer-relay.ts).
      void source.return?.(undefined).catch(() => {});
    }
  }
}
