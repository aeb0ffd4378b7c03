/**
 * The regular expressions of a pinned `inputSchema` (`pattern`, `patternProperties`), run on
 * RE2 (re2js, pure JavaScript, no native build): matching takes time linear in the input
 * whatever the pattern, so `"^(a+)+$"` against `"aaaa…!"` costs what any pattern costs
 * (issue 41 §4; a backtracking engine needs 2^n steps for it). ajv's `code.regExp` option
 * (ajv "Options", `code.regExp`) puts it under every pattern ajv compiles.
 *
 * JSON Schema patterns are ECMA-262 with the `u` flag (JSON Schema 2020-12 Validation §6.3.3,
 * Core §6.4). A pattern is first compiled by V8 (parsing only, nothing is matched): one that is
 * not ECMA-262 is refused as the backtracking validator would refuse it. It is then translated
 * to RE2 syntax (`\uXXXX`, `\u{…}`, `(?<name>…)`, `\cX`) and compiled; what RE2 cannot run in
 * linear time — backreferences (`\1`, `\k<name>`), lookahead, lookbehind — is refused with
 * {@link UnsupportedPatternError}, never handed to a backtracking engine. RE2 differs from
 * ECMA-262 in small corners that do not change what a schema is for: `\s` is ASCII whitespace,
 * `.` also matches `\r`, `\u2028` and `\u2029`.
 */
import { RE2JS } from 're2js';

/** A pattern of a backend's schema that the gateway will not run: the schema cannot be checked. */
export class UnsupportedPatternError extends Error {}

/** What ajv needs of a compiled pattern; `toString` keys ajv's cache of patterns. */
export interface LinearRegExp {
  test(input: string): boolean;
  toString(): string;
}

const BACKSLASH = 0x5c;
const K = 0x6b;

/** ajv's `code.regExp` engine: `pattern` compiled for linear-time matching, or {@link UnsupportedPatternError}. */
export function linearRegExp(pattern: string, flags: string): LinearRegExp {
  const quoted = JSON.stringify(pattern.length > 200 ? `${pattern.slice(0, 200)}…` : pattern);
  try {
    new RegExp(pattern, flags);
  } catch {
    throw new UnsupportedPatternError(`pattern ${quoted} is not a valid ECMA-262 regular expression`);
  }
  if (hasNamedBackreference(pattern)) throw new UnsupportedPatternError(`pattern ${quoted} uses a backreference, which has no linear-time match`);
  let re: RE2JS;
  try {
    re = RE2JS.compile(RE2JS.translateRegExp(pattern));
  } catch (err) {
    throw new UnsupportedPatternError(`pattern ${quoted} is not supported by the gateway's linear-time engine (RE2: no backreferences, lookahead or lookbehind, repeats up to 1000): ${(err as Error).message}`);
  }
  return { test: (input) => re.test(input), toString: () => pattern };
}
/** Named in code ajv generates for standalone use only; the gateway never uses that. */
linearRegExp.code = 'linearRegExp';

/**
 * Whether the pattern has an escaped `k` (`\k<name>`): valid ECMA-262 with the `u` flag only
 * as a named backreference, which the translation to RE2 would otherwise turn into a literal.
 * One pass, escapes read pairwise.
 */
function hasNamedBackreference(pattern: string): boolean {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern.charCodeAt(i) !== BACKSLASH) continue;
    if (pattern.charCodeAt(i + 1) === K) return true;
    i++;
  }
  return false;
}
