/**
 * The folder graph of `src/` (issue 14): which top-level folder imports which, drawn into
 * `docs/folder-graph.md`, and checked. No two folders may import each other and no chain of
 * imports may lead from a folder back to itself, so the layering described in
 * `docs/architecture.md` (the wire at the bottom, the wiring at the top) stays true as the
 * code grows: a folder can be read, tested and replaced with only what lies below it.
 *
 *   node --import tsx scripts/folder-graph.ts           writes docs/folder-graph.md  (npm run graph)
 *   node --import tsx scripts/folder-graph.ts --check   writes nothing; exits 1 and prints the
 *                                                       file-level imports that make a two-way
 *                                                       pair or a cycle of folders
 *   options: --src <dir> (default src), --out <file> (default docs/folder-graph.md)
 *
 * Imports are read with the TypeScript scanner (`ts.preProcessFile`), so comments and strings
 * never count, and every form does: `import … from`, `import type`, `export … from` and
 * dynamic `import()`. Only relative specifiers are followed (packages are not folders of ours).
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';

/** The node that stands for the files directly in `src/` (app.ts, server.ts, cli.ts). */
export const ROOT_FOLDER = '(root)';

/**
 * The layering of docs/architecture.md, bottom to top: a folder may import only folders
 * before it in this list. The check fails on what makes any order impossible (a two-way pair,
 * a cycle); an import against this particular order is reported beside it, so the documented
 * order and the code are seen to agree — change the list when the design changes.
 */
export const LAYERS: readonly string[] = [
  'wire', 'config', 'state', 'ops', 'auth', 'backends', 'http', 'providers', 'policy', 'pinning', 'telemetry', 'browser', 'connect',
  'exchange', 'streams', 'sessions', 'linking', 'aggregate', 'discovery', 'stateless', 'mcp', 'transport', 'broker', 'dev', 'reload', ROOT_FOLDER,
];

/** The command that regenerates the document; named in it and in the up-to-date test. */
export const GRAPH_COMMAND = 'npm run graph';

/** One relative import, paths relative to the source folder with `/` separators. */
export interface FileImport {
  from: string;
  to: string;
  /** 1-based line of the specifier in `from`. */
  line: number;
}

/** All imports from files of one folder into files of another. */
export interface FolderEdge {
  from: string;
  to: string;
  imports: FileImport[];
  /** Distinct (importing file, imported file) pairs: the number drawn on the arrow. */
  weight: number;
}

export interface FolderGraph {
  folders: string[];
  edges: FolderEdge[];
}

/** What makes `--check` fail: two-way pairs, and cycles through three or more folders. */
export interface GraphProblems {
  pairs: Array<[FolderEdge, FolderEdge]>;
  /** Strongly connected sets of folders that are more than one two-way pair. */
  cycles: Array<{ path: string[]; edges: FolderEdge[] }>;
}

/** Every `.ts` file below `srcDir`, relative to it, sorted. */
export function listSourceFiles(srcDir: string): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts')) found.push(path.relative(srcDir, full).split(path.sep).join('/'));
    }
  };
  walk(srcDir);
  return found.sort();
}

/** The top-level folder a file belongs to; files directly in `src/` are {@link ROOT_FOLDER}. */
export function folderOf(file: string): string {
  const slash = file.indexOf('/');
  return slash < 0 ? ROOT_FOLDER : file.slice(0, slash);
}

/**
 * The file a relative specifier names: NodeNext imports say `.js` for a `.ts` source. A
 * target outside `srcDir` (such as `../package.json`) yields undefined: it is no folder of ours.
 */
function resolveSpecifier(srcDir: string, from: string, specifier: string): string | undefined {
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  if (target.startsWith('../') || target === '..') return undefined;
  if (target.endsWith('.js') && existsSync(path.join(srcDir, target.slice(0, -3) + '.ts'))) return target.slice(0, -3) + '.ts';
  return target;
}

/** The relative imports of every source file below `srcDir`. */
export function readImports(srcDir: string): FileImport[] {
  const imports: FileImport[] = [];
  for (const file of listSourceFiles(srcDir)) {
    const text = readFileSync(path.join(srcDir, file), 'utf8');
    for (const ref of ts.preProcessFile(text, true, true).importedFiles) {
      if (!ref.fileName.startsWith('./') && !ref.fileName.startsWith('../')) continue;
      const to = resolveSpecifier(srcDir, file, ref.fileName);
      if (to === undefined) continue;
      const line = text.slice(0, ref.pos).split('\n').length;
      imports.push({ from: file, to, line });
    }
  }
  return imports;
}

