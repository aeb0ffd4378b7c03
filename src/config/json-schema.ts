/**
 * The JSON Schema of the config file, generated from the zod schema (issue 32 §2: "not
 * written twice"). Published as schema/switchboard.schema.json (`npm run schema`) for
 * editors (`# yaml-language-server: $schema=…`) and embedded under `config` in the Helm
 * chart's values.schema.json.
 *
 * It describes the file as written, before `${VAR}` interpolation (SPEC §3): wherever the
 * loader would accept an interpolated string — a string with a pattern, format, enum or
 * length bound, a whole number (json-hints.ts), a duration — a string holding a `${VAR}`
 * is accepted too. Booleans and plain numbers are not: zod refuses the string `${VAR}`
 * yields there, so the schema does as well. Rules that span keys (most superRefine checks)
 * are left to the gateway and `switchboard validate`.
 *
 * Converter: zod-to-json-schema, because the config schema is zod v3 and `zod/v4`'s
 * `toJSONSchema` reads only v4 schemas (it fails on a v3 one). That package's last release
 * (3.25) is also its final one; moving src/config to zod v4 would let `z.toJSONSchema`
 * replace it, and the staleness test (test/scripts/config-schema.test.ts) would show any
 * difference.
 */
import { ignoreOverride, parseDef, zodToJsonSchema, type JsonSchema7Type, type Refs } from 'zod-to-json-schema';
import type { ZodTypeDef } from 'zod';
import { hintOf, PLACEHOLDER_PATTERN, type JsonObject } from './json-hints.js';
import { configSchema } from './schema.js';

/** A string that holds a `${VAR}`: what a keyed value may be before interpolation. */
const PLACEHOLDER_STRING: JsonObject = { type: 'string', pattern: PLACEHOLDER_PATTERN };

/** A whole number as a string (what `${VAR}` yields), or a `${VAR}`. */
const NUMBER_STRING: JsonObject = { type: 'string', pattern: `^\\s*\\d+\\s*$|${PLACEHOLDER_PATTERN}` };

/** Keywords a `${VAR}` string could fail before interpolation. */
const CONSTRAINED_STRING_KEYS = ['pattern', 'format', 'enum', 'maxLength'];
/** The shortest `${VAR}`, `${A}`: a smaller minLength is met by any placeholder. */
const SHORTEST_PLACEHOLDER = 4;

export function configJsonSchema(): JsonObject {
  const generated = zodToJsonSchema(configSchema, {
    target: 'jsonSchema7',
    $refStrategy: 'none',
    effectStrategy: 'input',
    pipeStrategy: 'input',
    override: (def, refs) => hinted(def, refs),
    postProcess: (json) => (json ? withPlaceholders(json as JsonObject) : json) as JsonSchema7Type | undefined,
  }) as JsonObject;
  return {
    $schema: generated.$schema,
    title: 'Switchboard configuration file',
    description: 'switchboard.yaml (SPEC §3), as written: ${VAR} references are accepted where the gateway interpolates them. Generated from src/config/schema.ts by `npm run schema`; rules spanning several keys are checked by `switchboard validate`.',
    ...Object.fromEntries(Object.entries(generated).filter(([key]) => key !== '$schema')),
  };
}

/** The JSON Schema of a marked zod definition (json-hints.ts), or ignoreOverride for the rest. */
function hinted(def: ZodTypeDef, refs: Refs): JsonSchema7Type | typeof ignoreOverride {
  const pipe = def as ZodTypeDef & { in?: { _def: ZodTypeDef }; out?: { _def: ZodTypeDef } };
  if (pipe.in && pipe.out && hintOf(pipe.in._def)?.kind === 'wholeNumber') {
    // The integer check is on the input side (wholeNumber), the bounds on the output side
    // (e.g. `.pipe(z.number().min(1))`).
    return { anyOf: [{ ...(parseDef(pipe.out._def, refs) as JsonObject), type: 'integer' }, NUMBER_STRING] } as JsonSchema7Type;
  }
  const hint = hintOf(def);
  if (!hint) return ignoreOverride;
  if (hint.kind === 'wholeNumber') return { anyOf: [{ type: 'integer' }, NUMBER_STRING] } as JsonSchema7Type;
  if (hint.kind === 'replace') return withPlaceholders(hint.json) as JsonSchema7Type;
  const inner = (def as ZodTypeDef & { schema?: { _def: ZodTypeDef } }).schema;
  const base = inner ? parseDef(inner._def, refs) : undefined;
  return { ...(base as JsonObject), ...hint.json } as JsonSchema7Type;
}

/** A constrained string also accepts a `${VAR}` (the constraint applies after interpolation). */
function withPlaceholders(json: JsonObject): JsonObject {
  if (json.type !== 'string') return json;
  const constrained = CONSTRAINED_STRING_KEYS.some((key) => key in json) || Number(json.minLength ?? 0) > SHORTEST_PLACEHOLDER;
  if (!constrained) return json;
  const { default: fallback, description, ...constraint } = json;
  return { anyOf: [constraint, PLACEHOLDER_STRING], ...(fallback !== undefined ? { default: fallback } : {}), ...(description ? { description } : {}) };
}
