// @ts-check
// Pure computations over a result's graph columns: name search, class filters, the first divergence.
// No DOM; every function takes the typed columns of protocol.js and returns node indexes in pre-order.

/** @typedef {import('./protocol.js').Graph} Graph */

/**
 * Searches node names by case-insensitive substring or regular expression.
 * An invalid expression gives `{error}` (the engine's message without its "Invalid regular
 * expression:" prefix) and no hits (never throws).
 * @param {string[]} names
 * @param {string} query
 * @param {boolean} regex
 * @param {(i: number) => boolean} [keep] restricts the hits (e.g. the shown micro step)
 * @returns {{hits: Int32Array, error: string | null}}
 */
export function searchNames(names, query, regex, keep) {
  if (!query) return { hits: new Int32Array(0), error: null };
  /** @type {(s: string) => boolean} */
  let test;
  if (regex) {
    let re;
    try {
      re = new RegExp(query, 'i');
    } catch (e) {
      // The page says "Invalid regular expression: {msg}" itself: drop the engine's own prefix.
      const msg = e instanceof Error ? e.message : String(e);
      return { hits: new Int32Array(0), error: msg.replace(/^Invalid regular expression:\s*/i, '') };
    }
    test = (s) => re.test(s);
  } else {
    const q = query.toLowerCase();
    test = (s) => s.toLowerCase().includes(q);
  }
  const out = [];
  for (let i = 0; i < names.length; i++) if ((!keep || keep(i)) && test(names[i])) out.push(i);
  return { hits: Int32Array.from(out), error: null };
}

/**
 * Filter kinds: `cls:<k>` (legend class k), `matched`, `unmatched`, `overflow:<level>`.
 * @param {Graph} g
 * @param {Uint8Array} cls class per node of this side
 * @param {string} kind
 * @param {(i: number) => boolean} [keep]
 * @returns {Int32Array}
 */
export function filterNodes(g, cls, kind, keep) {
  const n = g.names.length;
  /** @type {(i: number) => boolean} */
  let test;
  if (kind.startsWith('cls:')) {
    const k = Number(kind.slice(4));
    test = (i) => cls[i] === k;
  } else if (kind === 'matched') test = (i) => g.matched[i] >= 0;
  else if (kind === 'unmatched') test = (i) => g.matched[i] < 0;
  else if (kind.startsWith('overflow:')) {
    const level = kind.slice(9);
    test = (i) => g.overflow[i] === level;
  } else return new Int32Array(0);
  const out = [];
  for (let i = 0; i < n; i++) if ((!keep || keep(i)) && test(i)) out.push(i);
  return Int32Array.from(out);
}

/** Is a node of the backward pass? (`.backward.` inside its name, or a name ending with `.backward`) @param {string} name */
export function isBackward(name) {
  return name.includes('.backward.') || name.endsWith('.backward');
}

/**
 * The first divergence: the earliest node in execution order whose verdict is error while none of
 * its descendants is an error (so the fault is its own), forward pass first, then backward.
 * Execution order = pre-order of the NPU graph; a verdict is error when the node is matched and its
 * precision index falls in the legend's error range.
 *
 * `clean` tells whether every earlier node of the same pass passes or is unmatched (then every input
 * of the node passed); otherwise the earlier errors are necessarily its ancestors (a container's
 * verdict includes its children's outputs) and `earlierWarnings` counts the warnings before it.
 * @param {Graph} g the NPU graph
 * @param {Uint8Array} cls NPU classes
 * @param {number} errorK the error class
 * @param {number} passK the pass class
 * @param {number} unmatchedK
 * @param {number} noneK
 * @returns {{index: number, phase: 'forward' | 'backward', clean: boolean, earlierErrors: number, earlierWarnings: number} | null}
 */
export function firstDivergence(g, cls, errorK, passK, unmatchedK, noneK) {
  const n = g.names.length;
  if (errorK < 0 || !n) return null;
  const isErr = new Uint8Array(n);
  for (let i = 0; i < n; i++) isErr[i] = g.matched[i] >= 0 && cls[i] === errorK ? 1 : 0;
  const errBelow = new Uint8Array(n);
  for (let i = n - 1; i > 0; i--) {
    const p = g.parent[i];
    if (p >= 0 && (isErr[i] || errBelow[i])) errBelow[p] = 1;
  }
  for (const phase of /** @type {const} */ (['forward', 'backward'])) {
    let errors = 0;
    let warnings = 0;
    for (let i = 0; i < n; i++) {
      if (isBackward(g.names[i]) !== (phase === 'backward')) continue;
      if (isErr[i] && !errBelow[i]) {
        return { index: i, phase, clean: errors === 0 && warnings === 0, earlierErrors: errors, earlierWarnings: warnings };
      }
      if (isErr[i]) errors++;
      else if (g.matched[i] >= 0 && cls[i] !== passK && cls[i] !== unmatchedK && cls[i] !== noneK) warnings++;
    }
  }
  return null;
}
