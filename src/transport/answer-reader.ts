/**
 * Reads an answer of the gateway's Streamable HTTP endpoint (MCP 2025-11-25 "Transports")
 * message by message, for the WebSocket bridge: a JSON body (one message, or an array in
 * 2025-03-26) or an SSE stream. For SSE it reports where the stream stood when it ended —
 * the last event id and whether the server ended it with `retry` (the invitation to
 * reconnect with Last-Event-ID) — so that the bridge can resume it.
 */
import { mediaTypeOf } from '../wire/headers.js';
import { createSseReader } from '../wire/sse.js';
import type { LoopbackResponse } from './loopback.js';

export interface StreamEnd {
  lastEventId: string | undefined;
  /** The last `retry` value the server sent, in ms. */
  retryMs: number | undefined;
  /** The stream's last field was a `retry` (not the one of a priming event): resume it. */
  endedWithRetry: boolean;
  /** Reading failed (connection reset, abort) rather than ending cleanly. */
  error: Error | undefined;
}

export function isEventStream(res: LoopbackResponse): boolean {
  return mediaTypeOf(res.headers['content-type']) === 'text/event-stream';
}

/** The messages of a JSON body, each as the text of one JSON-RPC message. */
export async function readJsonMessages(res: LoopbackResponse): Promise<string[]> {
  const text = await res.body.text();
  if (!text.trim()) return [];
  const trimmed = text.trimStart();
  // Forwarded as received; only a (2025-03-26) batch is split into its messages.
  if (!trimmed.startsWith('[')) return [text];
  return (JSON.parse(trimmed) as unknown[]).map((m) => JSON.stringify(m));
}

/**
 * Feeds each SSE event that carries data to `onMessage`, in order, until the stream ends.
 * Priming events (empty data) and keep-alive comments only move the bookkeeping.
 */
export async function readEventStream(res: LoopbackResponse, onMessage: (data: string, id: string | undefined) => void): Promise<StreamEnd> {
  const end: StreamEnd = { lastEventId: undefined, retryMs: undefined, endedWithRetry: false, error: undefined };
  const reader = createSseReader({
    onEvent: (data, id) => {
      end.endedWithRetry = false;
      if (id) end.lastEventId = id;
      if (data.trim()) onMessage(data, id);
    },
    onRetry: (ms) => {
      end.retryMs = ms;
      end.endedWithRetry = true;
    },
  });
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) reader.feed(chunk);
  } catch (err) {
    end.error = err as Error;
  }
  return end;
}
