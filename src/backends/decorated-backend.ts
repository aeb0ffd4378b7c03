/**
 * A backend put in front of another to act on its POSTs only (the tool lists and the CEL
 * rules, src/policy/): GET, DELETE and closing go straight to the backend inside, and the
 * name and config are its own, so a decorated backend is the same backend to every path.
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from './backend.js';
import type { BackendConfig } from '../config/schema.js';

export abstract class DecoratedBackend implements McpBackend {
  readonly name: string;
  readonly config: BackendConfig;

  constructor(protected readonly inner: McpBackend) {
    this.name = inner.name;
    this.config = inner.config;
  }

  abstract post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse>;

  get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.inner.get(headers, signal);
  }

  delete(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.inner.delete(headers, signal);
  }

  close(graceMs?: number): Promise<void> {
    return this.inner.close(graceMs);
  }
}
