/**
 * The configuration reference cannot drift (issue 32 §4): the key table of
 * docs/configuration-reference.md is what `npm run docs` writes now from the published
 * schema and the notes; every key of the schema has a row; the notes name only keys that
 * exist and say the schema's defaults. CI fails when any of it is stale.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  DOCS_COMMAND,
  NOTES_FILE,
  REFERENCE_FILE,
  SCHEMA_SOURCE,
  generatedReference,
  loadNotes,
  noteProblems,
  referenceRows,
  schemaKeys,
  typeOf,
} from '../../scripts/config-reference.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const schema = JSON.parse(read(SCHEMA_SOURCE));

describe('the configuration reference', () => {
  test(`${REFERENCE_FILE} is what \`${DOCS_COMMAND}\` writes`, () => {
    assert.ok(read(REFERENCE_FILE) === generatedReference(), `${REFERENCE_FILE} is stale: run \`${DOCS_COMMAND}\` and commit the result`);
  });

  test(`the notes in ${NOTES_FILE} name only keys of the schema, and say their defaults`, () => {
    assert.deepEqual(noteProblems(schema, loadNotes()), []);
  });

  test('every key of the schema appears in the table', () => {
    const page = read(REFERENCE_FILE);
    const missing = schemaKeys(schema)
      .filter((k) => k.leaf)
      .map((k) => k.path)
      .filter((path) => !page.includes(`\`${path}\``) && !loadNotes().some((n) => n.keys.some((key) => path.startsWith(`${key}[]`) || path.startsWith(`${key}.`))));
    assert.deepEqual(missing, []);
  });

  test('a key added to the schema without a note gets a row of its own, from the schema alone', () => {
    const grown = structuredClone(schema);
    grown.properties.shutdown.properties.newKnob = { anyOf: [{ type: 'integer', minimum: 2 }, { type: 'string', pattern: '\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}' }], default: 7, description: 'a knob added later' };
    const row = referenceRows(grown, loadNotes()).find((r) => r.includes('`shutdown.newKnob`'));
    assert.equal(row, '| `shutdown.newKnob` | integer ≥ 2 | `7` | a knob added later |');
  });

  test('a note whose key left the schema, or whose default no longer says the schema default, is reported', () => {
    const notes = [
      { keys: ['listen.gone'], meaning: 'x' },
      { keys: ['streams.keepAlive'], default: '`20s`', meaning: 'x' },
    ];
    const problems = noteProblems(schema, notes);
    assert.equal(problems.length, 2);
    assert.match(problems[0]!, /listen\.gone is not a key/);
    assert.match(problems[1]!, /streams\.keepAlive is `15s` in the schema/);
  });

  test('types are read from the schema, without the ${VAR} alternative', () => {
    const keys = new Map(schemaKeys(schema).map((k) => [k.path, k.node]));
    assert.equal(typeOf(keys.get('streams.keepAlive')!), 'duration');
    assert.equal(typeOf(keys.get('listen.port')!), 'integer 0–65535');
    assert.equal(typeOf(keys.get('redis.mode')!), '`standalone` \\| `cluster` \\| `sentinel`');
    assert.equal(typeOf(keys.get('backends[].headers')!), 'map of string');
  });
});
