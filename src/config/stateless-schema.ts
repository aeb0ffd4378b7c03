/**
 * The `stateless` config block: what one user's MCP 2026-07-28 calls may hold through the
 * bridge to 2025-11-25 backends (src/stateless/; issue 28 §5, SPEC §8 "Budgets") — the
 * gateway's own sessions with those backends (each a backend session, a GET stream held open on
 * a replica and a record in the store) and the backend calls parked while the client is asked.
 * The session path holds a user to `sessions.maxPerUser`; without these one user held sixty
 * bridge sessions and sixty parked calls.
 */
import { z } from 'zod';

type Duration = (fallback: string) => z.ZodType<number, z.ZodTypeDef, string | number | undefined>;
type WholeNumber = () => z.ZodType<number, z.ZodTypeDef, unknown>;

/** Built with the config's own duration and number types (schema.ts), which this file cannot import without a cycle. */
export function statelessSchema(duration: Duration, wholeNumber: WholeNumber) {
  return z
    .object({
      /**
       * The gateway's sessions one user's calls may hold, every backend, capability set and
       * lane counted, across replicas. Past it a call that needs a new one gets HTTP 429 -32016;
       * a call that wanted a lane of its own shares the first session instead.
       */
      maxSessionsPerUser: wholeNumber().pipe(z.number().min(1, 'must be at least 1')).default(16),
      /** How long such a session is kept; then it counts no more and is opened again when needed. */
      sessionTtl: duration('1h').refine((ms) => ms >= 60_000, 'must be at least 1m'),
      /** Calls of one user parked on one replica waiting for the client's answer; past it the call ends with HTTP 429 -32016. */
      maxParkedPerUser: wholeNumber().pipe(z.number().min(1, 'must be at least 1')).default(10),
    })
    .strict();
}
