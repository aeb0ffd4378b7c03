/**
 * The version `switchboard --version` prints (issue 32 §2): the package's own, read from
 * package.json at run time so that it can never drift from what npm and the image were
 * built from. The file is found relative to this module, which sits two folders below the
 * package root both as source (src/ops/version.ts) and as build output (dist/ops/version.js).
 */
import { readFileSync } from 'node:fs';

export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  if (typeof manifest.version !== 'string') throw new Error('package.json has no version');
  return manifest.version;
}