/** Folders (every folder holding a source file) and the imports between different folders. */
export function buildFolderGraph(files: string[], imports: FileImport[]): FolderGraph {
  const folders = new Set(files.map(folderOf));
  const byPair = new Map<string, FolderEdge>();
  for (const item of imports) {
    const from = folderOf(item.from);
    const to = folderOf(item.to);
    if (from === to) continue;
    folders.add(to);
    const key = `${from}\0${to}`;
    let edge = byPair.get(key);
    if (!edge) byPair.set(key, (edge = { from, to, imports: [], weight: 0 }));
    edge.imports.push(item);
  }
  const edges = [...byPair.values()].sort((a, b) => compare(a.from, b.from) || compare(a.to, b.to));
  for (const edge of edges) {
    edge.imports.sort((a, b) => compare(a.from, b.from) || a.line - b.line);
    edge.weight = new Set(edge.imports.map((i) => `${i.from}\0${i.to}`)).size;
  }
  return { folders: [...folders].sort(compare), edges };
}

/** The graph of the source tree at `srcDir`. */
export function folderGraphOf(srcDir: string): FolderGraph {
  return buildFolderGraph(listSourceFiles(srcDir), readImports(srcDir));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function successors(graph: FolderGraph): Map<string, string[]> {
  const next = new Map<string, string[]>(graph.folders.map((f) => [f, []]));
  for (const edge of graph.edges) next.get(edge.from)!.push(edge.to);
  return next;
}

/**
 * Strongly connected components of more than one folder (Tarjan's algorithm): exactly the
 * folders that lie on a cycle. Every edge between two folders of one component lies on a
 * cycle too, so those edges are the imports to look at.
 */
export function cyclicComponents(graph: FolderGraph): string[][] {
  const next = successors(graph);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const to of next.get(node) ?? []) {
      if (!index.has(to)) visit(to);
      if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, low.get(to)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let top: string;
    do {
      top = stack.pop()!;
      onStack.delete(top);
      component.push(top);
    } while (top !== node);
    if (component.length > 1) components.push(component.sort(compare));
  };
  for (const folder of graph.folders) if (!index.has(folder)) visit(folder);
  return components.sort((a, b) => compare(a[0]!, b[0]!));
}

/** A shortest cycle through `start` inside `members` (breadth first), as a closed path. */
function cycleThrough(graph: FolderGraph, start: string, members: Set<string>): string[] {
  const next = successors(graph);
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i]!;
    for (const to of next.get(node) ?? []) {
      if (!members.has(to)) continue;
      if (to === start) {
        const pathBack = [node];
        while (pathBack[0] !== start) pathBack.unshift(cameFrom.get(pathBack[0]!)!);
        return [...pathBack, start];
      }
      if (!cameFrom.has(to)) {
        cameFrom.set(to, node);
        queue.push(to);
      }
    }
  }
  return [start];
}

/** The two-way pairs, and the cycles that are not just such a pair. */
export function findProblems(graph: FolderGraph): GraphProblems {
  const byPair = new Map(graph.edges.map((e) => [`${e.from}\0${e.to}`, e]));
  const pairs: GraphProblems['pairs'] = [];
  for (const edge of graph.edges) {
    const back = byPair.get(`${edge.to}\0${edge.from}`);
    if (back && compare(edge.from, edge.to) < 0) pairs.push([edge, back]);
  }
  const cycles: GraphProblems['cycles'] = [];
  for (const component of cyclicComponents(graph)) {
    if (component.length === 2) continue; // a two-way pair, reported above
    const members = new Set(component);
    const edges = graph.edges.filter((e) => members.has(e.from) && members.has(e.to));
    cycles.push({ path: cycleThrough(graph, component[0]!, members), edges });
  }
  return { pairs, cycles };
}

function describeEdge(edge: FolderEdge): string {
  const lines = edge.imports.map((i) => `    src/${i.from}:${i.line} → src/${i.to}`);
  return [`  ${edge.from} → ${edge.to} (${edge.weight})`, ...lines].join('\n');
}

/**
 * Imports from a folder to one above it in {@link LAYERS} (or between folders the list does
 * not name, when one of them is missing from it).
 */
export function againstLayers(graph: FolderGraph, layers: readonly string[] = LAYERS): FolderEdge[] {
  const rank = new Map(layers.map((folder, i) => [folder, i]));
  return graph.edges.filter((e) => {
    const from = rank.get(e.from);
    const to = rank.get(e.to);
    return from === undefined || to === undefined || to > from;
  });
}

/** The report `--check` prints: every offending file-level import, grouped by folder edge. */
export function formatProblems(problems: GraphProblems): string {
  const out: string[] = [];
  for (const [there, back] of problems.pairs) {
    out.push(`two-way pair: ${there.from} ⇄ ${there.to}`, describeEdge(there), describeEdge(back));
  }
  for (const cycle of problems.cycles) {
    out.push(`cycle: ${cycle.path.join(' → ')} (every import below lies on a cycle of folders)`);
    for (const edge of cycle.edges) out.push(describeEdge(edge));
  }
  return out.join('\n');
}

/**
 * Each folder's level: 0 for a folder that imports no other, else one more than the highest
 * level it imports. Undefined when there is a cycle (there is no bottom to count from).
 */
