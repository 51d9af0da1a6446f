// Small graphs for the unit tests: the columns the page's graph code reads, built from rows.

/**
 * A graph of [name, parent] rows in pre-order; node type 0 for `Module.` names and `root`, else 1.
 * @param {[string, number][]} rows
 */
export function graph(rows) {
  const names = rows.map(([n]) => n);
  const parent = Int32Array.from(rows.map(([, p]) => p));
  const n = names.length;
  const subtreeEnd = new Int32Array(n);
  for (let i = n - 1; i >= 0; i--) {
    let e = i + 1;
    while (e < n && isDesc(parent, e, i)) e++;
    subtreeEnd[i] = e;
  }
  return {
    names, parent, subtreeEnd,
    nodeType: Uint8Array.from(names.map((x) => (x.startsWith('Module.') || x === 'root' ? 0 : 1))),
    precision: new Float64Array(n).fill(NaN),
    overflow: new Array(n).fill(null),
    matched: new Int32Array(n).fill(-1),
    microStep: new Int32Array(n),
  };
}

/** Whether node `c` lies below node `a`. @param {Int32Array} parent @param {number} c @param {number} a */
function isDesc(parent, c, a) {
  for (let p = parent[c]; p >= 0; p = parent[p]) if (p === a) return true;
  return false;
}
