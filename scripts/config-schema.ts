/**
 * The published JSON Schema of the config file (issue 32 §2), generated from the zod schema
 * by src/config/json-schema.ts into two places:
 *  - schema/switchboard.schema.json — for editors (`# yaml-language-server: $schema=…`) and
 *    in the npm package;
 *  - the `config` property of helm/switchboard/values.schema.json — embedded, not a `$ref`:
 *    Helm resolves only references inside the values schema itself (a chart is installed
 *    without this repository around it, and a remote `$ref` would make `helm install` reach
 *    the network), so the chart carries its own copy, written here and never by hand.
 *
 *   node --import tsx scripts/config-schema.ts   (npm run schema) writes both files
 *
 * test/scripts/config-schema.test.ts regenerates both in memory and fails when a committed
 * file differs, naming this command.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { configJsonSchema } from '../src/config/json-schema.js';

export const SCHEMA_COMMAND = 'npm run schema';
export const SCHEMA_FILE = 'schema/switchboard.schema.json';
export const VALUES_SCHEMA_FILE = 'helm/switchboard/values.schema.json';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** Both files as they should read now: repository path → text. */
export function generatedSchemaFiles(root = ROOT): Map<string, string> {
  const schema = configJsonSchema();
  const values = JSON.parse(readFileSync(path.join(root, VALUES_SCHEMA_FILE), 'utf8')) as { properties: Record<string, unknown> };
  const { $schema: _draft, title: _title, ...config } = schema;
  values.properties.config = {
    ...config,
    description: `The Switchboard config file (SPEC §3), rendered verbatim into the ConfigMap. Generated from the gateway's zod schema into ${SCHEMA_FILE} and here by \`${SCHEMA_COMMAND}\`; do not edit by hand. Rules spanning several keys are checked by the gateway at start (and by \`switchboard validate\`).`,
  };
  return new Map([
    [SCHEMA_FILE, `${compactJson(schema)}\n`],
    [VALUES_SCHEMA_FILE, `${compactJson(values)}\n`],
  ]);
}

const WIDTH = 110;

/** JSON with two-space indentation, where any object or array that fits on one line stays on one. */
export function compactJson(value: unknown, indent = ''): string {
  const flat = JSON.stringify(value, null, 1)?.replace(/\n\s*/g, ' ').replace(/([[{]) /g, '$1').replace(/ ([\]}])/g, '$1') ?? 'null';
  if (flat.length + indent.length <= WIDTH || value === null || typeof value !== 'object') return flat;
  const inner = `${indent}  `;
  if (Array.isArray(value)) return `[\n${value.map((v) => inner + compactJson(v, inner)).join(',\n')}\n${indent}]`;
  const entries = Object.entries(value).map(([k, v]) => `${inner}${JSON.stringify(k)}: ${compactJson(v, inner)}`);
  return `{\n${entries.join(',\n')}\n${indent}}`;
}

function main(): void {
  for (const [file, text] of generatedSchemaFiles()) {
    writeFileSync(path.join(ROOT, file), text);
    process.stdout.write(`wrote ${file}\n`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) main();
