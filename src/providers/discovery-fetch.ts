/**
 * What discovery (upstream-discovery.ts) and dynamic client registration
 * (client-registration.ts) share: their options, their one error, and the SSRF-guarded
 * fetch (safe-fetch.ts) both go through — https only, public addresses only, no redirects,
 * bounded in time and size — whose refusals come back as a DiscoveryError naming the step.
 */
import { safeFetch, type SafeFetchInit } from './safe-fetch.js';

export interface DiscoveryOptions {
  /** Permit loopback hosts and `http:` for them (tests, local development). */
  allowLoopback?: boolean;
  /** Per fetch (default 10 s). */
  timeoutMs?: number;
  /** Accept AS metadata without `code_challenge_methods_supported` (default false: refuse). */
  allowMissingPkceMetadata?: boolean;
  /** Name resolution override (tests). */
  resolve?: SafeFetchInit['resolve'];
}

/** Why a backend's authorization server could not be found or used; the message names the step and URL (origin and path). */
export class DiscoveryError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DiscoveryError';
  }
}

/** One guarded fetch for the step `what`; a refusal or failure is a DiscoveryError that names it. */
export async function discoveryFetch(url: string, options: DiscoveryOptions, init: SafeFetchInit, what: string): Promise<Response> {
  try {
    return await safeFetch(url, fetchInit(options, init));
  } catch (err) {
    throw new DiscoveryError(`${what}: ${(err as Error).message}`, { cause: err });
  }
}

/** Origin and path only: a query string could carry something that is not ours to log. */
export function describeUrl(url: string | URL): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

function fetchInit(options: DiscoveryOptions, init: SafeFetchInit): SafeFetchInit {
  const out: SafeFetchInit = { ...init, allowLoopback: options.allowLoopback === true };
  if (options.timeoutMs !== undefined) out.timeoutMs = options.timeoutMs;
  if (options.resolve) out.resolve = options.resolve;
  return out;
}
