/** An absolute http(s) URL, as config keys naming endpoints take them. */
import { z } from 'zod';

export const httpUrl = z
  .string()
  .url()
  .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL');
