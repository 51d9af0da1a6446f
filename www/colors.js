// @ts-check
// Precision classes from the colour table carried by the result (never hard-coded thresholds).
import { msprobeText } from './i18n.js';

/**
 * A legend class. `cls` is the name used in `data-precision` (pass, warning, error, unmatched, none, ...).
 * @typedef {object} Bin
 * @property {string} cls
 * @property {string} color  fill colour (#RRGGBB)
 * @property {number} lo
 * @property {number} hi
 * @property {boolean} last  the last range is closed on the right
 * @property {string} label
 * @property {string} description
 */

/**
 * Classes of a result: the legend bins and the class index of every node of both graphs.
 * @typedef {{bins: Bin[], unmatched: number, none: number, npu: Uint8Array, bench: Uint8Array | null}} Classes
 */

/** Fill used for nodes without a precision index (build mode, or matched nodes without data). */
export const NONE_COLOR = '#FFFFFF';
/** Fallback for unmatched nodes when the table has no unmatched entry. */
export const UNMATCHED_COLOR = '#C7C7C7';

/** Overflow levels → marker colour (the colours msprobe's viewer uses). */
export const OVERFLOW_COLORS = /** @type {Record<string, string>} */ ({
  medium: '#B6C7FC',
  high: '#7E96F0',
  critical: '#4668B8',
});

/** @param {string | undefined} level @param {number} k */
function className(level, k) {
  if (!level) return `bin${k}`;
  const word = level.trim().toLowerCase().split(/[\s_-]+/)[0];
  return word.replace(/[^a-z0-9]/g, '') || `bin${k}`;
}

/**
 * Builds the classes of a result: the ranged bins sorted by lower bound, then `unmatched`, then `none`.
 * @param {Record<string, import('./protocol.js').ColorEntry>} nodeColors
 * @returns {{bins: Bin[], unmatched: number, none: number}} bins plus the indexes of the two special classes
 */
export function makeBins(nodeColors) {
  /** @type {Bin[]} */
  const ranged = [];
  /** @type {Bin | null} */
  let unmatched = null;
  for (const [color, e] of Object.entries(nodeColors ?? {})) {
    const v = Array.isArray(e.value) ? e.value : [];
    if (v.length >= 2 && Number.isFinite(Number(v[0])) && Number.isFinite(Number(v[1]))) {
      ranged.push({
        cls: '', color, lo: Number(v[0]), hi: Number(v[1]), last: false,
        label: e.accuracy_level || `[${v[0]}, ${v[1]})`, description: e.description ?? '',
      });
    } else {
      unmatched = {
        cls: 'unmatched', color, lo: NaN, hi: NaN, last: false,
        label: e.accuracy_level || 'unmatched', description: e.description ?? '',
      };
    }
  }
  ranged.sort((a, b) => a.lo - b.lo);
  const levels = Object.values(nodeColors ?? {});
  ranged.forEach((b, k) => {
    const entry = levels.find((e) => e.value?.[0] === b.lo && e.value?.[1] === b.hi);
    b.cls = className(entry?.accuracy_level, k);
  });
  if (ranged.length) {
    const last = ranged[ranged.length - 1];
    last.last = true;
    if (last.label === `[${last.lo}, ${last.hi})`) last.label = `[${last.lo}, ${last.hi}]`;
  }
  const bins = [...ranged];
  bins.push(unmatched ?? {
    cls: 'unmatched', color: UNMATCHED_COLOR, lo: NaN, hi: NaN, last: false, label: 'unmatched', description: '',
  });
  bins.push({
    cls: 'none', color: NONE_COLOR, lo: NaN, hi: NaN, last: false, label: 'no precision index',
    description: 'matched, but no statistics to compare (or a build graph)',
  });
  return { bins, unmatched: bins.length - 2, none: bins.length - 1 };
}

/**
 * The class of a precision index: the bin whose [lo, hi) contains it (the last bin is [lo, hi]).
 * @param {Bin[]} bins
 * @param {number} nRanged number of ranged bins at the start of `bins`
 * @param {number} p
 * @param {number} none index returned when no bin contains p
 */
export function binOf(bins, nRanged, p, none) {
  if (!Number.isFinite(p)) return none;
  for (let k = 0; k < nRanged; k++) {
    const b = bins[k];
    // [lo, hi); the last range also contains hi; a degenerate range [v, v] (legacy md5 legends) contains v.
    if (p >= b.lo && (p < b.hi || (b.last && p === b.hi))) return k;
    if (b.lo === b.hi && p === b.lo) return k;
  }
  return none;
}

/**
 * Class index per node of both graphs. NPU: from its precision index; unmatched → `unmatched`.
 * Bench (no precision of its own): the class of its NPU counterpart; unmatched → `unmatched`.
 * Build graphs (no colour table): every node is `none`.
 * @param {import('./protocol.js').RunResult} r
 * @returns {Classes}
 */
