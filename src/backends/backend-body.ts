/**
 * Reading a backend response that the gateway must look into (initialize) rather than
 * pipe: the JSON-RPC messages of a JSON body or of a complete SSE stream.
 */
import type { BackendResponse } from './streamable-http.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { createSseReader } from '../wire/sse.js';

export interface CollectedMessages {
  /** Raw message texts, in order, as the backend sent them. */
  texts: string[];
  messages: JsonRpcMessage[];
}

/** Bounded: a backend cannot make the gateway buffer without limit. */
const MAX_BYTES = 4 * 1024 * 1024;

export async function collectMessages(res: BackendResponse): Promise<CollectedMessages> {
  const texts: string[] = [];
  let size = 0;
  if (res.contentType === 'text/event-stream') {
    const reader = createSseReader({ onEvent: (data) => data.trim() && texts.push(data) });
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BYTES) throw new Error('backend response too large');
      reader.feed(chunk);
    }
  } else {
    const text = await res.body.text();
    if (text.length > MAX_BYTES) throw new Error('backend response too large');
    texts.push(text);
  }
  const messages: JsonRpcMessage[] = [];
  for (const text of texts) {
    const value = JSON.parse(text) as JsonRpcMessage | JsonRpcMessage[];
    messages.push(...(Array.isArray(value) ? value : [value]));
  }
  return { texts, messages };
}
