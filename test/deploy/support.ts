/**
 * Small, dependency-free readers for the deploy artifacts (Dockerfile, .dockerignore,
 * compose interpolation, Helm values coalescing and template actions), used by the
 * test/deploy/*.test.ts suites. There is no Docker engine or helm binary on the build
 * machine, so these implement just enough of each tool's documented rules to check the
 * files for real instead of by eye.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function readRepoFile(path: string): string {
  return readFileSync(new URL(path, new URL('../../', import.meta.url)), 'utf8');
}

// ---------------------------------------------------------------------------------------
// Dockerfile
// ---------------------------------------------------------------------------------------

export interface Instruction {
  /** Upper-case keyword, e.g. `RUN`. */
  keyword: string;
  /** Everything after the keyword, continuation lines joined with a space. */
  args: string;
  line: number;
}

export interface Stage {
  /** The FROM arguments after ARG substitution, e.g. `node:22-trixie-slim`. */
  image: string;
  /** `--platform=…` of the FROM line, if any (unsubstituted). */
  platform?: string;
  name?: string;
  instructions: Instruction[];
}

export interface Dockerfile {
  /** ARGs declared before the first FROM, with their defaults. */
  globalArgs: Map<string, string>;
  stages: Stage[];
}

/** Parses a Dockerfile: comments, parser directives, `\` continuations, stages. */
export function parseDockerfile(text: string): Dockerfile {
  const instructions: Instruction[] = [];
  const lines = text.split('\n');
  let pending = '';
  let start = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    if (pending === '' && (trimmed === '' || trimmed.startsWith('#'))) continue;
    // A comment line inside a continued instruction is dropped too (Docker does the same).
    if (pending !== '' && trimmed.startsWith('#')) continue;
    if (pending === '') start = i + 1;
    if (trimmed.endsWith('\\')) {
      pending += `${trimmed.slice(0, -1).trim()} `;
      continue;
    }
    const whole = (pending + trimmed).trim();
    pending = '';
    const match = /^(\S+)\s*(.*)$/s.exec(whole);
    if (!match) continue;
    instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2]!.trim(), line: start });
  }

  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const parts = ins.args.split(/\s+/);
      let platform: string | undefined;
      while (parts[0]?.startsWith('--')) {
        const flag = parts.shift()!;
        if (flag.startsWith('--platform=')) platform = flag.slice('--platform='.length);
      }
      const image = substitute(parts[0] ?? '', globalArgs);
      const name = parts[1]?.toUpperCase() === 'AS' ? parts[2] : undefined;
      stages.push({ image, platform, name, instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) {
      if (ins.keyword === 'ARG') {
        const [key, ...value] = ins.args.split('=');
        globalArgs.set(key!.trim(), value.join('=').trim());
      }
      continue;
    }
    stage.instructions.push(ins);
  }
  return { globalArgs, stages };
}

function substitute(text: string, args: Map<string, string>): string {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_m, a: string, b: string) => args.get(a ?? b) ?? '');
}

/** The JSON array of an exec-form instruction, or undefined for shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  try {
    const value: unknown = JSON.parse(args);
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : undefined;
  } catch {
    return undefined;
  }
}

export interface CopyInstruction {
  from?: string;
  chown?: string;
  sources: string[];
  destination: string;
}

export function parseCopy(args: string): CopyInstruction {
  const parts = args.split(/\s+/);
  const copy: CopyInstruction = { sources: [], destination: '' };
  while (parts[0]?.startsWith('--')) {
    const flag = parts.shift()!;
    if (flag.startsWith('--from=')) copy.from = flag.slice('--from='.length);
    if (flag.startsWith('--chown=')) copy.chown = flag.slice('--chown='.length);
  }
  copy.destination = parts.pop() ?? '';
  copy.sources = parts;
  return copy;
}

// ---------------------------------------------------------------------------------------
// .dockerignore (Docker's rules: patterns are relative to the context root, Go
// filepath.Match syntax plus `**`, a leading `!` re-includes, the last match wins; a
// directory that is excluded excludes everything below it.)
// ---------------------------------------------------------------------------------------

export function dockerignoreMatcher(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = (negate ? l.slice(1) : l).trim().replace(/^\/+/, '').replace(/\/+$/, '');
      return { negate, regex: globToRegExp(pattern) };
    });
  return (path: string) => {
    const segments = path.replace(/^\.\//, '').replace(/\/+$/, '').split('/');
    // The path itself and each parent directory (moby/patternmatcher MatchesOrParentMatches).
    const candidates = segments.map((_, i) => segments.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const rule of rules) {
      if (candidates.some((c) => rule.regex.test(c))) excluded = !rule.negate;
    }
    return excluded;
  };
}

function globToRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        i++;
        if (pattern[i + 1] === '/') {
          i++;
          re += '(?:.*/)?';
        } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if ('.+^$(){}|[]\\'.includes(c)) re += `\\${c}`;
    else re += c;
  }
  return new RegExp(`^${re}$`);
}

// ---------------------------------------------------------------------------------------
// docker compose interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, $$ → $
// ---------------------------------------------------------------------------------------

export interface ComposeVariable {
  name: string;
  /** The default after `:-` or `-`, if any. */
  fallback?: string;
}

const COMPOSE_VAR = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g;

/** Every variable compose would substitute in `text` (escaped `$$` skipped). */
export function composeVariables(text: string): ComposeVariable[] {
  const found: ComposeVariable[] = [];
  for (const m of text.matchAll(COMPOSE_VAR)) {
    if (m[0] === '$$') continue;
    const name = m[1] ?? m[4]!;
    found.push(m[2] ? { name, fallback: m[3] ?? '' } : { name });
  }
  return found;
}

