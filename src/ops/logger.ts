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

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    base: { service: 'switchboard' },
    timestamp: () => `,"time":"${new Date().toISOString()}"`,
  };
}
