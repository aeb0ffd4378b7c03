/**
 * oidc-provider's storage adapter on the gateway's state store (SPEC §5: all state in the
 * store, so any replica issues, refreshes and revokes). Every record is one value under
 * `broker:<Model>:<id>` with the TTL oidc-provider gives it; only the StateStore interface
 * is used (putValue, getValue, putValueIfAbsent, deleteValue), so standalone Redis, Cluster
 * and the memory store all work unchanged.
 *
 * Two things need more than a key per record:
 * - **Single use across replicas.** An authorization code or a refresh token is consumed by
 *   setting a marker `broker:consumed:<Model>:<id>` only if absent; `find` reads the record
 *   and its marker together. oidc-provider ends the grant when a consumed code or refresh
 *   token comes back (OAuth 2.1 §4.3.1, §6.1: replay ends the grant). Two replicas racing on
 *   the same token cannot both win: the loser finds the marker set, ends the grant itself
 *   and fails with `invalid_grant`.
 * - **Revocation by grant.** oidc-provider looks the grant up before it honours a code or a
 *   refresh token (grant_source.js `validateGrant`), so `revokeByGrantId` deletes the grant:
 *   what was issued under it is useless from then on and expires with its own TTL. The
 *   gateway's JWT access tokens are not looked up at all (the hot path verifies signatures
 *   only), so they end within `accessTokenTtl` (SPEC §8).
 *
 * Dynamically registered clients (RFC 7591) are kept while used: a client unused for
 * `clientTtlMs` is forgotten (its next request gets `invalid_client`, and MCP clients then
 * register again). Registration is anonymous, so a new client is kept only
 * `unusedClientTtlMs` (hours) until it first obtains a token ({@link keepClient}, on the
 * provider's `grant.success`); one that never does is forgotten then, not after 30 days
 * (issue 28 §4: strangers' registrations must not fill Redis). A client_id that is a URL is a
 * Client ID Metadata Document, resolved by client-metadata-documents.ts instead of read from
 * the store.
 */
import { errors, type Adapter, type AdapterFactory, type AdapterPayload } from 'oidc-provider';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

/** Records that may be used once; `consume` marks them across replicas. */
const SINGLE_USE = new Set(['AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest', 'PreAuthorizedCode']);
/** A used client's TTL is slid at most this often (one write a day, not one per request). */
const CLIENT_SLIDE_MS = 24 * 60 * 60_000;

export interface StoreAdapterOptions {
  /** A dynamically registered client unused this long is forgotten. */
  clientTtlMs: number;
  /** A registered client that has not obtained a token yet is forgotten after this long. */
  unusedClientTtlMs: number;
  /** The client of a client_id that is a URL (Client ID Metadata Documents), or undefined when that is off or it fails. */
  resolveClientUrl?: (id: string) => Promise<AdapterPayload | undefined>;
}

/** Record names (state/value-keys.ts) hash ids that are not short and plain: client ids can be any string. */
const grantKey = ValueKeys.brokerGrant;

export function createStoreAdapter(store: StateStore, options: StoreAdapterOptions): AdapterFactory {
  return (model) => new StoreAdapter(model, store, options);
}

/** What a registered client's record holds: its metadata, when it was last used, and whether it has yet to obtain a token. */
interface ClientRecord {
  payload: AdapterPayload;
  usedAt: number;
  unused?: true;
}

/** The client obtained a token: it is kept `clientTtlMs` from now on, like any used client (a no-op once done). */
export async function keepClient(store: StateStore, clientId: string, clientTtlMs: number): Promise<void> {
  const key = ValueKeys.brokerRecord('Client', clientId);
  const raw = await store.getValue(key);
  if (raw === undefined) return;
  const record = JSON.parse(raw) as ClientRecord;
  if (!record.unused) return;
  await store.putValue(key, JSON.stringify({ payload: record.payload, usedAt: Date.now() } satisfies ClientRecord), clientTtlMs);
}

/**
 * A registered client's `client_name` (RFC 7591 §2), read from its record as the broker keeps
 * it, without sliding its TTL or fetching anything (a URL client_id's metadata document is not
 * fetched for this): what the approval page names the caller's client by (issue 46 §3).
 * Self-asserted by the client at registration, so shown beside its id and escaped.
 */
