// @ts-check
// Showing a result: its classes (legend bins per node), the panes' tree models, which pane shows a
// build's single graph, the legend's and the summary's numbers, and what follows a new result (the
// kept manual pairs re-applied, the diagnosis reset, the heatmaps kept while only the step or rank
// changed). No DOM and no worker code: it takes the store and a small `DisplayUi` that app.js
// implements over the DOM (titles, panes, legend, details, tools).
import { classify, errorBin, passBin, OVERFLOW_COLORS } from '../colors.js';
import { TreeModel } from '../tree.js';
import { STAGES } from '../protocol.js';
import { runKey } from './manual.js';

/** @typedef {import('../protocol.js').Side} Side */
/** @typedef {import('../protocol.js').RunResult} RunResult */
/** @typedef {import('../colors.js').Classes} Classes */

/**
 * What the details drawer shows: a message, or the pair of a node.
 * @typedef {{text: string} | {pair: {npu: import('../protocol.js').NodeDetail | null, bench: import('../protocol.js').NodeDetail | null}, side: Side, toolTip: Record<string, string> | null, build: 'NPU' | 'Bench' | null}} Details
 */

/**
 * The part of the page's state this controller reads and writes.
 * @typedef {object} DisplayState
 * @property {RunResult | null} result
 * @property {Classes | null} classes
 * @property {Record<Side, TreeModel | null>} models  the panes' tree models (view models of the result's graphs)
 * @property {{side: Side, index: number} | null} selection
 * @property {Side} buildSide  which pane shows the single graph of a build result
 * @property {Details} details
 * @property {string | null} matchBlocked
 * @property {'dump' | 'vis'} mode
 * @property {import('../protocol.js').VisMeta | null} vis
 * @property {Record<Side, import('./load.js').Source | null>} sources
 * @property {Record<Side, import('./load.js').Source | null>} applied
 * @property {import('../protocol.js').RunOptions | null} runOpts
 * @property {number} sessionGen
 * @property {{stage: string, done?: number, total?: number} | null} progress
 */

/** @type {Pick<DisplayState, 'result' | 'classes' | 'models' | 'selection' | 'buildSide' | 'details'>} */
export const DISPLAY_INITIAL = {
  result: null,
  classes: null,
  models: { npu: null, bench: null },
  selection: null,
  buildSide: 'npu',
  details: { text: 'Load a dump folder on each side.' },
};

/** A compare result with both graphs. @param {RunResult} r */
export const isCompare = (r) => r.graphType === 'compare' && !!r.bench;

/**
 * The graph a pane shows: a build result's single graph lives in the `npu` slot, whichever pane shows it.
 * @param {RunResult | null} r @param {Side} pane @returns {Side}
 */
export const graphOfPane = (r, pane) => (r && !r.bench ? 'npu' : pane);
/** The pane that shows a graph. @param {RunResult | null} r @param {Side} graph @returns {Side} */
export const paneOfGraph = (r, graph) => (r && !r.bench ? 'npu' : graph);

/**
 * The legend's entries: each class with its count of NPU nodes (a build shows only the one class of
 * its nodes; `none` only when some node has it), then each overflow level with its NPU and Bench counts.
 * @param {RunResult} result @param {Classes} classes @param {boolean} compare
 * @returns {{bins: {k: number, cls: string, label: string, count: number}[], overflow: {level: string, npu: number, bench: number}[]}}
 */
export function legendItems(result, classes, compare) {
  const counts = new Array(classes.bins.length).fill(0);
  for (const c of classes.npu) counts[c]++;
  const bins = [];
  for (const [k, b] of classes.bins.entries()) {
    if (!compare && b.cls !== 'none') continue;
    if (b.cls === 'none' && counts[k] === 0) continue;
    bins.push({ k, cls: b.cls, label: b.label, count: counts[k] });
  }
  /** @type {Map<string, [number, number]>} overflow level → [NPU count, Bench count] */
  const ov = new Map();
  [result.npu, result.bench].forEach((g, k) => {
    if (!g) return;
    for (const o of g.overflow) {
      if (!o) continue;
      const c = ov.get(o) ?? [0, 0];
      c[k]++;
      ov.set(o, c);
    }
  });
  const overflow = [];
  for (const level of ['medium', 'high', 'critical', ...[...ov.keys()].filter((l) => !(l in OVERFLOW_COLORS))]) {
    const c = ov.get(level);
    if (c) overflow.push({ level, npu: c[0], bench: c[1] });
  }
  return { bins, overflow };
}

