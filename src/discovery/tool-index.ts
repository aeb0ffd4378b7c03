/**
 * The full-text index of one tool list (issue 31 §3, docs/tool-search.md): `minisearch` over
 * each tool's name, title and description, so that `search_tools` ranks a few hundred tools
 * in memory, with no backend round trip.
 *
 * Names are split the way tool names are written (`github__create_issue`, `listS3Buckets`,
 * `jira.issue-search`), so a query's words meet a name's parts. A name's parts weigh most (2),
 * then the title (1.5), then the description (1). Query words also match as prefixes (`deploy` finds
 * `deployment`) and with small typos (fuzzy, a fifth of the word's length), and any query
 * word may match (OR): tools that match more words, rarer words and name words rank first.
 * A few English function words are dropped: "a", "the", "for" as prefixes would match
 * nearly every description and drown the words that matter.
 *
 * An index depends only on the list it was built from, so it is cached by a digest of that
 * list (`indexFor`) and shared by every user and session that sees the same tools: it is
 * rebuilt only when the list changes, never per session.
 */
import { createHash } from 'node:crypto';
import MiniSearch from 'minisearch';

type Json = Record<string, unknown>;

/** A tool as a search result carries it: what a model needs to call it. */
export interface FoundTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: unknown;
}

/** Words that carry no meaning for finding a tool. */
const STOP_WORDS = new Set(['a', 'an', 'and', 'the', 'of', 'for', 'to', 'in', 'on', 'at', 'by', 'with', 'from', 'into', 'or', 'is', 'are', 'be', 'it', 'its', 'my', 'me', 'i', 'we', 'our', 'this', 'that', 'some', 'all', 'any', 'as', 'do', 'does', 'can', 'how', 'what', 'which', 'want', 'need', 'please', 'tool']);

/** Distinct lists whose index is kept (least recently used dropped first); one per population of users with the same tools. */
const MAX_INDEXES = 64;

/** Words of a text: camelCase and digits split, then on anything not a letter or digit. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);
}

/** A word as the index keeps it: lower case, a plural's `s` taken off; stop words dropped. */
function processTerm(term: string): string | null {
  const lower = term.toLowerCase();
  if (STOP_WORDS.has(lower)) return null;
  // "issues" and "issue", "buckets" and "bucket": one word ("status", "access" stay).
  return lower.length > 3 && lower.endsWith('s') && !lower.endsWith('ss') && !lower.endsWith('us') ? lower.slice(0, -1) : lower;
}

interface Doc {
  id: number;
  name: string;
  title: string;
  description: string;
}

export class ToolIndex {
  readonly #search: MiniSearch<Doc>;
  readonly #tools: FoundTool[];

  constructor(tools: readonly Json[]) {
    this.#tools = tools.filter((t) => typeof t.name === 'string').map(found);
    this.#search = new MiniSearch<Doc>({
      fields: ['name', 'title', 'description'],
      tokenize,
      processTerm,
      searchOptions: {
        boost: { name: 2, title: 1.5, description: 1 },
        // Prefixes only for words of three letters or more: "s3" must not find every "s…".
        prefix: (term) => term.length >= 3,
        fuzzy: (term) => (term.length >= 5 ? 0.2 : false),
        combineWith: 'OR',
      },
    });
    this.#search.addAll(this.#tools.map((t, id) => ({ id, name: t.name, title: t.title ?? '', description: t.description ?? '' })));
  }

  get size(): number {
    return this.#tools.length;
  }

  /** The `limit` best tools for a query, best first; none when no word of it matches. */
  search(query: string, limit: number): FoundTool[] {
    return this.#search
      .search(query)
      .slice(0, limit)
      .map((hit) => this.#tools[hit.id as number]!);
  }
}

function found(tool: Json): FoundTool {
  return {
    name: tool.name as string,
    ...(typeof tool.title === 'string' ? { title: tool.title } : {}),
    ...(typeof tool.description === 'string' ? { description: tool.description } : {}),
    inputSchema: tool.inputSchema ?? { type: 'object' },
  };
}

/** A digest of a tool list: equal lists (same tools, same order) share one index. */
export function listDigest(tools: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(tools)).digest('base64url');
}

const indexes = new Map<string, ToolIndex>();

/** The index of a list, built once per distinct list and process (least recently used dropped beyond {@link MAX_INDEXES}). */
export function indexFor(digest: string, tools: readonly Json[]): ToolIndex {
  let index = indexes.get(digest);
  if (index) indexes.delete(digest);
  else index = new ToolIndex(tools);
  indexes.set(digest, index);
  if (indexes.size > MAX_INDEXES) indexes.delete(indexes.keys().next().value!);
  return index;
}

/** Drops the indexes of these lists (their lists were forgotten: a reload may have hidden some of their tools); one still needed is built again. */
export function forgetIndexes(digests: Iterable<string>): void {
  for (const digest of digests) indexes.delete(digest);
}