/** Substitutes like compose with the given shell environment. */
export function composeInterpolate(text: string, env: Record<string, string | undefined>): string {
  return text.replace(COMPOSE_VAR, (whole, braced: string | undefined, op: string | undefined, fallback: string | undefined, bare: string | undefined) => {
    if (whole === '$$') return '$';
    const name = braced ?? bare!;
    const value = env[name];
    if (op === ':-') return value === undefined || value === '' ? (fallback ?? '') : value;
    if (op === '-') return value === undefined ? (fallback ?? '') : value;
    return value ?? '';
  });
}

// ---------------------------------------------------------------------------------------
// Helm
// ---------------------------------------------------------------------------------------

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isMap(value: unknown): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Helm's merge of user values over chart defaults: maps merge key by key, anything else
 * (lists included) is replaced, and a user `null` deletes the key.
 */
export function coalesceValues(defaults: Json, overrides: Json): Json {
  if (!isMap(defaults) || !isMap(overrides)) return overrides === undefined ? defaults : overrides;
  const out: Record<string, Json> = { ...defaults };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === null) delete out[key];
    else if (isMap(value) && isMap(out[key])) out[key] = coalesceValues(out[key]!, value);
    else out[key] = value;
  }
  return out;
}

export interface TemplateAction {
  /** The action's text without delimiters, trim markers and surrounding space. */
  body: string;
  /** Offset of `{{`. */
  offset: number;
  /** Offset just after `}}`. */
  end: number;
}

/** Splits a Go template into its `{{ … }}` actions (comments included). */
export function templateActions(text: string): TemplateAction[] {
  const actions: TemplateAction[] = [];
  let at = 0;
  for (;;) {
    const open = text.indexOf('{{', at);
    if (open === -1) break;
    let close: number;
    if (/^\{\{-?\s*\/\*/.test(text.slice(open, open + 8))) {
      // A comment ends at `*/}}` or `*/ -}}`, whatever it contains.
      const end = /\*\/\s*-?\}\}/.exec(text.slice(open));
      if (!end) throw new Error(`unterminated comment at offset ${open}`);
      close = open + end.index + end[0].length - 2;
    } else {
      close = text.indexOf('}}', open + 2);
      if (close === -1) throw new Error(`unterminated action at offset ${open}`);
    }
    const inner = text.slice(open + 2, close).replace(/^-\s/, ' ').replace(/\s-$/, ' ').trim();
    actions.push({ body: inner, offset: open, end: close + 2 });
    at = close + 2;
  }
  return actions;
}

const OPENERS = new Set(['if', 'range', 'with', 'define', 'block']);

/** Checks that if/range/with/define/block … end nest properly; returns problems found. */
export function blockProblems(text: string): string[] {
  const problems: string[] = [];
  const stack: string[] = [];
  for (const action of templateActions(text)) {
    if (action.body.startsWith('/*')) continue;
    const word = /^([a-z]+)\b/.exec(action.body)?.[1];
    if (!word) continue;
    if (OPENERS.has(word)) stack.push(`${word} @${action.offset}`);
    else if (word === 'else' && stack.length === 0) problems.push(`else without a block @${action.offset}`);
    else if (word === 'end' && stack.pop() === undefined) problems.push(`end without a block @${action.offset}`);
  }
  for (const open of stack) problems.push(`unclosed ${open}`);
  return problems;
}

/** Every `.Values.a.b.c` path the template refers to (also `$.Values…`). */
export function valuesPaths(text: string): string[][] {
  const paths: string[][] = [];
  for (const action of templateActions(text)) {
    if (action.body.startsWith('/*')) continue;
    for (const m of action.body.matchAll(/\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) paths.push(m[1]!.slice(1).split('.'));
  }
  return paths;
}

/** Whether `path` exists in `values` (a key present with a null value counts). */
export function hasPath(values: unknown, path: readonly string[]): boolean {
  let node: unknown = values;
  for (const key of path) {
    if (!isMap(node) || !Object.prototype.hasOwnProperty.call(node, key)) return false;
    node = node[key];
  }
  return true;
}

/** The template text with every action removed (what is left is the literal YAML skeleton). */
export function withoutActions(text: string): string {
  let out = '';
  let at = 0;
  for (const action of templateActions(text)) {
    out += text.slice(at, action.offset);
    at = action.end;
  }
  return out + text.slice(at);
}

/** Compose interpolates the parsed document's values (comments are gone by then). */
export function composeInterpolateTree(node: unknown, env: Record<string, string | undefined>): unknown {
  if (typeof node === 'string') return composeInterpolate(node, env);
  if (Array.isArray(node)) return node.map((n) => composeInterpolateTree(n, env));
  if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, composeInterpolateTree(v, env)]));
  return node;
}

/** Every variable compose would substitute in the parsed document's values. */
export function composeVariablesInTree(node: unknown): ComposeVariable[] {
  if (typeof node === 'string') return composeVariables(node);
  if (Array.isArray(node)) return node.flatMap(composeVariablesInTree);
  if (node && typeof node === 'object') return Object.values(node).flatMap(composeVariablesInTree);
  return [];
}

// ---------------------------------------------------------------------------------------
// helm
// ---------------------------------------------------------------------------------------

/**
 * A helm binary: HELM_BIN, the one scripts/fetch-helm.sh unpacks (CI runs it), or `helm`
 * on PATH. CI requires it (SB_REQUIRE_HELM=1) so the rendered checks cannot be skipped there.
 */
export function helmBinary(): string | undefined {
  const candidates = [process.env.HELM_BIN, join(ROOT, '.cache/helm/helm'), 'helm'].filter((c): c is string => Boolean(c));
  for (const candidate of candidates) {
    try {
      execFileSync(candidate, ['version', '--short'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // not there
    }
  }
  return undefined;
}