export async function registeredClientName(store: StateStore, clientId: string): Promise<string | undefined> {
  const raw = await store.getValue(ValueKeys.brokerRecord('Client', clientId));
  if (raw === undefined) return undefined;
  const name = (JSON.parse(raw) as ClientRecord).payload.client_name;
  return typeof name === 'string' && name.trim() ? name.trim().slice(0, 200) : undefined;
}

class StoreAdapter implements Adapter {
  constructor(
    private readonly model: string,
    private readonly store: StateStore,
    private readonly options: StoreAdapterOptions,
  ) {}

  private key(id: string): string {
    return ValueKeys.brokerRecord(this.model, id);
  }

  private consumedKey(id: string): string {
    return ValueKeys.brokerConsumed(this.model, id);
  }

  private uidKey(uid: string): string {
    return ValueKeys.brokerByUid(this.model, uid);
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    // A client is upserted only when it registers (RFC 7592 management is off): unused so far.
    const ttlMs = expiresIn ? expiresIn * 1000 : this.model === 'Client' ? this.options.unusedClientTtlMs : undefined;
    // Clients carry when they were last used, to slide their TTL (see find).
    const value = this.model === 'Client' ? JSON.stringify({ payload, usedAt: Date.now(), unused: true } satisfies ClientRecord) : JSON.stringify(payload);
    await this.store.putValue(this.key(id), value, ttlMs);
    if (this.model === 'Session' && typeof payload.uid === 'string') await this.store.putValue(this.uidKey(payload.uid), id, ttlMs);
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    if (this.model === 'Client') return this.findClient(id);
    if (!SINGLE_USE.has(this.model)) return parse(await this.store.getValue(this.key(id)));
    const [raw, consumed] = await Promise.all([this.store.getValue(this.key(id)), this.store.getValue(this.consumedKey(id))]);
    const payload = parse(raw);
    if (payload && consumed !== undefined) payload.consumed = Number(consumed) || true;
    return payload;
  }

  private async findClient(id: string): Promise<AdapterPayload | undefined> {
    const raw = await this.store.getValue(this.key(id));
    if (raw === undefined) return /^https?:\/\//i.test(id) ? this.options.resolveClientUrl?.(id) : undefined;
    const record = JSON.parse(raw) as ClientRecord;
    // An unused client keeps its short life (keepClient ends it).
    if (!record.unused && record.usedAt + CLIENT_SLIDE_MS < Date.now()) {
      await this.store.putValue(this.key(id), JSON.stringify({ payload: record.payload, usedAt: Date.now() } satisfies ClientRecord), this.options.clientTtlMs);
    }
    return record.payload;
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    const id = await this.store.getValue(this.uidKey(uid));
    return id === undefined ? undefined : this.find(id);
  }

  /** The device flow is off (src/broker/provider.ts): there are no user codes to look up. */
  async findByUserCode(): Promise<undefined> {
    return undefined;
  }

  async consume(id: string): Promise<void> {
    const payload = parse(await this.store.getValue(this.key(id)));
    // The marker lives as long as the record could (its `exp`), at least a minute.
    const ttlMs = Math.max(60_000, ((payload?.exp ?? 0) - Math.floor(Date.now() / 1000)) * 1000 + 60_000);
    const first = await this.store.putValueIfAbsent(this.consumedKey(id), String(Math.floor(Date.now() / 1000)), ttlMs);
    if (first) return;
    // Another replica used it a moment ago: this is a replay, which ends the grant.
    if (typeof payload?.grantId === 'string') await this.store.deleteValue(grantKey(payload.grantId));
    throw new errors.InvalidGrant('grant request is invalid (already used)');
  }

  async destroy(id: string): Promise<void> {
    if (this.model === 'Session') {
      const payload = parse(await this.store.getValue(this.key(id)));
      if (typeof payload?.uid === 'string') await this.store.deleteValue(this.uidKey(payload.uid));
    }
    await this.store.deleteValue(this.key(id));
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await this.store.deleteValue(grantKey(grantId));
  }
}

function parse(raw: string | undefined): AdapterPayload | undefined {
  return raw === undefined ? undefined : (JSON.parse(raw) as AdapterPayload);
}
