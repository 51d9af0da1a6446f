// @ts-check
// Per-pane tree model: children index, expand state, labels and the lazily computed box layout.
// Shared by the canvas view (graphview.js) and the outline (outline.js) of one pane.
import { elideMiddle } from './elide.js';

/** World-unit layout constants (1 unit = 1 CSS pixel at zoom 1). */
export const L = Object.freeze({
  rowH: 20, // height of a collapsed box and of an expanded box's header
  pad: 8, // inner padding of an expanded box
  gap: 6, // gap between children
  leavesPerRow: 5, // API leaves packed per row
  minW: 36,
  maxLeafW: 200,
  maxModuleW: 340,
  font: '11px system-ui, sans-serif',
  fontPx: 11,
  textPad: 8,
});

/** A canvas context used only to measure label widths. */
/** @type {CanvasRenderingContext2D | OffscreenCanvasRenderingContext2D | null} */
let measureCtx = null;
/** Advance widths of the printable ASCII characters in L.font (labels are mostly ASCII). */
let asciiW = /** @type {Float32Array | null} */ (null);

function ctx2d() {
  if (!measureCtx) {
    const c = typeof OffscreenCanvas !== 'undefined' ? new OffscreenCanvas(1, 1) : document.createElement('canvas');
    measureCtx = /** @type {CanvasRenderingContext2D | OffscreenCanvasRenderingContext2D} */ (c.getContext('2d'));
    measureCtx.font = L.font;
  }
  return measureCtx;
}

/**
 * Width of s in L.font. Summing per-character advances (ignoring kerning) is ~50x faster than
 * measureText and close enough for box sizes; non-ASCII text is measured for real.
 * @param {string} s
 */
function measure(s) {
  if (!asciiW) {
    const c = ctx2d();
    asciiW = new Float32Array(128);
    for (let k = 32; k < 127; k++) asciiW[k] = c.measureText(String.fromCharCode(k)).width;
  }
  let w = 0;
  for (let k = 0; k < s.length; k++) {
    const code = s.charCodeAt(k);
    if (code < 32 || code > 126) return ctx2d().measureText(s).width;
    w += asciiW[code];
  }
  return w;
}

/**
 * Short label of a node: its name without the module path it shares with its parent, as msprobe's
 * viewer does (`Module.a.b.layers.0.mlp.MLP.forward.0` under `...layers.0.Layer.forward.0` → `mlp.MLP.forward.0`).
 * @param {string} name
 * @param {string | undefined} parentName
 */
export function shortLabel(name, parentName) {
  if (!parentName) return name;
  const a = name.split('.');
  const b = parentName.split('.');
  // The parent's module path excludes its last three parts (Class.forward.N).
  const limit = Math.min(a.length - 3, b.length - 3);
  let k = 0;
  while (k < limit && a[k] === b[k]) k++;
  return k >= 2 ? a.slice(k).join('.') : name;
}

export class TreeModel {
  /**
   * @param {import('./protocol.js').Graph} graph
   * @param {Uint8Array} cls class index per node (colors.js)
   */
  constructor(graph, cls) {
    this.g = graph;
    this.cls = cls;
    const n = graph.names.length;
    this.n = n;
    /** the root child whose subtree holds i (0 for the root itself) */
    this.top = new Int32Array(n);
    this.depth = new Int32Array(n);
    for (let i = 1; i < n; i++) {
      const p = graph.parent[i];
      if (p < 0) continue;
      this.top[i] = p === 0 ? i : this.top[p];
      this.depth[i] = this.depth[p] + 1;
    }
    /** micro step shown (-1: all); root children of other micro steps are left out */
    this.micro = -1;
    /** incremented whenever the layout or the colours change (the minimap caches by it) */
    this.version = 0;
    this.childStart = new Int32Array(n + 1);
    this.childList = new Int32Array(0);
    /** position of each node among its (shown) siblings (0-based) */
    this.sibIndex = new Int32Array(n);
    this.buildChildren();
    this.expanded = new Uint8Array(n);
    if (n > 0) this.expanded[0] = 1;
    /** @type {(string | undefined)[]} */
    this.labels = new Array(n);
    // Layout cache (relative to the parent box): valid[i] says w/h/rx/ry of i's children are current.
    this.w = new Float32Array(n);
    this.h = new Float32Array(n);
    this.rx = new Float32Array(n);
    this.ry = new Float32Array(n);
    this.valid = new Uint8Array(n);
    /** width of the label as drawn (possibly truncated) */
    /** @type {(string | undefined)[]} */
    this.drawnLabel = new Array(n);
    this.rowsCache = /** @type {Int32Array | null} */ (null);
    this.matchedCount = 0;
    this.recount();
  }

