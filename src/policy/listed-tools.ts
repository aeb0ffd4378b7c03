/**
 * The title and description of each tool as a backend last listed it through this replica
 * (issue 46 §3): the approval page shows them beside the exact arguments, so the person
 * deciding reads what the tool says it does. Kept from the `tools/list` answers the rules
 * filter anyway (rule-policy-backend.ts), bounded in count and size: a page whose tool was
 * listed only through another replica shows no description rather than waiting for one.
 */
const MAX_TOOLS = 2_000;
const MAX_TEXT = 4_096;

export interface ToolText {
  title?: string;
  description?: string;
}

export class ListedTools {
  readonly #tools = new Map<string, ToolText>();

  /** Remembers a listed tool's texts; the oldest entry goes past {@link MAX_TOOLS}. */
  seen(backend: string, entry: unknown): void {
    if (!entry || typeof entry !== 'object') return;
    const { name, title, description } = entry as Record<string, unknown>;
    if (typeof name !== 'string' || !name) return;
    const key = `${backend}\n${name}`;
    this.#tools.delete(key);
    this.#tools.set(key, { ...text('title', title), ...text('description', description) });
    if (this.#tools.size > MAX_TOOLS) this.#tools.delete(this.#tools.keys().next().value!);
  }

  /** What the tool was last listed with, or nothing. */
  of(backend: string, tool: string): ToolText {
    return this.#tools.get(`${backend}\n${tool}`) ?? {};
  }
}

function text(field: 'title' | 'description', value: unknown): ToolText {
  return typeof value === 'string' && value ? { [field]: value.slice(0, MAX_TEXT) } : {};
}
