/**
 * The link check of the docs (issue 32 §4: "a link check in CI: no broken relative link or
 * anchor"). Every relative Markdown link in README.md, docs/**\/*.md and the folder READMEs
 * of src/ and bench/ must name a file that exists and, with `#anchor`, a heading of that file
 * (GitHub's slug: lower case, punctuation dropped, spaces → `-`, repeats `-1`, `-2`) or an
 * explicit `<a id="…">`. Links inside fenced code blocks are examples, not links.
 *
 *   node --import tsx scripts/check-links.ts    prints every broken link, exits 1 if any
 *
 * test/scripts/doc-links.test.ts runs the same check in `npm test`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The Markdown files whose links are checked, relative to the repository root. */
export function documentedFiles(root = ROOT): string[] {
  const below = (dir: string): string[] =>
    readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? below(`${dir}/${e.name}`) : e.name.endsWith('.md') ? [`${dir}/${e.name}`] : [],
    );
  const folderReadmes = ['src', 'bench'].flatMap((top) => [
    `${top}/README.md`,
    ...readdirSync(path.join(root, top), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => `${top}/${e.name}/README.md`),
  ]);
  return ['README.md', ...below('docs'), ...folderReadmes].filter((f) => existsSync(path.join(root, f)));
}

/** The text outside fenced code blocks, line for line (fenced lines become empty). */
export function withoutFences(text: string): string {
  let fence: string | undefined;
  return text
    .split('\n')
    .map((line) => {
      const open = /^\s*(`{3,}|~{3,})/.exec(line);
      if (open && (!fence || open[1]!.startsWith(fence))) {
        fence = fence ? undefined : open[1]!;
        return '';
      }
      return fence ? '' : line;
    })
    .join('\n');
}

/** GitHub's anchor for a heading text (github-slugger's rule). */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown text offers: heading slugs (repeats numbered) and `<a id>`/`<a name>`. */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of withoutFences(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const [, id] of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id!);
  return anchors;
}

const LINK = /\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g;

/** The broken links of one file, as `file: target (why)`. */
export function brokenLinks(file: string, root = ROOT): string[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  const problems: string[] = [];
  for (const [, target] of withoutFences(text).matchAll(LINK)) {
    if (!target || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
    const resolved = pathPart ? path.join(path.dirname(path.join(root, file)), decodeURIComponent(pathPart)) : path.join(root, file);
    if (!existsSync(resolved)) {
      problems.push(`${file}: ${target} (no file ${path.relative(root, resolved)})`);
      continue;
    }
    if (anchor === undefined || anchor === '' || anchor === 'top') continue;
    if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
      problems.push(`${file}: ${target} (an anchor into a file that is not Markdown)`);
    } else if (!anchorsOf(readFileSync(resolved, 'utf8')).has(anchor)) {
      problems.push(`${file}: ${target} (no heading or <a id> "${anchor}" in ${path.relative(root, resolved)})`);
    }
  }
  return problems;
}

function main(): void {
  const problems = documentedFiles().flatMap((f) => brokenLinks(f));
  for (const p of problems) process.stdout.write(`${p}\n`);
  process.stdout.write(problems.length ? `${problems.length} broken link(s)\n` : 'all links resolve\n');
  process.exitCode = problems.length ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) main();
