// @ts-check
/**
 * The graph columns of a `run` answer, as the core gives them (`Session.columns(side)`): one
 * little-endian buffer per side, the layout of `graph_columns` in src/view.rs:
 *
 *   0       "PLGC", u32 version (1), u32 n (nodes), u32 T (bytes of the level table)
 *   16      the overflow levels, UTF-8 joined with '\0' (code k >= 1 is the k-th, 0 none),
 *           zero bytes up to H = 16 + T rounded up to a multiple of 8
 *   H       f64 precision[n] (NaN = none)
 *   H+8n    i32 parent[n], i32 matched[n], i32 microStep[n], i32 subtreeEnd[n]
 *   H+24n   u8 nodeType[n], u8 overflow code[n]
 *   H+26n   the names, UTF-8 joined with '\0' (NAME_SEP), to the end
 *
 * Used by the worker (and bench/node.mjs). No DOM, no worker API.
 */

const COLUMNS_MAGIC = 'PLGC';
const COLUMNS_VERSION = 1;
/** UTF-8 without stripping a leading U+FEFF (a name may start with one), as wasm-bindgen decodes strings. */
const columnsText = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * Decodes one side's columns into the {@link import('./protocol.js').PackedGraph} the page gets:
 * the numeric columns are typed-array views on one buffer of their own (`buffer`, to transfer;
 * the names' bytes are not in it, so the page does not keep them), the names one string.
 * @param {Uint8Array} bytes `Session.columns(side)`
 * @param {number} nodes the node count of the `run` answer (`{nodes}`), checked against the buffer's
 * @returns {{graph: import('./protocol.js').PackedGraph, buffer: ArrayBuffer}}
 */
export function decodeColumns(bytes, nodes) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const bad = (/** @type {string} */ what) => new Error(`the core's graph columns: ${what}`);
  if (bytes.byteLength < 16) throw bad(`${bytes.byteLength} bytes, not even a header`);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  const version = dv.getUint32(4, true);
  if (magic !== COLUMNS_MAGIC || version !== COLUMNS_VERSION) throw bad(`not version ${COLUMNS_VERSION} columns (${JSON.stringify(magic)} ${version})`);
  const n = dv.getUint32(8, true);
  const t = dv.getUint32(12, true);
  if (n !== nodes) throw bad(`${n} nodes, the answer says ${nodes}`);
  const at = Math.ceil((16 + t) / 8) * 8;
  const namesAt = at + 26 * n;
  if (bytes.byteLength < namesAt) throw bad(`${bytes.byteLength} bytes, ${n} nodes need ${namesAt} and their names`);
  const levels = columnsText.decode(bytes.subarray(16, 16 + t)).split('\u0000');
  const namesJoined = columnsText.decode(bytes.subarray(namesAt));
  // The numeric sections in a buffer of their own, at offset 0 (the f64 view needs 8-byte alignment).
  // (`columns` returns a copy out of the wasm memory, a plain ArrayBuffer.)
  const buffer = /** @type {ArrayBuffer} */ (bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + namesAt));
  const codes = new Uint8Array(buffer, at + 25 * n, n);
  /** @type {(string | null)[]} */
  const overflow = new Array(n).fill(null);
  for (let i = 0; i < n; i++) {
    const c = codes[i];
    if (c === 0) continue;
    const level = levels[c - 1];
    if (level === undefined) throw bad(`overflow code ${c} of node ${i} is not in the level table`);
    overflow[i] = level;
  }
  return {
    graph: {
      namesJoined,
      parent: new Int32Array(buffer, at + 8 * n, n),
      nodeType: new Uint8Array(buffer, at + 24 * n, n),
      precision: new Float64Array(buffer, at, n),
      overflow,
      matched: new Int32Array(buffer, at + 12 * n, n),
      microStep: new Int32Array(buffer, at + 16 * n, n),
      subtreeEnd: new Int32Array(buffer, at + 20 * n, n),
    },
    buffer,
  };
}
