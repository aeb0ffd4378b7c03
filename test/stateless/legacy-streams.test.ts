/**
 * A bridged call's place on its session's GET stream (src/stateless/legacy-streams.ts), for
 * backends whose GET stream cannot be read here: a backend with none at all (405) is asked
 * once, and its calls then take no place, at once; a stream another replica holds (409) keeps
 * the calls placed, since that replica may offer them its requests.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { BackendResponse } from '../../src/backends/backend.js';
import { syntheticBody } from '../../src/backends/body.js';
import { LegacyStreams, type StreamSession } from '../../src/stateless/legacy-streams.js';

const coordinator = { replicaId: 'r1', broadcast: async () => {}, send: async () => {} };

function sessionAnswering(status: number): StreamSession & { opens: number } {
  const session = {
    key: `backend\nsession-${status}`,
    opens: 0,
    open: async (): Promise<BackendResponse> => {
      session.opens++;
      return { status, headers: {}, contentType: 'application/json', body: syntheticBody('') };
    },
    respond: async () => {},
  };
  return session;
}

describe('a call\'s place on a GET stream that cannot be read here', () => {
  it('a backend without a GET stream (405) is asked once; later calls get no place, without waiting', async () => {
    const streams = new LegacyStreams(coordinator, { checkEveryMs: 60_000 });
    const session = sessionAnswering(405);
    const first = streams.openCall(session.key, () => session);
    assert.ok(first instanceof Promise, 'the first call waits for the stream to be tried');
    (await first).release();
    for (let n = 0; n < 3; n++) {
      const later = streams.openCall(session.key, () => session);
      assert.ok(!(later instanceof Promise), 'a later call is placed at once');
      later.release();
    }
    assert.equal(session.opens, 1);
    streams.close();
  });

  it('a stream held elsewhere (409) keeps calls placed, each waiting as the first did', async () => {
    const streams = new LegacyStreams(coordinator, { checkEveryMs: 60_000 });
    const session = sessionAnswering(409);
    (await streams.openCall(session.key, () => session)).release();
    const later = streams.openCall(session.key, () => session);
    assert.ok(later instanceof Promise);
    (await later).release();
    assert.equal(session.opens, 1, 'the refusal is remembered, not asked again per call');
    streams.close();
  });
});
