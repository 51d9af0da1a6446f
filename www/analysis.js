// @ts-check
// Pure computations over a result's graph columns: name search and class filters (the diagnosis:
// controllers/diagnose.js).
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
