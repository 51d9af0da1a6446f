// @ts-check
// The page's state: one small store that views subscribe to. Controllers (www/controllers/*.js) hold
// the logic and change the state only through `set`; views render from `get()` when a slice they
// watch changes. No DOM and no worker here, so controllers are unit-tested under `node --test`.

/**
 * @template {Record<string, any>} T
 * @typedef {object} Store
 * @property {() => T} get
 * @property {(patch: Partial<T> | ((s: T) => Partial<T>)) => void} set  shallow-merges a patch and notifies
 * @property {(keys: (keyof T)[] | null, fn: (s: T, prev: T) => void) => () => void} subscribe
 *   calls fn after every `set` that changed one of `keys` (by identity; null: any), returns the unsubscriber
 * @property {<R>(fn: () => R) => R} batch  runs fn with notifications held, then notifies once
 */

/**
 * What a controller needs of the store: reading and patching the fields of its slice.
 * @template T
 * @typedef {{get: () => T, set: (patch: Partial<T> | ((s: T) => Partial<T>)) => void}} StateOf
 */

/**
 * @template {Record<string, any>} T
 * @param {T} initial
 * @returns {Store<T>}
 */
export function createStore(initial) {
  let state = initial;
  /** @type {Set<{keys: (keyof T)[] | null, fn: (s: T, prev: T) => void}>} */
  const subs = new Set();
  let depth = 0;
  /** @type {T | null} the state before the first `set` of a batch */
  let pending = null;

  /** @param {T} prev */
  function notify(prev) {
    for (const sub of [...subs]) {
      if (!subs.has(sub)) continue;
      if (sub.keys && !sub.keys.some((k) => state[k] !== prev[k])) continue;
      sub.fn(state, prev);
    }
  }

  return {
    get: () => state,
    set(patch) {
      const p = typeof patch === 'function' ? patch(state) : patch;
      const prev = state;
      let changed = false;
      for (const k of Object.keys(p)) if (p[k] !== state[k]) changed = true;
      if (!changed) return;
      state = { ...state, ...p };
      if (depth) {
        pending ??= prev;
        return;
      }
      notify(prev);
    },
    subscribe(keys, fn) {
      const sub = { keys, fn };
      subs.add(sub);
      return () => {
        subs.delete(sub);
      };
    },
    batch(fn) {
      depth++;
      try {
        return fn();
      } finally {
        depth--;
        if (!depth && pending) {
          const prev = pending;
          pending = null;
          notify(prev);
        }
      }
    },
  };
}
