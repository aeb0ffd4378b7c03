/**
 * pino options for the whole gateway (SPEC §6): JSON lines, a request id on each, and
 * credentials redacted wherever they could appear. Logging at a disabled level costs a
 * level check and nothing else.
 */
import type { LoggerOptions } from 'pino';

export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["set-cookie"]',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  '*.authorization',
  '*.accessToken',
  '*.refreshToken',
  '*.access_token',
  '*.refresh_token',
  '*.id_token',
  '*.token',
  '*.clientSecret',
  '*.client_secret',
  '*.password',
];

/**
 * Query values are never logged: a token wrongly sent as `?access_token=` (we refuse it)
 * must not end up in the logs either.
 */
export function redactQuery(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const keys = url
    .slice(q + 1)
    .split('&')
    .map((pair) => pair.split('=')[0])
    .filter(Boolean);
  return `${url.slice(0, q)}?${keys.map((k) => `${k}=[redacted]`).join('&')}`;
}

interface LoggedRequest {
  method: string;
  url: string;
  ip?: string;
  id?: string;
}

export function loggerOptions(level: string): LoggerOptions {
  return {
    ...accessLoggerOptions(level),
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    serializers: {
      // Fastify's default also logs the URL as received; we keep the same fields minus query values.
      req: (req: LoggedRequest) => ({ method: req.method, url: redactQuery(req.url), remoteAddress: req.ip }),
    },
  };
}

/**
 * The access log's own pino options (ops/access-log.ts): the same line shape, without the
 * redaction paths. Redaction walks every logged object for the paths above — on the access
 * line, once per request, the largest part of its cost — and the access line carries only
 * fields the gateway builds itself (URL with query values already redacted, ids, status,
 * `sub`), never headers, bodies or tokens.
 */
export function accessLoggerOptions(level: string): LoggerOptions {
  return {
    level,
    base: { service: 'switchboard' },
    timestamp: () => `,"time":"${new Date().toISOString()}"`,
  };
}
