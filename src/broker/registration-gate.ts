/**
 * `POST /oauth2/register` in front of oidc-provider (issue 28 §3, §4): anonymous RFC 7591
 * registration, bounded so that strangers cannot fill Redis (each registration is kept) or
 * steer the provider's fetches.
 *
 * In order, each refusal before anything is stored:
 * 1. **Per address** — `registrationLimits.perAddress` per `window` from one client address
 *    (`request.ip`: the trusted proxy's X-Forwarded-For with `listen.trustProxy`, the socket's
 *    otherwise; an IPv6 address by its network of `ipv6Prefix` bits, registration-address.ts),
 *    counted when the headers arrive, so a refused client costs no upload →
 *    429 with `Retry-After`.
 * 2. **The document** — at most {@link MAX_DOCUMENT_BYTES} of `application/json` (Fastify's
 *    body limit: 413; another type: 415), then registration-rules.ts → 400
 *    `invalid_client_metadata`.
 * 3. **In total** — `registrationLimits.total` per `unusedClientTtl` from every address
 *    together → 503 with `Retry-After`: registration is closed for a while, for everyone, while
 *    Redis keeps what it has. Since a registration that obtains no token is forgotten after
 *    `unusedClientTtl` (store-adapter.ts), this bounds the unused registrations kept at any
 *    time (about twice `total`: the window is fixed).
 * Then the same bytes go to the provider (`forward`).
 *
 * The counts are the rate limiter's (src/http/rate-limit.ts: the state's `rateCounter`, in
 * Redis with several replicas, under `rl:broker-register…`), so replicas share them, with the
 * precision that store documents (a few requests over `max` across replicas).
 *
 * Errors are RFC 7591 §3.2.2 JSON (`error`, `error_description`); the 429 and 503 use
 * `temporarily_unavailable` (RFC 6749 §4.1.2.1), the registry's word for "try again later".
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Config } from '../config/schema.js';
import type { RateLimitCount, RateLimitStore } from '../state/rate-limit-store.js';
import { MAX_DOCUMENT_BYTES, registrationProblem } from './registration-rules.js';
import { registrationAddressKey } from './registration-address.js';

type Limits = Config['auth']['broker']['registrationLimits'];

export interface RegistrationGateDeps {
  counter: RateLimitStore;
  limits: Limits;
  /** Hands the request, with the body already read, to oidc-provider. */
  forward: (request: FastifyRequest, reply: FastifyReply, body: Buffer) => Promise<void>;
}

/** The counter keys: one per address (IPv6: per network), one for all (the rate limiter's user keys are digests, never these). */
const perAddressKey = (ip: string, ipv6Prefix: number) => `broker-register:${registrationAddressKey(ip, ipv6Prefix)}`;
const TOTAL_KEY = 'broker-register';

export function registerRegistrationRoute(app: FastifyInstance, path: string, { counter, limits, forward }: RegistrationGateDeps): void {
  const perAddress: onRequestHookHandler = (request, reply, done) => {
    const count = countNow(counter, perAddressKey(request.ip, limits.ipv6Prefix), limits.window, limits.perAddress);
    if (!count || count.current <= limits.perAddress) return done();
    request.log.info({ remoteAddress: request.ip }, 'broker: registration refused, too many from this address');
    void refuse(reply, 429, 'temporarily_unavailable', 'too many registrations from this address: retry later', count.ttl);
  };

  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: MAX_DOCUMENT_BYTES }, (_request, body, done) => done(null, body));
    scope.post(path, { bodyLimit: MAX_DOCUMENT_BYTES, onRequest: perAddress }, async (request, reply) => {
      const body = request.body as Buffer;
      let doc: unknown;
      try {
        doc = JSON.parse(body.toString('utf8'));
      } catch {
        return refuse(reply, 400, 'invalid_client_metadata', 'the registration is not JSON');
      }
      const problem = registrationProblem(doc);
      if (problem) return refuse(reply, 400, 'invalid_client_metadata', problem);
      const total = countNow(counter, TOTAL_KEY, limits.unusedClientTtl, limits.total);
      if (total && total.current > limits.total) {
        request.log.warn({ total: limits.total }, 'broker: registration closed for now, auth.broker.registrationLimits.total reached');
        return refuse(reply, 503, 'temporarily_unavailable', 'registration is closed for now: too many new clients; retry later', total.ttl);
      }
      return forward(request, reply, body);
    });
  });
}

/** The counter answers at once (rate-limit-store.ts); a store that cannot answer skips the limit. */
function countNow(counter: RateLimitStore, key: string, windowMs: number, max: number): RateLimitCount | undefined {
  let result: RateLimitCount | undefined;
  counter.incr(key, (error, count) => (result = error ? undefined : count), windowMs, max);
  return result;
}

function refuse(reply: FastifyReply, status: number, error: string, description: string, retryAfterMs?: number): FastifyReply {
  if (retryAfterMs !== undefined) reply.header('retry-after', String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  return reply.code(status).header('cache-control', 'no-store').type('application/json').send({ error, error_description: description });
}
