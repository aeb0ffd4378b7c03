/**
 * The standalone GET stream of a 2025-11-25 client's session with a 2026-07-28 backend, made of
 * the backend's `subscriptions/listen` (issue 15: "maps `resources/subscribe` and the GET
 * stream onto `subscriptions/listen`"; MCP 2026-07-28 "Subscriptions").
 *
 * The listen asks for the list changes the backend announced and for the resources the session
 * subscribed to (`resources/subscribe` is kept in the session, adapted-sessions.ts). The client
 * gets the notifications as a 2025 server sends them on its GET stream: without the
 * acknowledgement, without the `subscriptionId` tag. When the session's subscriptions change —
 * on any replica, announced to the others — the replica holding the stream opens a new listen
 * with the new filter and, once the backend acknowledges it, closes the old one, on the same
 * client stream; the replica where it changed waits for that before it answers. When the backend ends its
 * listen, the client's stream ends (the client opens it again, as after any GET stream).
 */
import type { BackendResponse } from '../backend.js';
import { BackendMessages, type BackendMessage } from '../backend-messages.js';
import { syntheticBody } from '../body.js';
import { formatSseEvent } from '../../wire/sse.js';
import { META } from '../../wire/revision-2026.js';
import { untilAborted } from '../abortable.js';

/** How long a change of subscriptions waits for the new listens' acknowledgements. */
const CHANGE_WAIT_MS = 5_000;

/** Opens the backend's listen for the session as it is now; undefined when it cannot be opened. */
export type OpenListen = () => Promise<BackendResponse | undefined>;

export class SessionListens {
  readonly #refresh = new Map<string, Set<() => Promise<void>>>();

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
    /** The listen with the new filter, acknowledged, waiting to take the old one's place. */
    let next: BackendMessages | undefined;
    let nextHead: BackendMessage | undefined;
    const refresh = async (): Promise<void> => {
      const opened = await openListen().catch(() => undefined);
      const messages = opened && new BackendMessages(opened.body, opened.contentType);
      const first = messages && (await messages.next());
      next?.close();
      // Make before break: the old listen is closed only once the new one has answered with a
      // notification (its acknowledgement), so no notification falls between them. One the
      // backend refuses (a response) or cannot open ends the stream, as a first listen would.
      const open = typeof first?.method === 'string' && first.id === undefined;
      if (!open) messages?.close();
      next = open ? messages : undefined;
      nextHead = open ? first : undefined;
      refreshing = true;
      current.close();
    };
    const listens = this.#refresh.get(key) ?? new Set();
    this.#refresh.set(key, listens.add(refresh));
    const forget = () => {
      listens.delete(refresh);
      if (!listens.size) this.#refresh.delete(key);
    };
    const taken = (): BackendMessages | undefined => {
      const messages = next;
      head = nextHead;
      next = nextHead = undefined;
      return messages;
    };
    async function* events(): AsyncGenerator<string> {
      try {
        for (let messages: BackendMessages | undefined = current; messages; messages = refreshing ? taken() : undefined) {
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
        taken()?.close();
      }
    }
    const body = syntheticBody(events());
    // The client leaving (or the gateway ending its streams at shutdown) closes the backend's
    // listen at once: the generator itself would only see it at the backend's next message.
    (body as unknown as NodeJS.EventEmitter).once('close', () => {
      refreshing = false;
      forget();
      current.close();
      taken()?.close();
    });
    return { status: 200, headers: {}, contentType: 'text/event-stream', body };
  }

  /**
   * The session's subscriptions changed: its streams on this replica listen again with the new
   * filter. Settles once each new listen is acknowledged (or refused), or after `waitMs`: a
   * `resources/subscribe` answered after it means the update the client triggers next is heard.
   */
  async changed(userKey: string, sessionId: string, waitMs = CHANGE_WAIT_MS): Promise<void> {
    const refreshes = [...(this.#refresh.get(`${userKey}\n${sessionId}`) ?? [])].map((refresh) => refresh());
    if (refreshes.length) await untilAborted(Promise.allSettled(refreshes), AbortSignal.timeout(waitMs)).catch(() => undefined);
  }
}

function untagged(message: BackendMessage): BackendMessage {
  const params = message.params as { _meta?: Record<string, unknown> } | undefined;
  if (!params?._meta || !(META.subscriptionId in params._meta)) return message;
  const { [META.subscriptionId]: _id, ...meta } = params._meta;
  void _id;
  return { ...message, params: { ...params, _meta: meta } };
}
