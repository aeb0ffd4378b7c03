/**
 * Which of a user's sessions with a 2025-11-25 backend (for one capability set) a bridged call
 * runs in: its lane (legacy-sessions.ts). Calls running at once in one session could not tell
 * whose a request on the session's GET stream is — SDK servers send one there when they name no
 * call — so each call of this replica takes a lane no other call of this replica is in.
 *
 * Taking a lane is synchronous: the test and the claim happen in one turn, so calls arriving
 * together cannot all find the same lane free, and the lanes of one capability set never
 * exceed {@link MAX_LANES} (issue 28 §5: sixty calls at once opened fifty-four sessions when
 * the test and the claim were awaits apart). With every lane taken, a call shares the lane
 * with the fewest calls (a request naming no call is then refused as ambiguous, as before).
 */

/** How many sessions one user, backend and capability set may take for calls running at once. */
export const MAX_LANES = 8;

export interface Lane {
  /** 0 for the first session, 1 … MAX_LANES - 1 for the others. */
  index: number;
  /** Gives the lane back (once; later calls do nothing). */
  release(): void;
}

export class Lanes {
  /** Calls of this replica in each lane, by user, backend and capability set. */
  readonly #calls = new Map<string, number[]>();

  /** A lane for a call: the first no call is in, else the one with the fewest; `only` forces one. */
  take(key: string, only?: number): Lane {
    let counts = this.#calls.get(key);
    if (!counts) this.#calls.set(key, (counts = new Array<number>(MAX_LANES).fill(0)));
    const index = only ?? leastTaken(counts);
    counts[index]! += 1;
    let released = false;
    return {
      index,
      release: () => {
        if (released) return;
        released = true;
        counts[index]! -= 1;
        if (counts.every((n) => n === 0)) this.#calls.delete(key);
      },
    };
  }
}

function leastTaken(counts: number[]): number {
  let least = 0;
  for (let lane = 0; lane < counts.length; lane++) {
    if (counts[lane] === 0) return lane;
    if (counts[lane]! < counts[least]!) least = lane;
  }
  return least;
}
