/**
 * One access-log line per request (issue 16; SPEC §6): when the response has been sent,
 * `request completed` with the time, request id, method and URL (query values redacted),
 * route template, backend, JSON-RPC method (or `batch`), status, duration in ms, the
 * caller's `sub` and a digest of the user key (iss+sub) — never a token. It replaces
 * Fastify's two lines per request (`incoming request` and `request completed`) and is
 * written straight to the log destination, so no logger, child or serializer works on it.
 * A request that failed with an error gets the line at `error` with the error.
 */
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import { levels } from 'pino';
import { isoTime, LOG_BASE, redactQuery } from './logger.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON-RPC method of an MCP POST (`batch` for several), for the access line. */
    rpcMethod?: string;
    /**
     * The matched route's template (e.g. `/mcp/:backend`), set by the route's own response
     * hook (http/route-metrics.ts) before the line is written: Fastify's `routeOptions`
     * getter builds an object of a dozen fields on every read (issue 29).
     */
    routeTemplate?: string;
  }
}

/** Characters of the user key (a digest of iss+sub) the line shows: enough to tell users apart. */
const USER_DIGEST_CHARS = 16;

/** Where the lines go: the gateway's log destination (one write per line; it buffers). */
export interface LineSink {
  write(line: string): unknown;
}

const INFO = levels.values.info!;
/** `{"level":30,"time":"` … — what every access line starts with, up to its time. */
const LINE_START = '{"level":' + INFO + ',"time":"';
const LINE_BASE = '",' + JSON.stringify(LOG_BASE).slice(1, -1);
const q = JSON.stringify;

/**
 * The quoted JSON of values a gateway logs over and over — route templates, backend names,
 * JSON-RPC methods, client addresses — made once each instead of on every line (issue 29).
 * Bounded: a value longer than {@link QUOTED_VALUE_MAX} chars, or one past
 * {@link QUOTED_VALUES_MAX} distinct values (a client sending made-up method names), is
 * quoted each time.
 */
const quotedValues = new Map<string, string>();
const QUOTED_VALUES_MAX = 1024;
const QUOTED_VALUE_MAX = 128;

function quoted(value: string): string {
  let json = quotedValues.get(value);
  if (json !== undefined) return json;
  json = q(value);
  if (value.length <= QUOTED_VALUE_MAX && quotedValues.size < QUOTED_VALUES_MAX) quotedValues.set(value, json);
  return json;
}

/** What the line shows of the caller: the principal's `sub` and user key (auth/principal.ts). */
interface LoggedCaller {
  sub: string;
  userKey: string;
}

/** Per principal (the verifier keeps one object per token), its `sub` and user digest as the line's members. */
const principalMembers = new WeakMap<LoggedCaller, string>();

function principalFields(principal: LoggedCaller): string {
  let members = principalMembers.get(principal);
  if (members === undefined) {
    members = ',"sub":' + q(principal.sub) + ',"user":' + q(principal.userKey.slice(0, USER_DIGEST_CHARS));
    principalMembers.set(principal, members);
  }
  return members;
}

export class AccessLog extends LogController {
  readonly #enabled: boolean;

  /**
   * @param sink the log destination; a successful request's line is written to it directly,
   *   as pino would write it at `info` (level, time, the base fields, the line's fields,
   *   `msg`), without going through a logger: the line holds only fields built here, so it
   *   needs none of pino's redaction or serializers, and its generic serialization was most of
   *   the line's cost (issue 16). A failed request's line goes through the gateway's redacting
   *   logger, as it carries the error.
   * @param level the gateway's log level: the line is written at `info` or finer.
   */
  constructor(
    private readonly sink: LineSink,
    level: string,
  ) {
    super();
    this.#enabled = (levels.values[level] ?? Number.POSITIVE_INFINITY) <= INFO;
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    if (error) return this.#failed(error, request, reply);
    if (!this.#enabled) return;
    this.sink.write(LINE_START + isoTime(Date.now()) + LINE_BASE + ',' + lineFields(request, reply) + ',"msg":"request completed"}\n');
  }

  /** A request that failed with an error: its line at `error`, with the error, through the redacting logger. */
  #failed(error: Error, request: FastifyRequest, reply: FastifyReply): void {
    const log = reply.server.log as FastifyBaseLogger & { isLevelEnabled(l: string): boolean };
    if (!log.isLevelEnabled('error')) return;
    log.error({ ...(JSON.parse(`{${lineFields(request, reply)}}`) as object), err: error }, 'request completed');
  }
}

/**
 * The line's own fields as JSON members (no braces): request id, method and URL (query values
 * redacted), route template, backend, JSON-RPC method, status, ms, `sub` and user digest.
 * Members that do not apply are left out, as pino leaves out undefined fields.
 */
function lineFields(request: FastifyRequest, reply: FastifyReply): string {
  const principal = request.principal;
  const params = request.params as { backend?: unknown } | undefined;
  const route = request.routeTemplate ?? request.routeOptions.url;
  return (
    '"reqId":' +
    q(request.id) +
    ',"req":{"method":' +
    q(request.method) +
    ',"url":' +
    q(redactQuery(request.url)) +
    (request.ip === undefined ? '' : ',"remoteAddress":' + quoted(request.ip)) +
    '}' +
    (route === undefined ? '' : ',"route":' + quoted(route)) +
    (typeof params?.backend === 'string' ? ',"backend":' + quoted(params.backend) : '') +
    (request.rpcMethod ? ',"rpc":' + quoted(request.rpcMethod) : '') +
    ',"status":' +
    reply.statusCode +
    ',"ms":' +
    Math.round(reply.elapsedTime * 100) / 100 +
    (principal ? principalFields(principal) : '')
  );
}
