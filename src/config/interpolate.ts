/**
 * `${VAR}` interpolation (SPEC §3). It runs on the parsed YAML tree rather than on the raw
 * text so that a missing variable can be reported with the key that needs it, and so that a
 * value containing YAML syntax cannot change the structure of the document.
 * `$${X}` stays a literal `${X}`.
 */
import { ConfigError } from './errors.js';

const PLACEHOLDER = /\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

export function interpolate(node: unknown, env: NodeJS.ProcessEnv, path: string[] = []): unknown {
  if (typeof node === 'string') return interpolateString(node, env, path);
  if (Array.isArray(node)) return node.map((item, i) => interpolate(item, env, [...path, String(i)]));
  if (node && typeof node === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) out[key] = interpolate(value, env, [...path, key]);
    return out;
  }
  return node;
}

function interpolateString(text: string, env: NodeJS.ProcessEnv, path: string[]): string {
  return text.replace(PLACEHOLDER, (_whole, escaped: string, name: string) => {
    if (escaped) return `\${${name}}`;
    const value = env[name];
    if (value === undefined) {
      throw new ConfigError(path, `environment variable ${name} is not set`);
    }
    return value;
  });
}