/**
 * The summary's numbers: nodes per side, matched per side, errors and warnings (the ranged classes
 * between pass and error: one in msprobe 26.x, three in legacy legends).
 * @param {RunResult} result @param {Classes} classes @param {Record<Side, TreeModel | null>} models
 */
export function summaryOf(result, classes, models) {
  const perBin = new Array(classes.bins.length).fill(0);
  for (const v of classes.npu) perBin[v]++;
  const errK = errorBin(classes.bins);
  const passK = passBin(classes.bins);
  let warnings = 0;
  classes.bins.forEach((b, k) => {
    if (Number.isFinite(b.lo) && k !== errK && k !== passK) warnings += perBin[k];
  });
  return {
    n: result.npu.names.length,
    nb: result.bench?.names.length ?? 0,
    mN: models.npu?.matchedCount ?? 0,
    mB: models.bench?.matchedCount ?? 0,
    errors: errK >= 0 ? perBin[errK] : 0,
    warnings,
  };
}

/**
 * Matched and unmatched node counts of the shown result, per side.
 * @param {{result: RunResult | null, models: Record<Side, TreeModel | null>}} s
 */
export function matchCounts(s) {
  const mN = s.models.npu?.matchedCount ?? 0;
  const mB = s.models.bench?.matchedCount ?? 0;
  return {
    matchedNpu: mN,
    matchedBench: mB,
    unmatchedNpu: (s.result?.npu.names.length ?? 0) - mN,
    unmatchedBench: (s.result?.bench?.names.length ?? 0) - mB,
  };
}

/** The step and rank of the shown result (the labels of its diagnosis). @param {{runOpts: import('../protocol.js').RunOptions | null}} s */
export function shownStepRank(s) {
  return { step: s.runOpts?.step ?? 0, rank: s.runOpts?.mergedRank ?? s.runOpts?.rank ?? 0 };
}

/**
 * What the heatmaps depend on besides the step and rank: the sources and the other options.
 * @param {{applied: Record<Side, import('./load.js').Source | null>, runOpts: import('../protocol.js').RunOptions | null}} s
 */
export function heatInputs(s) {
  const rest = { ...(s.runOpts ?? {}) };
  for (const k of ['step', 'rank', 'mergedRank']) delete rest[/** @type {'step'} */ (k)];
  return { npu: s.applied.npu, bench: s.applied.bench, opts: JSON.stringify(rest) };
}

/**
 * Why manual matching cannot work on the shown result, or null.
 * @param {DisplayState} s @param {number} generation the worker's @param {(k: string) => string} t
 */
export function matchBlockedReason(s, generation, t) {
  if (!s.result?.bench) return null;
  // A .vis.db of statistics or md5: the pair is re-compared from the statistics the file stores.
  if (s.mode === 'vis') return s.vis?.whyNotMatch ?? null;
  if (s.sessionGen !== generation) return t('The core was restarted: reload the folders to match by hand.');
  return null;
}

/**
 * Why the diagnosis cannot run on the shown result, or ''.
 * @param {DisplayState} s @param {number} generation @param {(k: string) => string} t
 */
export function diagnoseBlocked(s, generation, t) {
  if (!s.result || !s.result.bench) return t('The diagnosis needs a compare result (two sides).');
  if (s.mode !== 'dump') return t('The diagnosis needs the dump folders (this result was read from a msprobe output file).');
  if (s.sessionGen !== generation) return t('The core was restarted: reload the folders to diagnose.');
  return '';
}

