/**
 * Whether any of the test files given drives a browser (issue 43): follows their relative
 * imports through test/ and looks for the helpers that open one (test/helpers/browser.ts
 * `launchBrowser`, test/helpers/conformance-client.ts `launchSharedBrowser`). scripts/run-tests.sh
 * starts the run's shared Chromium only then: a launch costs about 3 s of CPU, for nothing
 * when a developer runs a folder without browser tests.
 *
 * Usage: node scripts/uses-browser.mjs <file.ts>...  → exit 0 (a browser is needed) or 1.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** A call, not the helper's own definition. */
const OPENS_A_BROWSER = /(?<!function\s+)\blaunch(Shared)?Browser\(/;
const RELATIVE_IMPORT = /(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** The `.ts` a relative specifier names (`./x.js` is written for `./x.ts`), if it exists. */
function sourceOf(from, specifier) {
  const path = resolve(dirname(from), specifier).replace(/\.m?js$/, '.ts');
  return existsSync(path) ? path : undefined;
}

export function usesBrowser(files) {
  const seen = new Set();
  const queue = files.map((file) => resolve(file));
  while (queue.length) {
    const file = queue.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    if (OPENS_A_BROWSER.test(text)) return true;
    for (const [, specifier] of text.matchAll(RELATIVE_IMPORT)) {
      const next = sourceOf(file, specifier);
      if (next && next.includes(`${join('/', 'test', '')}`)) queue.push(next);
    }
  }
  return false;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(usesBrowser(process.argv.slice(2)) ? 0 : 1);
