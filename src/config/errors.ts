/** A configuration problem, always reported with the key that holds it (SPEC §3). */
export class ConfigError extends Error {
  readonly key: string;

  constructor(path: ReadonlyArray<string | number>, problem: string) {
    const key = formatKey(path);
    super(`config: ${key || '(root)'}: ${problem}`);
    this.name = 'ConfigError';
    this.key = key;
  }
}

/** `['backends', 0, 'url']` → `backends[0].url`, the way the YAML reads. */
export function formatKey(path: ReadonlyArray<string | number>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number' || /^\d+$/.test(part)) out += `[${part}]`;
    else out += out ? `.${part}` : part;
  }
  return out;
}