export function levels(graph: FolderGraph): Map<string, number> | undefined {
  if (cyclicComponents(graph).length > 0) return undefined;
  const next = successors(graph);
  const level = new Map<string, number>();
  const of = (folder: string): number => {
    const known = level.get(folder);
    if (known !== undefined) return known;
    const value = Math.max(-1, ...(next.get(folder) ?? []).map(of)) + 1;
    level.set(folder, value);
    return value;
  };
  for (const folder of graph.folders) of(folder);
  return level;
}

function mermaidId(folder: string): string {
  return folder === ROOT_FOLDER ? 'root' : folder.replace(/[^A-Za-z0-9]/g, '_');
}

function mermaid(graph: FolderGraph): string[] {
  const lines = ['```mermaid', 'graph TD'];
  for (const folder of graph.folders) lines.push(`  ${mermaidId(folder)}["${folder}"]`);
  for (const edge of graph.edges) lines.push(`  ${mermaidId(edge.from)} -->|${edge.weight}| ${mermaidId(edge.to)}`);
  lines.push('```');
  return lines;
}

function folderTable(graph: FolderGraph, level: Map<string, number> | undefined): string[] {
  const list = (edges: FolderEdge[], end: 'from' | 'to'): string =>
    edges.map((e) => `\`${e[end]}\` (${e.weight})`).join(', ') || '—';
  const unlisted = graph.folders.filter((f) => !LAYERS.includes(f));
  const order = [...LAYERS.filter((f) => graph.folders.includes(f)), ...unlisted];
  const rows = order.map((folder) => {
    const imports = list(graph.edges.filter((e) => e.from === folder), 'to');
    const importedBy = list(graph.edges.filter((e) => e.to === folder), 'from');
    return `| \`${folder}\` | ${level ? level.get(folder) : '—'} | ${imports} | ${importedBy} |`;
  });
  return ['| folder (documented order, bottom first) | level | imports | imported by |', '|---|---|---|---|', ...rows];
}

function layerLines(graph: FolderGraph): string[] {
  const against = againstLayers(graph);
  if (against.length === 0) return ['Every import follows the documented order (`LAYERS` in `scripts/folder-graph.ts`).'];
  return [
    'Imports against the documented order (`LAYERS` in `scripts/folder-graph.ts`; reported, not failed on):',
    '',
    '```',
    ...against.map(describeEdge),
    '```',
  ];
}

function problemLines(problems: GraphProblems): string[] {
  if (problems.pairs.length === 0 && problems.cycles.length === 0) return ['No two folders import each other and there is no cycle of folders.'];
  return [
    '**The layering is broken** (`npm run check:shape` fails). The imports to remove:',
    '',
    '```',
    formatProblems(problems),
    '```',
  ];
}

/** The whole of docs/folder-graph.md, a pure function of the graph (so a test can compare). */
export function renderMarkdown(graph: FolderGraph): string {
  const problems = findProblems(graph);
  const lines = [
    '# Folder graph of `src/`',
    '',
    `Generated by \`${GRAPH_COMMAND}\` (\`scripts/folder-graph.ts\`) from the relative imports of`,
    '`src/**/*.ts` (`import`, `import type`, `export … from`, `import()`); do not edit it by hand —',
    'a test fails when it no longer matches the code. An arrow `a → b` means files in `a/` import',
    'files in `b/`; its number counts distinct (importing file, imported file) pairs. `(root)` is',
    'the files directly in `src/`. Level 0 imports no other folder; every other folder is one',
    'level above the highest it imports. The table lists the folders in the documented order. Why:',
    '[architecture.md](architecture.md#layering).',
    '',
    ...problemLines(problems),
    '',
    ...layerLines(graph),
    '',
    ...mermaid(graph),
    '',
    ...folderTable(graph, levels(graph)),
    '',
  ];
  return lines.join('\n');
}

function option(args: string[], name: string, fallback: string): string {
  const at = args.indexOf(name);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1]! : fallback;
}

/** The command line: write the document, or with `--check` judge the tree. Returns the exit code. */
export function main(args: string[]): number {
  const srcDir = path.resolve(option(args, '--src', 'src'));
  const out = path.resolve(option(args, '--out', path.join('docs', 'folder-graph.md')));
  const graph = folderGraphOf(srcDir);
  if (!args.includes('--check')) {
    writeFileSync(out, renderMarkdown(graph));
    console.log(`wrote ${path.relative(process.cwd(), out)}: ${graph.folders.length} folders, ${graph.edges.length} edges`);
    return 0;
  }
  const problems = findProblems(graph);
  const against = againstLayers(graph);
  if (against.length > 0) console.log(`note: imports against the documented order (LAYERS):\n${against.map(describeEdge).join('\n')}`);
  if (problems.pairs.length === 0 && problems.cycles.length === 0) {
    console.log(`folder graph: ${graph.folders.length} folders, ${graph.edges.length} edges, no two-way pair, no cycle`);
    return 0;
  }
  console.error(formatProblems(problems));
  console.error(`folder graph: ${problems.pairs.length} two-way pair(s), ${problems.cycles.length} longer cycle(s)`);
  return 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
