/**
 * What the JSON Schema of the config file (json-schema.ts, issue 32 §2) needs to know that
 * a zod schema cannot say by itself. The JSON Schema describes the file as written, before
 * `${VAR}` interpolation (interpolate.ts), while zod checks the tree after it; a few zod
 * helpers therefore mark their schema here, and the generator reads the marks:
 *
 * - `wholeNumber`: a number that may also be written as a string of digits or a `${VAR}`
 *   (schema.ts's wholeNumber: `${VAR}` yields a string);
 * - `replace`: the JSON Schema of this node, when zod's own would mislead (durations);
 * - `extend`: keywords added to this node's JSON Schema (cross-key rules that JSON Schema
 *   can state, next to the zod rule they mirror).
 *
 * The marks sit in a WeakMap keyed by the zod definition, so the zod schemas stay plain.
 */
import type { z } from 'zod';

export type JsonObject = { [key: string]: unknown };
export type JsonHint = { kind: 'wholeNumber' } | { kind: 'replace'; json: JsonObject } | { kind: 'extend'; json: JsonObject };

/** A `${VAR}` reference somewhere in a string (interpolate.ts's syntax). */
export const PLACEHOLDER_PATTERN = '\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}';

const hints = new WeakMap<object, JsonHint>();

/** Marks `schema` for the JSON Schema generator; returns it unchanged. */
export function jsonHint<T extends z.ZodTypeAny>(schema: T, hint: JsonHint): T {
  hints.set(schema._def as object, hint);
  return schema;
}

/** The mark on a zod definition, if any. */
export function hintOf(def: unknown): JsonHint | undefined {
  return typeof def === 'object' && def !== null ? hints.get(def) : undefined;
}
