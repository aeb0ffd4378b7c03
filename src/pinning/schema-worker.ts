/**
 * The worker thread of schema-check.ts: a call's arguments checked against a pinned
 * `inputSchema`, away from the event loop (issue 41 §4). Loaded only as a worker's entry.
 *
 * Each schema gets an ajv instance of its own, so two schemas with the same `$id` never meet
 * in one registry (a shared instance answered the second with the first's validator). Patterns
 * run on RE2 (linear-regexp.ts). `uniqueItems` is checked by hashing each item's canonical JSON
 * (ajv compares every pair: quadratic in a user's array). `format` is an annotation, as in
 * JSON Schema 2020-12 (Validation §7.2.1): the format validators' own regular expressions stay
 * out of it. Whatever else a schema can make expensive (nested `anyOf` over deep input is
 * exponential) is bounded by schema-check.ts's deadline, which ends this thread.
 *
 * Messages in: `{ seq, key, schema, input }`; out: `{ ready: true }` once, then
 * `{ seq, problem? }` per check (no `problem`: the input is valid).
 */
import { parentPort } from 'node:worker_threads';
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { linearRegExp } from './linear-regexp.js';

export interface CheckJob {
  seq: number;
  /** The schema's identity on the main thread: compiled once per key. */
  key: number;
  schema: object;
  input: unknown;
}

export interface CheckAnswer {
  seq: number;
  /** Why the input fails the schema, or why the schema cannot be checked; absent when valid. */
  problem?: string;
}

/** Compiled schemas kept (oldest dropped first); a pinned backend has a few dozen tools. */
const KEEP = 256;

type Compiled = { validate: ValidateFunction; errorsText: (v: ValidateFunction) => string } | { problem: string };

const compiled = new Map<number, Compiled>();

const OPTIONS: Options = {
  strict: false,
  validateSchema: false,
  validateFormats: false,
  allErrors: false,
  logger: false,
  code: { regExp: linearRegExp },
};

/** One ajv per schema; the 2020-12 dialect where the schema names it, else draft-07 (as the MCP SDK's validator). */
function compile(schema: object): Compiled {
  const dialect = (schema as { $schema?: unknown }).$schema;
  const ajv = typeof dialect === 'string' && dialect.includes('2020-12') ? new Ajv2020(OPTIONS) : new Ajv(OPTIONS);
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword({ keyword: 'uniqueItems', type: 'array', schemaType: 'boolean', errors: false, validate: (unique: boolean, data: unknown[]) => !unique || distinct(data) });
  try {
    return { validate: ajv.compile(schema), errorsText: (v) => ajv.errorsText(v.errors) };
  } catch (err) {
    return { problem: `its pinned inputSchema cannot be checked: ${(err as Error).message}` };
  }
}

export function check(job: CheckJob): CheckAnswer {
  let entry = compiled.get(job.key);
  if (!entry) {
    entry = compile(job.schema);
    compiled.set(job.key, entry);
    if (compiled.size > KEEP) compiled.delete(compiled.keys().next().value!);
  }
  if ('problem' in entry) return { seq: job.seq, problem: entry.problem };
  return entry.validate(job.input) ? { seq: job.seq } : { seq: job.seq, problem: entry.errorsText(entry.validate) };
}

/** Whether no two items are equal as JSON values (key order aside): one canonical text per item, in a Set. */
export function distinct(items: unknown[]): boolean {
  const seen = new Set<string>();
  for (const item of items) {
    const text = canonical(item);
    if (seen.has(text)) return false;
    seen.add(text);
  }
  return true;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

if (parentPort) {
  const port = parentPort;
  port.on('message', (job: CheckJob) => {
    let answer: CheckAnswer;
    try {
      answer = check(job);
    } catch (err) {
      answer = { seq: job.seq, problem: `its pinned inputSchema could not be checked: ${(err as Error).message}` };
    }
    port.postMessage(answer);
  });
  port.postMessage({ ready: true });
}
