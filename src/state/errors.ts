/**
 * The state layer's failure, as its callers see it: the store or coordinator (Redis) could
 * not be reached. The HTTP layer answers it with 503 and `Retry-After` (SPEC §5, "Redis
 * going away"; http/replies.ts sendStateUnavailable), never as the client's fault.
 */

/** Thrown when the state store cannot be reached; becomes 503 (SPEC §5, "Redis going away"). */
export class StateUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`session state is unavailable: ${(cause as Error)?.message ?? cause}`);
    this.name = 'StateUnavailableError';
  }
}
