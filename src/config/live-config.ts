/**
 * The one `Config` object the gateway holds for its whole life, whose contents a reload
 * replaces (issue 32 §1, docs/operations-reload.md). Every module keeps reading
 * `config.<key>` where it reads it today and sees the new value on its next request; a module
 * that works something out of the config once, at start, wraps that in {@link derived} so it is
 * worked out again after a reload instead of going stale. Replacing the contents, not the
 * object, is what lets keys added later (virtual servers, policies) reload with no wiring.
 */
import type { Config } from './schema.js';

const generations = new WeakMap<object, number>();

/** How many times `config`'s contents were replaced (0: as loaded at start). */
export function configGeneration(config: Config): number {
  return generations.get(config) ?? 0;
}

/**
 * Replaces every top-level key of `target` with `next`'s (keys `next` lacks are removed), so
 * holders of `target` read the new config from now on. `next` must be validated already.
 */
export function replaceConfig(target: Config, next: Config): void {
  const t = target as Record<string, unknown>;
  for (const key of Object.keys(t)) if (!(key in next)) delete t[key];
  Object.assign(t, next);
  generations.set(target, configGeneration(target) + 1);
}

/**
 * `derive(config)`, worked out once and again only after a reload replaced the config: for
 * what a module prepares at start (per-backend requirements, metadata documents, settings).
 */
export function derived<T>(config: Config, derive: (config: Config) => T): () => T {
  let at = -1;
  let value!: T;
  return () => {
    const generation = configGeneration(config);
    if (generation !== at) {
      value = derive(config);
      at = generation;
    }
    return value;
  };
}
