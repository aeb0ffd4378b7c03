/**
 * YAML parsing, with the `yaml` package loaded on first use rather than at every start (issue
 * 43): it is some 85 modules, about 60 ms of CPU to load, and most processes that import the
 * gateway never parse YAML — a config given as an object (tests, embedders), the embedded
 * default, a gateway whose OpenAPI document is never asked for. A config file or
 * `GET /openapi.json` loads it once, synchronously (the package is CommonJS).
 */
import { createRequire } from 'node:module';

type YamlParse = (text: string) => unknown;

let parse: YamlParse | undefined;

/** `yaml`'s `parse` (YAML 1.2, one document). */
export function parseYaml(text: string): unknown {
  parse ??= (createRequire(import.meta.url)('yaml') as { parse: YamlParse }).parse;
  return parse(text);
}
