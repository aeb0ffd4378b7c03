/**
 * A request's logger without a pino child per request (issue 16). Fastify gives every
 * request `logger.child({reqId})`, and authentication added a second child for `sub` and
 * the backend: two children per request, on the hot path, for lines most requests never
 * write (a request's own line is the access line, access-log.ts, written through the root
 * logger). Here the bindings are kept as a plain object and the pino child is made on the
 * first line the request actually writes at an enabled level — a warning, an error, a debug
 * line — so SPEC §6 still holds: every such line carries the request id and, once known,
 * `sub` and the backend.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level } from 'pino';

type Root = FastifyBaseLogger & { isLevelEnabled(level: Level): boolean };

export class RequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;
  /** Fields bound after the request began, merged only when a child is made (no copy per request). */
  #bound: Bindings | undefined;

  /** `bindings` is the object Fastify made for this request (`{reqId}`); it is kept, not copied. */
  constructor(
    private readonly root: Root,
    private readonly bindings: Bindings,
  ) {}

  get level(): string {
    return this.root.level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  /** Adds fields to every later line of this request (authentication: `sub`, backend). */
  bind(bindings: Bindings): void {
    this.#bound = this.#bound ? { ...this.#bound, ...bindings } : bindings;
    this.#child = undefined;
  }

  // Methods on the prototype, not arrow-function fields: a request logger is made per request.
  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#write('error', args);
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }
  info(...args: unknown[]): void {
    this.#write('info', args);
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }

  #write(level: Level, args: unknown[]): void {
    if (!this.root.isLevelEnabled(level)) return;
    (this.#logger()[level] as (...a: unknown[]) => void)(...args);
  }

  #logger(): FastifyBaseLogger {
    return (this.#child ??= this.root.child(this.#bound ? { ...this.bindings, ...this.#bound } : this.bindings));
  }
}

/** Fastify's `childLoggerFactory`: a {@link RequestLogger} instead of a pino child. */
export function requestLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings): FastifyBaseLogger {
  return new RequestLogger(logger as Root, bindings);
}

/** Binds fields to a request's later lines; nothing to do when logging is off (no RequestLogger then). */
export function bindRequestLog(log: FastifyBaseLogger, bindings: Bindings): void {
  if (log instanceof RequestLogger) log.bind(bindings);
}
