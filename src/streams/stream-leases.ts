/**
 * Leases that let replicas share streams (SPEC §5, "any replica serves any request"):
 *
 * - A session's standalone stream is claimed cluster-wide, so a second GET anywhere gets
 *   409, gateway notifications know which replica to go to, and a client resuming its stream
 *   on another replica takes it over.
 * - A POST stream whose client went away is marked as still being read here, so a replica
 *   where the client reconnects follows it over pub/sub instead of asking the backend again.
 *
 * Leases are renewed while held and lapse by themselves when a replica dies.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Coordinator, StandaloneClaim } from '../state/coordinator.js';
import type { StreamRelay } from './stream-relay.js';
import { TimerWheel } from './timer-wheel.js';

export const LEASE_TTL_MS = 10_000;
const RENEW_EVERY_MS = LEASE_TTL_MS / 3;

/** From the moment its client leaves until it finishes, a POST relay holds its stream lease. */
export function holdWhileDetached(coordinator: Coordinator, relay: StreamRelay, log: FastifyBaseLogger): void {
  let timer: NodeJS.Timeout | undefined;
  const hold = () => coordinator.holdStream(relay.key, LEASE_TTL_MS).catch((err: Error) => log.warn({ err: err.message }, 'could not hold a detached stream'));
  relay.onDetach(() => {
    if (timer || relay.finished) return;
    void hold();
    timer = setInterval(hold, RENEW_EVERY_MS);
    timer.unref();
  });
  relay.onFinish(() => {
    if (!timer) return;
    clearInterval(timer);
    void relay.flushed().then(() => coordinator.releaseStream(relay.key)).catch(() => {});
  });
}

/**
 * Claims the session's standalone stream for this relay (taking it over with `force`) and
 * keeps the claim while the relay lives. A lost claim (another replica took over) stops it.
 */
export async function claimStandalone(coordinator: Coordinator, relay: StreamRelay, force: boolean, log: FastifyBaseLogger): Promise<StandaloneClaim> {
  const { userKey, sessionId, streamId } = relay.key;
  const claim = await coordinator.claimStandalone(userKey, sessionId, streamId, LEASE_TTL_MS, force);
  if (!claim.granted) return claim;
  if (claim.previous && claim.previous.replicaId !== coordinator.replicaId) {
    // The previous holder may still be alive (the client just landed elsewhere): tell it to let go.
    void coordinator.send(claim.previous.replicaId, { type: 'stop', userKey, sessionId, streamId: claim.previous.streamId }).catch(() => {});
  }
  const lease: StandaloneLease = { coordinator, relay, log };
  standaloneLeases.add(lease);
  relay.onFinish(() => releaseStandalone(lease));
  return claim;
}

/** What renewing one standalone claim needs. */
interface StandaloneLease {
  coordinator: Coordinator;
  relay: StreamRelay;
  log: FastifyBaseLogger;
}

/**
 * Every standalone claim of this process is renewed from one wheel (timer-wheel.ts) rather than
 * a timer per stream (issue 29: an idle stream's memory). Renewals keep their period; the first
 * may come up to one tick (1/8 of it) early, far inside the lease's TTL. The claims a tick
 * visits are renewed together, one store call per batch (Coordinator.renewStandalones;
 * issue 45 §3: a call per stream was 3,000 Redis calls a second with 10,000 idle streams,
 * whose garbage grew the heap by about 1 MB a second between collections).
 */
const standaloneLeases = new TimerWheel<StandaloneLease>(RENEW_EVERY_MS, renewStandalone);

/** The claims the current tick visited, per coordinator (one per app), renewed once it has visited them all. */
const dueLeases = new Map<Coordinator, StandaloneLease[]>();

function releaseStandalone(lease: StandaloneLease): void {
  standaloneLeases.delete(lease);
  const { userKey, sessionId, streamId } = lease.relay.key;
  void lease.coordinator.releaseStandalone(userKey, sessionId, streamId).catch(() => {});
}

function renewStandalone(lease: StandaloneLease): void {
  if (lease.relay.finished) return;
  const due = dueLeases.get(lease.coordinator);
  if (due) return void due.push(lease);
  dueLeases.set(lease.coordinator, [lease]);
  // The wheel visits a tick's members synchronously: this runs once it has visited them all.
  if (dueLeases.size === 1) queueMicrotask(renewDue);
}

function renewDue(): void {
  const due = [...dueLeases];
  dueLeases.clear();
  for (const [coordinator, leases] of due) {
    coordinator
      .renewStandalones(leases.map((lease) => lease.relay.key), LEASE_TTL_MS)
      .then((held) => held.forEach((h, i) => h || stopTakenOver(leases[i]!)))
      .catch((err: Error) => leases[0]!.log.warn({ err: err.message, streams: leases.length }, 'could not renew the standalone stream leases'));
  }
}

function stopTakenOver({ relay, log }: StandaloneLease): void {
  if (relay.finished) return;
  log.info('standalone stream taken over elsewhere; stopping here');
  relay.stop();
}