  /** Recounts the matched nodes after a manual match changed the graph's columns. */
  recount() {
    let c = 0;
    for (let i = 0; i < this.n; i++) if (this.g.matched[i] >= 0) c++;
    this.matchedCount = c;
    this.version++;
  }

  /** Children as CSR: the children of i are childList[childStart[i] .. childStart[i+1]), in index order. */
  buildChildren() {
    const n = this.n;
    const graph = this.g;
    const count = new Int32Array(n + 1);
    for (let i = 1; i < n; i++) {
      const p = graph.parent[i];
      if (p >= 0 && (p !== 0 || this.inStep(i))) count[p + 1]++;
    }
    for (let i = 0; i < n; i++) count[i + 1] += count[i];
    this.childStart = count;
    this.childList = new Int32Array(Math.max(0, count[n]));
    const fill = count.slice(0, n);
    for (let i = 1; i < n; i++) {
      const p = graph.parent[i];
      if (p < 0 || (p === 0 && !this.inStep(i))) continue;
      this.sibIndex[i] = fill[p] - count[p];
      this.childList[fill[p]++] = i;
    }
  }

  /** Is node i part of the micro step shown? @param {number} i */
  inStep(i) {
    if (this.micro < 0 || i === 0) return true;
    return this.g.microStep[this.top[i]] === this.micro;
  }

  /** Shows only the root children of micro step k (-1: all). @param {number} k */
  setMicroStep(k) {
    if (k === this.micro) return false;
    this.micro = k;
    this.buildChildren();
    this.valid.fill(0);
    this.rowsCache = null;
    this.version++;
    return true;
  }

  /** @param {number} i */
  childCount(i) {
    return this.childStart[i + 1] - this.childStart[i];
  }

  /** @param {number} i */
  hasChildren(i) {
    return this.childStart[i + 1] > this.childStart[i];
  }

  /** @param {number} i */
  label(i) {
    let s = this.labels[i];
    if (s === undefined) {
      const p = this.g.parent[i];
      s = shortLabel(this.g.names[i], p >= 0 ? this.g.names[p] : undefined);
      this.labels[i] = s;
    }
    return s;
  }

  /** Marks the layout of i and of all its ancestors stale. @param {number} i */
  invalidate(i) {
    for (let k = i; k >= 0; k = this.g.parent[k]) this.valid[k] = 0;
    this.rowsCache = null;
    this.version++;
  }

  /** @param {number} i @param {boolean} open */
  setExpanded(i, open) {
    if (!this.hasChildren(i)) return false;
    const v = open ? 1 : 0;
    if (this.expanded[i] === v) return false;
    this.expanded[i] = v;
    this.invalidate(i);
    return true;
  }

  /** Expands every ancestor of i (so that i becomes visible). Returns true if anything changed. @param {number} i */
  reveal(i) {
    let changed = false;
    for (let p = this.g.parent[i]; p >= 0; p = this.g.parent[p]) changed = this.setExpanded(p, true) || changed;
    return changed;
  }

  /** Expands (or collapses) everything. @param {boolean} open */
  setAll(open) {
    for (let i = 0; i < this.n; i++) this.expanded[i] = open && this.hasChildren(i) ? 1 : 0;
    if (this.n > 0) this.expanded[0] = 1;
    this.valid.fill(0);
    this.rowsCache = null;
    this.version++;
  }

  /** True if i is in the shown micro step and every ancestor of i is expanded. @param {number} i */
  isVisible(i) {
    if (!this.inStep(i)) return false;
    for (let p = this.g.parent[i]; p >= 0; p = this.g.parent[p]) if (!this.expanded[p]) return false;
    return true;
  }

  /** The visible nodes in display order (the outline's rows). */
  rows() {
    if (this.rowsCache) return this.rowsCache;
    const end = this.g.subtreeEnd;
    const out = [];
    if (this.n) out.push(0);
    if (this.n && this.expanded[0]) {
      // The root's shown children one by one (a micro step may leave some out), each subtree in pre-order.
      for (let c = this.childStart[0]; c < this.childStart[1]; c++) {
        const top = this.childList[c];
        for (let i = top; i < end[top]; ) {
          out.push(i);
          i = this.expanded[i] ? i + 1 : Math.max(i + 1, end[i]);
        }
      }
    }
    this.rowsCache = Int32Array.from(out);
    return this.rowsCache;
  }

