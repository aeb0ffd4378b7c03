/**
 * The aggregated session's standalone GET stream (MCP 2025-11-25 "Listening for Messages
 * from the Server"): the GET streams of all member backends, merged into one. Each source
 * yields whole SSE events, so interleaving them never splits an event. The merge ends when
 * every source has ended; the client then reconnects and gets a fresh merge.
 */
export async function* mergeStreams(sources: Array<AsyncIterable<Buffer>>): AsyncGenerator<Buffer> {
  const iterators = sources.map((s) => s[Symbol.asyncIterator]());
  type Step = { index: number; result: IteratorResult<Buffer> | undefined };
  const pending = new Map<number, Promise<Step>>();
  const advance = (index: number) =>
    pending.set(
      index,
      iterators[index]!.next().then(
        (result) => ({ index, result }),
        // A source that fails (its backend went away) simply ends; the others go on.
        () => ({ index, result: undefined }),
      ),
    );
  iterators.forEach((_, index) => advance(index));
  try {
    while (pending.size) {
      const { index, result } = await Promise.race(pending.values());
      pending.delete(index);
      if (!result || result.done) continue;
      yield result.value;
      advance(index);
    }
  } finally {
    // Not awaited: a source blocked on an idle backend ends when its request is aborted.
    for (const it of iterators) void it.return?.(undefined).catch(() => {});
  }
}
