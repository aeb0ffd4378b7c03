/**
 * A list of callbacks kept the way an idle stream can afford (issue 45 §3): none, one, or
 * an array only once a second comes. A JavaScript array grown by `push` reserves 17 slots
 * (about 150 bytes) for its first element; a stream's close and finish lists usually hold one
 * or two callbacks, each for the stream's whole life, 10,000 streams at a time.
 */
export type Callbacks = (() => void) | Array<() => void> | undefined;

/** The list with `callback` added; keep the result (`list = addCallback(list, callback)`). */
export function addCallback(list: Callbacks, callback: () => void): Callbacks {
  if (!list) return callback;
  if (typeof list === 'function') return [list, callback];
  list.push(callback);
  return list;
}

/**
 * Calls every callback of `list` in the order they were added; returns the empty list, to
 * assign back when the owner's state already makes a later callback run at once.
 */
export function runCallbacks(list: Callbacks): undefined {
  if (typeof list === 'function') list();
  else if (list) for (const callback of list) callback();
  return undefined;
}