  /** Is the box of i drawn as an open container? @param {number} i */
  isOpen(i) {
    return this.expanded[i] === 1 && this.hasChildren(i);
  }

  /**
   * Computes w/h of i and the positions of its visible descendants (cached until invalidated).
   * @param {number} i
   */
  layout(i) {
    // Iterative post-order over the expanded part of the subtree, so deep trees don't overflow the stack.
    if (this.valid[i]) return;
    /** @type {number[]} */
    const stack = [i];
    /** @type {number[]} */
    const order = [];
    while (stack.length) {
      const k = /** @type {number} */ (stack.pop());
      if (this.valid[k]) continue;
      order.push(k);
      if (this.isOpen(k)) {
        for (let c = this.childStart[k]; c < this.childStart[k + 1]; c++) {
          const ch = this.childList[c];
          if (!this.valid[ch]) stack.push(ch);
        }
      }
    }
    for (let o = order.length - 1; o >= 0; o--) this.layoutOne(order[o]);
  }

  /** Width of the collapsed box of i (and its drawn label). @param {number} i */
  collapsedWidth(i) {
    const label = this.label(i);
    const maxW = this.hasChildren(i) ? L.maxModuleW : L.maxLeafW;
    const tw = measure(label) + 2 * L.textPad + (this.hasChildren(i) ? 12 : 0);
    const w = Math.max(L.minW, Math.min(maxW, tw));
    this.drawnLabel[i] = tw > maxW ? truncate(label, maxW - 2 * L.textPad - (this.hasChildren(i) ? 12 : 0)) : label;
    return w;
  }

  /** @param {number} i (children already laid out) */
  layoutOne(i) {
    const headerW = this.collapsedWidth(i);
    if (!this.isOpen(i)) {
      this.w[i] = headerW;
      this.h[i] = L.rowH;
      this.valid[i] = 1;
      return;
    }
    const a = this.childStart[i];
    const b = this.childStart[i + 1];
    // Pass 1: rows. A row is a run of up to leavesPerRow leaves, or one node with children.
    /** @type {{from: number, to: number, w: number, h: number}[]} */
    const rowsOut = [];
    let c = a;
    while (c < b) {
      const ch = this.childList[c];
      if (this.hasChildren(ch)) {
        rowsOut.push({ from: c, to: c + 1, w: this.w[ch], h: this.h[ch] });
        c++;
        continue;
      }
      let w = 0;
      let h = 0;
      const from = c;
      while (c < b && c - from < L.leavesPerRow && !this.hasChildren(this.childList[c])) {
        const x = this.childList[c];
        w += (c > from ? L.gap : 0) + this.w[x];
        h = Math.max(h, this.h[x]);
        c++;
      }
      rowsOut.push({ from, to: c, w, h });
    }
    let innerW = 0;
    for (const r of rowsOut) innerW = Math.max(innerW, r.w);
    const width = Math.max(headerW, innerW + 2 * L.pad);
    // Pass 2: positions, rows centred.
    let y = L.rowH + L.pad;
    for (const r of rowsOut) {
      let x = (width - r.w) / 2;
      for (let k = r.from; k < r.to; k++) {
        const ch = this.childList[k];
        this.rx[ch] = x;
        this.ry[ch] = y;
        x += this.w[ch] + L.gap;
      }
      y += r.h + L.gap;
    }
    this.w[i] = width;
    this.h[i] = rowsOut.length ? y - L.gap + L.pad : L.rowH;
    this.valid[i] = 1;
  }

  /** Absolute position of i's box (layout of the root must be current). @param {number} i */
  absPos(i) {
    let x = 0;
    let y = 0;
    for (let k = i; k > 0; k = this.g.parent[k]) {
      x += this.rx[k];
      y += this.ry[k];
    }
    return { x, y };
  }
}

/** A label elided in the middle to maxW (names differ at their end). @param {string} s @param {number} maxW */
function truncate(s, maxW) {
  return maxW <= 0 ? '' : elideMiddle(s, maxW, measure);
}
