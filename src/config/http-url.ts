/** An absolute http(s) URL, as config keys naming endpoints take them. */
import { z } from 'zod';
import { jsonHint } from './json-hints.js';

export const httpUrl = jsonHint(
  z
    .string()
    .url()
    .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL'),
  { kind: 'replace', json: { type: 'string', format: 'uri', pattern: '^[Hh][Tt][Tt][Pp][Ss]?://' } },
);
