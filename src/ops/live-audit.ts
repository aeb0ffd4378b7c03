/**
 * The audit trail as the live config has it (issue 32 §1 "What reloads"; issue 30 §2;
 * docs/operations-reload.md): a reload that changes `audit` — the sink (`none`, `stdout`,
 * `file`), its `path`, the opt-in `arguments`, the `claims` listed — opens the new sink and
 * closes the old one, with no restart. The old sink is ended only after what was already
 * written to it is flushed (a file stream's `end()`); a call that began before the reload is
 * recorded in the new sink when its answer passes, so no record is lost or written twice.
 *
 * Looked up on each use ({@link LiveAudit.current}): one generation check while the config is
 * unchanged (config/live-config.ts), a comparison of the `audit` block only after a reload.
 */
import { isDeepStrictEqual } from 'node:util';
import { configGeneration } from '../config/live-config.js';
import type { Config } from '../config/schema.js';
import { createAudit, type Audit, type AuditSinks } from './audit.js';

type TenantOf = (claims: Readonly<Record<string, unknown>>) => string | undefined;

export class LiveAudit {
  #audit: Audit | undefined;
  #settings: Config['audit'];
  #generation: number;

  /**
   * @param sinks `override`: where records go whatever `audit.sink` says (tests); `otlp`: the
   *   telemetry's log sink for `audit.sink: otlp`. Neither is closed by a reload: they outlive
   *   any one `audit` block (the telemetry flushes its own at shutdown).
   */
  constructor(
    private readonly config: Config,
    private readonly sinks: AuditSinks,
    private readonly tenantOf: TenantOf,
  ) {
    this.#audit = createAudit(config, sinks, tenantOf);
    this.#settings = config.audit;
    this.#generation = configGeneration(config);
  }

  /** The audit for the config as it is now; undefined while `audit.sink` is none. */
  get current(): Audit | undefined {
    const generation = configGeneration(this.config);
    if (generation !== this.#generation) {
      this.#generation = generation;
      if (!isDeepStrictEqual(this.config.audit, this.#settings)) this.#reopen();
    }
    return this.#audit;
  }

  #reopen(): void {
    const old = this.#audit;
    const oldSink = this.#settings.sink;
    this.#settings = this.config.audit;
    this.#audit = createAudit(this.config, this.sinks, this.tenantOf);
    if (old && !this.sinks.override && oldSink !== 'otlp') void old.close();
  }

  close(): Promise<void> {
    return this.#audit?.close() ?? Promise.resolve();
  }
}
