/**
 * Reads an answer of the gateway's Streamable HTTP endpoint (MCP 2025-11-25 "Transports")
 * message by message, for the WebSocket bridge: a JSON body (one message, or an array in
 * 2025-03-26) or an SSE stream. For SSE it reports where the stream stood when it ended —
 * the last event id and whether the server ended it with `retry` (the invitation to
 * reconnect with Last-Event-ID) — so that the bridge can resume it.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser } from 'eventsource-parser';
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

export function contentTypeOf(res: LoopbackResponse): string {
  const value = res.headers['content-type'];
  return String(Array.isArray(value) ? value[0] : (value ?? ''))
    .split(';')[0]!
    .trim()
    .toLowerCase();
}

export function isEventStream(res: LoopbackResponse): boolean {
  return contentTypeOf(res) === 'text/event-stream';
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
  const parser = createParser({
    onEvent: (event) => {
      end.endedWithRetry = false;
      if (event.id) end.lastEventId = event.id;
      if (event.data.trim()) onMessage(event.data, event.id);
    },
    onRetry: (ms) => {
      end.retryMs = ms;
      end.endedWithRetry = true;
    },
  });
  const decoder = new StringDecoder('utf8');
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) parser.feed(decoder.write(chunk));
  } catch (err) {
    end.error = err as Error;
  }
  return end;
}