/**
 * What showing a result asks of the page (app.js implements it over the DOM).
 * @typedef {object} DisplayUi
 * @property {(result: RunResult | null, classes: Classes | null, compare: boolean) => void} render
 *   draws a result (or nothing): panes, titles, legend, summary, diagnostics, welcome; resets the tools
 * @property {(result: RunResult | null) => void} shown  after a result is shown (micro steps, the template offer, listeners, the URL's view)
 */

/**
 * @param {import('../store.js').StateOf<DisplayState>} store
 * @param {object} deps
 * @param {DisplayUi} deps.ui
 * @param {{resultShown: (key: string) => Promise<any>}} deps.manual  the manual-match controller
 * @param {{resultShown: (key: string, keepHeatmaps?: boolean) => void}} deps.diagnosis  the diagnose controller
 * @param {() => number} deps.generation  the worker's generation
 * @param {() => {step: number, rank: number}} deps.visPair  the shown step and rank of an opened msprobe file
 * @param {(k: string) => string} [deps.t]
 */
export function createDisplayController(store, deps) {
  const get = store.get;
  const t = deps.t ?? ((k) => k);
  /** @type {ReturnType<typeof heatInputs> | null} the inputs of the heatmaps shown */
  let heatOf = null;
  /** @type {Promise<{reapplied: number, already: number, missing: number}>} the shown result's re-applying of kept manual pairs */
  let reapply = Promise.resolve({ reapplied: 0, already: 0, missing: 0 });
  /** How long the last `show` took (ms). */
  const timings = { displayMs: 0 };

  function updateMatchBlocked() {
    store.set({ matchBlocked: matchBlockedReason(get(), deps.generation(), t) });
  }

  /**
   * Shows a result: its classes and tree models, nothing selected; the hand-made pairs kept for its
   * step and rank come back by name (one undo step); the diagnosis starts again (the heatmaps stay
   * while only the step or rank changed).
   * @param {RunResult} result
   * @returns {Promise<{reapplied: number, already: number, missing: number}>} the re-applying of the kept pairs
   */
  function show(result) {
    const t0 = performance.now();
    store.set({ progress: { stage: STAGES.render } });
    const classes = classify(result);
    const compare = isCompare(result);
    const s = get();
    const single = !result.bench;
    store.set({
      result,
      classes,
      models: {
        npu: new TreeModel(result.npu, classes.npu),
        bench: result.bench && classes.bench ? new TreeModel(result.bench, classes.bench) : null,
      },
      selection: null,
      buildSide: single && !s.applied.npu && s.applied.bench ? 'bench' : 'npu',
      details: { text: compare ? 'Select a node to compare its tensors.' : 'Select a node to see its tensors.' },
    });
    deps.ui.render(result, classes, compare);
    updateMatchBlocked();
    const st = get();
    const { step, rank } = st.mode === 'vis' ? deps.visPair() : { step: st.runOpts?.step ?? 0, rank: st.runOpts?.rank ?? 0 };
    const key = runKey(step, rank);
    reapply = deps.manual.resultShown(key);
    const inputs = heatInputs(st);
    const keep = !!heatOf && heatOf.npu === inputs.npu && heatOf.bench === inputs.bench && heatOf.opts === inputs.opts && st.mode === 'dump';
    deps.diagnosis.resultShown(key, keep);
    timings.displayMs = performance.now() - t0;
    deps.ui.shown(result);
    return reapply;
  }

  /** Shows nothing. */
  function clear() {
    store.set({ result: null, classes: null, models: { npu: null, bench: null }, selection: null, details: { text: 'Load a dump folder on each side.' } });
    deps.ui.render(null, null, false);
    updateMatchBlocked();
    reapply = deps.manual.resultShown('');
    deps.diagnosis.resultShown('');
    deps.ui.shown(null);
  }

  /** The heatmaps about to be made are of the shown result's inputs. */
  function heatmapsOfShown() {
    heatOf = heatInputs(get());
  }

  return {
    show,
    clear,
    updateMatchBlocked,
    heatmapsOfShown,
    timings,
    /** The re-applying of the kept pairs of the shown result. */
    get reapply() {
      return reapply;
    },
  };
}
