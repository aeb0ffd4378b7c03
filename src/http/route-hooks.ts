/**
 * Adding a hook to one route from an `onRoute` hook, before or after the hooks the route
 * declares itself. Route-level hooks cost only the routes they concern; a global hook that
 * tests the URL would run on every request of the hot path.
 */
type HookList<H> = H | H[] | undefined;

export function prependHook<H>(existing: HookList<H>, hook: H): H[] {
  return existing === undefined ? [hook] : [hook, ...(Array.isArray(existing) ? existing : [existing])];
}

export function appendHook<H>(existing: HookList<H>, hook: H): H[] {
  return existing === undefined ? [hook] : [...(Array.isArray(existing) ? existing : [existing]), hook];
}
