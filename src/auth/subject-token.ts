/**
 * The caller's own access token, kept for one purpose: to be exchanged for a token meant for
 * a backend with `tokenExchange` (RFC 8693 §2.1 `subject_token`; Entra on-behalf-of
 * `assertion`). The token is never forwarded (MCP 2025-11-25 "Authorization": no token
 * passthrough), so it lives behind a private field that every way of printing an object —
 * JSON.stringify, pino, util.inspect, string conversion — shows as `[redacted]`. Only
 * {@link SubjectToken.reveal} gives it out, and only src/exchange/ calls that.
 */
import { inspect } from 'node:util';

const REDACTED = '[redacted]';

export class SubjectToken {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The token itself, for the body of an exchange request and nothing else. */
  reveal(): string {
    return this.#value;
  }

  toJSON(): string {
    return REDACTED;
  }

  toString(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return `SubjectToken ${REDACTED}`;
  }
}
