/**
 * How the OTLP exports (spans, metrics, audit log records) reach the collector: by undici, the
 * HTTP client the gateway already speaks to its backends with, in place of the SDK's `node:http`
 * transport (issue 44 part 1).
 *
 * Why not the SDK's own transport: V8 remembers, at each property access, the object shapes it
 * has met (an inline cache), and past four it stops telling them apart ("megamorphic"): every
 * later access there goes through a global lookup table. A `node:http` client request, its socket,
 * its response and their parser are shapes nothing else in the gateway makes. One export was
 * enough to tip a dozen of Node's socket, stream and event sites on every call's path over that
 * edge, for the rest of the process. Counted by `bench/governance-instructions.ts` (plain and
 * metrics only, instructions a call): metrics only was 1.068× plain with the SDK's periodic
 * metric export, 1.052× with no export at all; the megamorphic loads alone were 6.5 k of its
 * 19.5 k above plain, 0.7 k without the export. So an export is sent exactly as a backend's
 * request is (backends/exchange.ts: the same request options, handler and body, over an undici
 * agent of its own), and meets Node's and undici's code with the shapes it already knows.
 *
 * What the SDK's HTTP transport did is kept (OTLP/HTTP, https://opentelemetry.io/docs/specs/otlp/#otlphttp):
 * - a POST of the serialized request to the signal's URL, the exporter's headers (the config's,
 *   and the `OTEL_EXPORTER_OTLP_*` ones the SDK's option merge reads), a `User-Agent`, the body
 *   gzipped with `Content-Encoding: gzip` when the exporter's `compression` says so;
 * - for an `https` collector, the CA and client certificate files the `OTEL_EXPORTER_OTLP_*CERTIFICATE`
 *   and `*CLIENT_KEY` variables name (read by the SDK's options, otlp-http-delegate.ts);
 * - each attempt bounded by the export's timeout;
 * - a 2xx answer is a success, its body (at most {@link MAX_RESPONSE_BYTES}) handed back for the
 *   serializer to read partial successes from; 429, 502, 503 and 504 may be retried, after the
 *   `Retry-After` the collector asked for; any other status fails with the SDK's `OTLPExporterError`;
 * - a refused, reset or timed-out connection may be retried (otlp-retries.ts decides when).
 */
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { OTLPExporterError, type ExportResponse, type IExporterTransport } from '@opentelemetry/otlp-exporter-base';
import { Agent } from 'undici';
import { bytesWithin } from '../backends/body.js';
import { exchange } from '../backends/exchange.js';
import { headerValue, type HeaderField } from '../wire/headers.js';

/** The most of a collector's answer read (the SDK's transport reads as much): a larger one fails the export. */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** OTLP/HTTP "Failures": the statuses after which the same request may be sent again. */
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** Connection failures worth another attempt: Node's (as the SDK's transport lists them) and undici's own. */
const RETRYABLE_ERRORS: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

const gzipped = promisify(gzip);

/** What one collector URL's transport needs: the SDK's merged exporter options have these. */
export interface OtlpHttpTarget {
  url: string;
  /** The request headers, as the SDK's options give them (a factory: some are read from the environment). */
  headers: () => Promise<Record<string, string>>;
  compression: 'gzip' | 'none';
  /** `User-Agent`. */
  userAgent: string;
  /**
   * The TLS material for an `https` collector, as the SDK's agent would have used it: the CA and
   * client certificate and key the `OTEL_EXPORTER_OTLP_*CERTIFICATE` and `*CLIENT_KEY` files give.
   */
  tls?: () => Promise<OtlpTls>;
}

export interface OtlpTls {
  ca?: string | Buffer | Array<string | Buffer>;
  cert?: string | Buffer | Array<string | Buffer>;
  key?: string | Buffer | Array<string | Buffer>;
}

export class UndiciOtlpTransport implements IExporterTransport {
  /** Its own connections: an export never waits behind a backend's, and closing it closes only these. */
  #agent: Promise<Agent> | undefined;
  readonly #origin: string;
  readonly #path: string;

  constructor(private readonly target: OtlpHttpTarget) {
    const url = new URL(target.url);
    this.#origin = url.origin;
    this.#path = url.pathname + url.search;
  }

  async send(data: Uint8Array, timeoutMillis: number): Promise<ExportResponse> {
    // Spelled as the SDK's transport spells it, so that it replaces a `User-Agent` of the config's headers.
    const headers: Record<string, string> = { ...(await this.target.headers()), 'User-Agent': this.target.userAgent };
    let body = data;
    if (this.target.compression === 'gzip') {
      body = await gzipped(data);
      headers['content-encoding'] = 'gzip';
    }
    try {
      const answer = await exchange(await this.#agentNow(), { origin: this.#origin, path: this.#path, method: 'POST', headers, body, headersTimeout: timeoutMillis, bodyTimeout: timeoutMillis, signal: AbortSignal.timeout(timeoutMillis) });
      const read = await bytesWithin(answer.body, MAX_RESPONSE_BYTES);
      const status = answer.status;
      if (read === undefined) return { status: 'failure', error: new Error(`OTLP export answer larger than ${MAX_RESPONSE_BYTES} bytes`) };
      if (status >= 200 && status <= 299) return { status: 'success', data: read };
      if (RETRYABLE_STATUSES.has(status)) return { status: 'retryable', retryInMillis: retryAfterMillis(answer.headers['retry-after']) };
      return { status: 'failure', error: new OTLPExporterError(`OTLP export answered ${status}`, status, Buffer.from(read).toString('utf8')) };
    } catch (error) {
      return failed(error as Error);
    }
  }

  shutdown(): void {
    // Lets an export in flight end; new ones are refused.
    this.#agent?.then((agent) => agent.close()).catch(() => {});
  }

  /** The agent, made at the first export; a failure to make it is not kept (the next export tries again). */
  #agentNow(): Promise<Agent> {
    return (this.#agent ??= this.#newAgent().catch((err: unknown) => {
      this.#agent = undefined;
      throw err;
    }));
  }

  async #newAgent(): Promise<Agent> {
    if (!this.target.url.startsWith('https:') || !this.target.tls) return new Agent();
    const { ca, cert, key } = await this.target.tls();
    return new Agent({ connect: { ca, cert, key } });
  }
}

/** A request that did not get an answer: retryable when the connection failed or the attempt timed out. */
function failed(error: Error): ExportResponse {
  const code = (error as { code?: unknown }).code;
  if (error.name === 'TimeoutError') return { status: 'retryable', error: new Error('Request timed out') };
  if (typeof code === 'string' && RETRYABLE_ERRORS.has(code)) return { status: 'retryable', error };
  return { status: 'failure', error };
}

/**
 * `Retry-After` (RFC 9110 §10.2.3) in milliseconds from now: seconds, or an HTTP date; undefined
 * when absent or unreadable (then the retry policy's own backoff applies), 0 for a time past.
 */
export function retryAfterMillis(value: HeaderField): number | undefined {
  const text = headerValue(value);
  if (text === undefined || text.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
