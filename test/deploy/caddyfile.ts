/**
 * Just enough of the Caddyfile syntax to check deploy/compose/Caddyfile (issue 32 §3b):
 * lines of space-separated tokens, `#` comments, `{ … }` blocks, quoted tokens. There is no
 * container engine here, and Debian's caddy (2.6) is older than the image's (2.10; e.g. it
 * lacks `stream_close_delay`), so the file is parsed rather than adapted by a real caddy.
 */

export interface Directive {
  name: string;
  args: string[];
  children: Directive[];
}

function tokens(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)) {
    if (m[2]?.startsWith('#')) break;
    out.push(m[1] ?? m[2]!);
  }
  return out;
}

/** The file as a tree: top-level entries are the global options block (name '') and site blocks. */
export function parseCaddyfile(text: string): Directive[] {
  const root: Directive = { name: '(root)', args: [], children: [] };
  const stack = [root];
  for (const line of text.split('\n')) {
    const words = tokens(line);
    if (!words.length) continue;
    if (words.length === 1 && words[0] === '}') {
      if (stack.length === 1) throw new Error('unbalanced }');
      stack.pop();
      continue;
    }
    const opens = words.at(-1) === '{';
    const [name = '', ...args] = opens ? words.slice(0, -1) : words;
    const directive: Directive = { name, args, children: [] };
    stack.at(-1)!.children.push(directive);
    if (opens) stack.push(directive);
  }
  if (stack.length !== 1) throw new Error('unclosed {');
  return root.children;
}

/** The first directive at `path` (names, from the given level down). */
export function find(directives: Directive[], ...path: string[]): Directive | undefined {
  let level = directives;
  let found: Directive | undefined;
  for (const name of path) {
    found = level.find((d) => d.name === name);
    if (!found) return undefined;
    level = found.children;
  }
  return found;
}
