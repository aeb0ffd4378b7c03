/**
 * Durations in the config file are written the way operators write them ("24h", "60s",
 * "500ms", "1d"); a bare number (or a string of one, as `${VAR}` yields) means seconds. Everything inside the gateway is
 * milliseconds, converted once here.
 */
import type { z } from 'zod';
import { PLACEHOLDER_PATTERN } from './json-hints.js';

/**
 * The config's duration type as a schema factory (schema.ts builds it): a block's schema that
 * has durations takes it as an argument, because it cannot import schema.ts without a cycle.
 */
export type DurationSchema = (fallback: string) => z.ZodType<number, z.ZodTypeDef, string | number | undefined>;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/;

/**
 * What a duration may be in the file as written (config/json-schema.ts): a number of
 * seconds, a string parseDuration reads (it trims), or one holding a `${VAR}`.
 */
export const DURATION_JSON_SCHEMA = {
  anyOf: [
    { type: 'number', minimum: 0 },
    { type: 'string', pattern: `^\\s*${DURATION.source.slice(1, -1)}\\s*$|${PLACEHOLDER_PATTERN}` },
  ],
  description: 'a duration: 500ms, 30s, 5m, 24h, 7d; a bare number means seconds',
};

/**
 * Parses "90s" / "24h" / 30 (seconds) into whole milliseconds; returns undefined when
 * malformed. Whole, for a bare number too (`timeout: 0.0125`): durations become TTLs in
 * Redis, which takes no fractions (issue 45 §2).
 */
export function parseDuration(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? Math.round(value * 1_000) : undefined;
  const match = DURATION.exec(value.trim());
  if (!match) return undefined;
  return Math.round(Number(match[1]) * UNIT_MS[match[2] ?? 's']!);
}
