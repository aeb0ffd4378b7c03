/**
 * The maps of the code stay true to it (issue 14: the README's "How a message flows" had
 * drifted from the code): every repository path that README.md, docs/*.md and the folder
 * READMEs of src/ name exists, every file name they mention is a file of the repository
 * (a folder README's file names: files of that folder), every relative link resolves, and
 * every folder of src/ has a README naming each of its files.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every file below `dir` (relative to ROOT), node_modules and dot folders left out. */
function filesBelow(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    const path = dir ? `${dir}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...filesBelow(path));
    else out.push(path);
  }
  return out;
}

const folderReadmes = readdirSync(join(ROOT, 'src'), { withFileTypes: true })
  .filter((e) => e.isDirectory() && existsSync(join(ROOT, 'src', e.name, 'README.md')))
  .map((e) => `src/${e.name}/README.md`);
const docs = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`), ...folderReadmes];
const PATH = /(?<![\w./-])((?:src|test|scripts|docs|bench|helm|deploy|openapi)\/[\w./-]*[\w/])/g;
/** A file name, maybe behind folders (`mcp/routes.ts`, `routes.ts`). */
const FILE_NAME = /(?<![\w.-])((?:[\w-]+\/)*[a-z0-9][\w-]*\.(?:ts|mjs|sh))\b/g;
const LINK = /\]\(([^)#\s]+)(?:#[^)]*)?\)/g;

/** The text without fenced blocks whose lines are examples (YAML, shell), not the map. */
function prose(text: string): string {
  return text.replace(/```(?:yaml|sh|console)\n[\s\S]*?```/g, '');
}

describe('paths named in the docs exist', () => {
  const allFiles = filesBelow('');
  for (const doc of docs) {
    test(doc, () => {
      const text = prose(readFileSync(join(ROOT, doc), 'utf8'));
      const missing: string[] = [];
      for (const [, path] of text.matchAll(PATH)) if (!existsSync(join(ROOT, path!))) missing.push(path!);
      // A bare name in a folder's README is a file of that folder; a name with folders, of the repository.
      const folder = doc.startsWith('src/') ? dirname(doc) : undefined;
      for (const [, name] of text.matchAll(FILE_NAME)) {
        const known = folder && !name!.includes('/') ? allFiles.filter((f) => f.startsWith(`${folder}/`)) : allFiles;
        if (!known.some((f) => f.endsWith(`/${name}`) || f === name)) missing.push(folder && !name!.includes('/') ? `${name} (in ${folder}/)` : name!);
      }
      for (const [, target] of text.matchAll(LINK)) {
        if (/^[a-z]+:/.test(target!)) continue;
        if (!existsSync(join(ROOT, dirname(doc), target!))) missing.push(`link ${target} (→ ${relative(ROOT, join(ROOT, dirname(doc), target!))})`);
      }
      assert.deepEqual([...new Set(missing)], [], `${doc} names what does not exist; update it to the code as it is`);
    });
  }
});

describe('each folder of src/ has a README that names every file in it', () => {
  const folders = readdirSync(join(ROOT, 'src'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  for (const folder of folders) {
    test(`src/${folder}/README.md`, () => {
      const readme = join(ROOT, 'src', folder, 'README.md');
      assert.ok(existsSync(readme), `src/${folder}/ has no README.md saying what lives there and what it may import (docs/architecture.md#layering)`);
      const text = readFileSync(readme, 'utf8');
      const unnamed = filesBelow(`src/${folder}`)
        .filter((f) => f.endsWith('.ts'))
        .map((f) => f.slice(f.lastIndexOf('/') + 1))
        .filter((name) => !text.includes(name));
      assert.deepEqual(unnamed, [], `src/${folder}/README.md does not name these files: add a line for each under "What lives here"`);
    });
  }
});
