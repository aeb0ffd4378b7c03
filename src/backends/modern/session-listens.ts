/**
 * The standalone GET stream of a 2025-11-25 client's session with a 2026-07-28 backend, made of
 * the backend's `subscriptions/listen` (issue 15: "maps `resources/subscribe` and the GET
 * stream onto `subscriptions/listen`"; MCP 2026-07-28 "Subscriptions").
 *
 * The listen asks for the list changes the backend announced and for the resources the session
 * subscribed to (`resources/subscribe` is kept in the session, adapted-sessions.ts). The client
 * gets the notifications as a 2025 server sends them on its GET stream: without the
 * acknowledgement, without the `subscriptionId` tag. When the session's subscriptions change —
 * on any replica, announced to all — the replica holding the stream opens a new listen with
 * the new filter and closes the old one, on the same client stream. When the backend ends its
 * listen, the client's stream ends (the client opens it again, as after any GET stream).
 */
import type { BackendResponse } from '../backend.js';
import { BackendMessages, type BackendMessage } from '../backend-messages.js';
import { syntheticBody } from '../body.js';
import { formatSseEvent } from '../../wire/sse.js';
import { META } from '../../wire/revision-2026.js';

/** Opens the backend's listen for the session as it is now; undefined when it cannot be opened. */
export type OpenListen = () => Promise<BackendResponse | undefined>;

export class SessionListens {
  readonly #refresh = new Map<string, Set<() => void>>();

  /**
   * The client's stream, or undefined when the backend did not open the first listen. A listen
   * answered as JSON (issue 29) is open once its first message is a notification (the
   * acknowledgement): a JSON answer that is a response is the backend's refusal, as a 2026
   * server answers a request it does not take.
   */
  async open(userKey: string, sessionId: string, openListen: OpenListen): Promise<BackendResponse | undefined> {
    const first = await openListen();
    if (!first) return undefined;
    let current = new BackendMessages(first.body, first.contentType);
    let head = first.contentType === 'application/json' ? await current.next() : undefined;
    if (first.contentType === 'application/json' && head?.method === undefined) {
      current.close();
      return undefined;
    }
    const key = `${userKey}\n${sessionId}`;
    let refreshing = false;
    const refresh = () => {
      refreshing = true;
      current.close();
    };
    const listens = this.#refresh.get(key) ?? new Set();
    this.#refresh.set(key, listens.add(refresh));
    const forget = () => {
      listens.delete(refresh);
      if (!listens.size) this.#refresh.delete(key);
    };
    const reopen = async () => {
      const res = await openListen();
      return res && new BackendMessages(res.body, res.contentType);
    };
    async function* events(): AsyncGenerator<string> {
      try {
        for (let messages: BackendMessages | undefined = current; messages; messages = refreshing ? await reopen() : undefined) {
          refreshing = false;
          current = messages;
          for (let message = head ?? (await messages.next()); message; message = await messages.next()) {
            head = undefined;
            if (message.method === undefined) break;
            if (message.id !== undefined || message.method === 'notifications/subscriptions/acknowledged') continue;
            yield formatSseEvent(JSON.stringify(untagged(message)));
          }
          messages.close();
        }
      } finally {
        forget();
        current.close();
      }
    }
    const body = syntheticBody(events());
    // The client leaving (or the gateway ending its streams at shutdown) closes the backend's
    // listen at once: the generator itself would only see it at the backend's next message.
    (body as unknown as NodeJS.EventEmitter).once('close', () => {
      refreshing = false;
      forget();
      current.close();
    });
    return { status: 200, headers: {}, contentType: 'text/event-stream', body };
  }

  /** The session's subscriptions changed: its streams on this replica listen again with the new filter. */
  changed(userKey: string, sessionId: string): void {
    for (const refresh of this.#refresh.get(`${userKey}\n${sessionId}`) ?? []) refresh();
  }
}

function untagged(message: BackendMessage): BackendMessage {
  const params = message.params as { _meta?: Record<string, unknown> } | undefined;
  if (!params?._meta || !(META.subscriptionId in params._meta)) return message;
  const { [META.subscriptionId]: _id, ...meta } = params._meta;
  void _id;
  return { ...message, params: { ...params, _meta: meta } };
}