export function classify(r) {
  const { bins, unmatched, none } = makeBins(r.nodeColors);
  const nRanged = bins.length - 2;
  const compare = r.graphType === 'compare' && !!r.bench;
  const g = r.npu;
  const npu = new Uint8Array(g.names.length);
  for (let i = 0; i < npu.length; i++) {
    if (!compare) npu[i] = none;
    else if (g.matched[i] < 0) npu[i] = unmatched;
    else npu[i] = binOf(bins, nRanged, g.precision[i], none);
  }
  /** @type {Uint8Array | null} */
  let bench = null;
  if (r.bench) {
    const b = r.bench;
    bench = new Uint8Array(b.names.length);
    for (let i = 0; i < bench.length; i++) {
      const m = b.matched[i];
      if (!compare) bench[i] = none;
      else if (m < 0) bench[i] = unmatched;
      else {
        const own = b.precision[i];
        bench[i] = Number.isFinite(own) ? binOf(bins, nRanged, own, none) : m < npu.length ? npu[m] : none;
      }
    }
  }
  return { bins, unmatched, none, npu, bench };
}

/** msprobe's error colour in every version of its legend. */
const ERROR_COLOR = '#FF704D';

/**
 * The legend class that means "error": the bin whose accuracy_level is error, else the bin drawn in
 * msprobe's error colour (legacy legends have no levels), else the ranged bin with the highest range.
 * Returns -1 when the legend has no ranged bins (build graphs).
 * @param {Bin[]} bins
 */
export function errorBin(bins) {
  const ranged = bins.filter((b) => Number.isFinite(b.lo));
  if (!ranged.length) return -1;
  let k = bins.findIndex((b) => b.cls === 'error');
  if (k < 0) k = bins.findIndex((b) => Number.isFinite(b.lo) && b.color.toUpperCase() === ERROR_COLOR);
  if (k < 0) k = bins.indexOf(ranged[ranged.length - 1]);
  return k;
}

/**
 * The legend class that means "pass": the bin whose accuracy_level is pass, else the ranged bin
 * that is farthest from the error bin. -1 without ranged bins.
 * @param {Bin[]} bins
 */
export function passBin(bins) {
  const k = bins.findIndex((b) => b.cls === 'pass');
  if (k >= 0) return k;
  const ranged = bins.filter((b) => Number.isFinite(b.lo));
  if (!ranged.length) return -1;
  const e = bins[errorBin(bins)];
  return bins.indexOf(e === ranged[0] ? ranged[ranged.length - 1] : ranged[0]);
}

/**
 * Darker stroke for a fill colour.
 * @param {string} hex #RRGGBB
 */
export function darker(hex) {
  const n = parseInt(hex.slice(1, 7), 16);
  if (!Number.isFinite(n)) return '#666666';
  const c = (/** @type {number} */ v) => Math.max(0, v - 70).toString(16).padStart(2, '0');
  return `#${c((n >> 16) & 255)}${c((n >> 8) & 255)}${c(n & 255)}`;
}

/**
 * The legend tooltip of a class: its description in the UI's language (msprobe's Chinese text in
 * 中文, its English in the English UI) and its range.
 * @param {Bin} b
 */
export function binTitle(b) {
  return msprobeText(b.description) + (Number.isFinite(b.lo) ? ` [${b.lo}, ${b.hi}${b.last ? ']' : ')'}` : '');
}

/**
 * "No precision index" is drawn white like msprobe's near-white "pass" (#FFFCF3): the page hatches
 * it (graph boxes, legend and list swatches) so the two differ; the stored colours stay as they are.
 * Only in a compare result (in a build graph every node has no precision index).
 * @param {Bin[]} bins
 * @param {number} k class index
 */
export function isHatched(bins, k) {
  return bins[k]?.cls === 'none' && bins.some((b) => Number.isFinite(b.lo));
}

/** Stroke colour of the hatch lines. */
export const HATCH_COLOR = '#aab2c0';

/**
 * A canvas pattern of thin diagonal lines on the fill colour, for "no precision index".
 * @param {CanvasRenderingContext2D} ctx
 * @param {string} fill
 * @param {number} [px] spacing of the lines in device pixels
 */
export function hatchPattern(ctx, fill, px = 6) {
  const c = document.createElement('canvas');
  c.width = px;
  c.height = px;
  const g = /** @type {CanvasRenderingContext2D} */ (c.getContext('2d'));
  g.fillStyle = fill;
  g.fillRect(0, 0, px, px);
  g.strokeStyle = HATCH_COLOR;
  g.lineWidth = 1;
  g.beginPath();
  g.moveTo(0, px);
  g.lineTo(px, 0);
  g.moveTo(-1, 1);
  g.lineTo(1, -1);
  g.moveTo(px - 1, px + 1);
  g.lineTo(px + 1, px - 1);
  g.stroke();
  return /** @type {CanvasPattern} */ (ctx.createPattern(c, 'repeat'));
}

/** The same hatch as a CSS background (legend and list swatches). @param {string} fill */
export function hatchCss(fill) {
  return `repeating-linear-gradient(135deg, ${fill} 0 3px, ${HATCH_COLOR} 3px 4px)`;
}

/** CSS background of a class's swatch (legend, outline): its colour, hatched as in the graph. @param {Bin[]} bins @param {number} k */
export function swatchBackground(bins, k) {
  const b = bins[k];
  if (!b) return '#ffffff';
  return isHatched(bins, k) ? hatchCss(b.color) : b.color;
}
