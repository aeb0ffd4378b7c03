/**
 * Gathers the replay-log appends of many streams into few Redis calls.
 *
 * Every SSE message the gateway relays is appended to its stream's replay log (MCP
 * 2025-11-25 "Resumability and Redelivery"). One script call per append was a quarter of
 * the gateway's CPU per SSE call (`npm run bench:compare -- --sse`, with the append left out
 * as the ablation). The appends do not hold up the client — it gets each event at once —
 * so they can wait for the end of the current turn of the event loop: everything queued
 * until then (all the backend answers read in that turn) goes out in one call
 * (`setImmediate`, not a timer: no added delay when the gateway is idle).
 *
 * Order: a relay waits for its previous append before it sends the next (stream-relay.ts),
 * so the events of one stream stay in order; different streams are independent. A call
 * carries at most {@link MAX_STREAMS_PER_CALL} streams and, beyond the first stream, at most
 * {@link MAX_ENTRIES_PER_CALL} entries, so a script never blocks Redis for long.
 *
 * Redis Cluster runs a script only on keys of one hash slot (CROSSSLOT otherwise), so with
 * `groupOf` (the item's slot; redis-store.ts in cluster mode) one call carries the items of
 * one group only: a turn with appends of three users on three slots makes three calls.
 *
 * A call that fails goes to `recover` (the store waiting out a Redis blip and sending the
 * call again: store-waits.ts) before its appends are rejected; nothing is added to a call
 * that succeeds.
 */

/** What the batcher needs to know of one stream's append: the entries it carries. */
export interface AppendItem {
  entries: readonly string[];
}

export const MAX_STREAMS_PER_CALL = 64;
export const MAX_ENTRIES_PER_CALL = 2_000;

interface Waiting<T> {
  item: T;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class AppendBatcher<T extends AppendItem> {
  #queue: Waiting<T>[] = [];
  #scheduled = false;

  /**
   * @param send writes one group of appends (one Redis call).
   * @param groupOf items of different groups never share a call.
   * @param recover after `send` failed with `err`: resolves when the same items were written after all, or rejects.
   */
  constructor(
    private readonly send: (items: T[]) => Promise<unknown>,
    private readonly groupOf?: (item: T) => number,
    private readonly recover?: (err: unknown, items: T[]) => Promise<unknown>,
  ) {}

  /** Resolves once the item is stored; rejects with the error of the call that carried it. */
  append(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(() => this.#flush());
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    if (!this.groupOf) return this.#sendAll(queue);
    const groups = new Map<number, Waiting<T>[]>();
    for (const waiting of queue) {
      const group = this.groupOf(waiting.item);
      const list = groups.get(group);
      if (list) list.push(waiting);
      else groups.set(group, [waiting]);
    }
    for (const list of groups.values()) this.#sendAll(list);
  }

  /** Sends `queue` in calls bounded by {@link MAX_STREAMS_PER_CALL} and {@link MAX_ENTRIES_PER_CALL}. */
  #sendAll(queue: Waiting<T>[]): void {
    for (let start = 0; start < queue.length; ) {
      let end = start + 1;
      let entries = queue[start]!.item.entries.length;
      while (end < queue.length && end - start < MAX_STREAMS_PER_CALL && entries + queue[end]!.item.entries.length <= MAX_ENTRIES_PER_CALL) {
        entries += queue[end]!.item.entries.length;
        end++;
      }
      const group = queue.slice(start, end);
      const items = group.map((w) => w.item);
      let sent: Promise<unknown>;
      try {
        sent = this.send(items);
      } catch (err) {
        sent = Promise.reject(err);
      }
      sent.then(
        () => group.forEach((w) => w.resolve()),
        (err: unknown) => this.#failed(err, group, items),
      );
      start = end;
    }
  }

  /** A call failed: `recover` may still write its items; otherwise every append of the call is rejected. */
  #failed(err: unknown, group: Waiting<T>[], items: T[]): void {
    if (!this.recover) return group.forEach((w) => w.reject(err));
    this.recover(err, items).then(
      () => group.forEach((w) => w.resolve()),
      (last: unknown) => group.forEach((w) => w.reject(last)),
    );
  }
}
