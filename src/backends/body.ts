/**
 * The body of a backend response as the MCP layer consumes it: a Node stream it can pipe to
 * the client or read message by message, plus the undici conveniences the layer uses.
 * undici's own body satisfies it; so do bodies the gateway makes itself (an answer composed
 * by the aggregated endpoint, or a backend stream rewritten on its way through).
 */
import { Readable } from 'node:stream';

export type BackendBody = Readable & {
  /** Reads and discards the rest, so the connection can be reused. */
  dump(): Promise<void>;
  text(): Promise<string>;
  /** The whole body as bytes (for answers small enough to send in one write). */
  bytes(): Promise<Uint8Array>;
};

/** Wraps text or a chunk source as a BackendBody. */
export function syntheticBody(source: string | AsyncIterable<Buffer | string>): BackendBody {
  const stream = (typeof source === 'string' ? Readable.from([Buffer.from(source)]) : Readable.from(source)) as BackendBody;
  stream.dump = async () => {
    // Destroying the stream makes the source generator return (its finally blocks run).
    stream.destroy();
  };
  stream.bytes = async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    return Buffer.concat(chunks);
  };
  stream.text = async () => Buffer.from(await stream.bytes()).toString('utf8');
  return stream;
}
