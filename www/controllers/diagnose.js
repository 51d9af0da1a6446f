// @ts-check
// The diagnosis (core `compare::diagnose`): where the two runs part ways. This turns the core's
// answers into what the page shows: the verdict line, the ranked suspects, the divergence overlay's
// colour classes and legend, and the step × layer / rank × layer heatmaps. No DOM, no worker code:
// `createDiagnoseController` takes the store and the client (anything with `request({type:
// 'diagnose' | 'diagnoseStep', ...})`) and changes only the store's `diagnosis` slice.

/** @typedef {import('../protocol.js').Diagnosis} Diagnosis */
/** @typedef {import('../protocol.js').Suspect} Suspect */
/** @typedef {import('../protocol.js').LayerCell} LayerCell */
/** @typedef {import('../protocol.js').RunOptions} RunOptions */
/** @typedef {import('../colors.js').Bin} Bin */

/**
 * A heatmap over the steps (of the shown rank) or the ranks (of the shown step): one row per step or
 * rank, filled in turn (`rows[k]` null until its diagnosis came, or `error` when it failed).
 * @typedef {object} Heatmap
 * @property {'step' | 'rank'} axis
 * @property {number[]} keys  the steps or ranks, in order
 * @property {number} at  the shown result's step (axis rank) or rank (axis step)
 * @property {(Diagnosis | null)[]} rows
 * @property {(string | null)[]} errors  per row, the core's message when its diagnosis failed
 * @property {boolean} running
 */

/**
 * The page's diagnosis slice.
 * @typedef {object} DiagnosisState
 * @property {string} key  `step:rank` of the result it belongs to ('' when none)
 * @property {Diagnosis | null} result  the shown result's diagnosis
 * @property {Float32Array | null} divergence  per NPU node (pre-order), log10 divergence / noise floor, NaN unmeasured
 * @property {boolean} running
 * @property {string} error
 * @property {boolean} overlay  the panes are coloured by divergence
 * @property {Heatmap[]} heatmaps
 */

/** @type {DiagnosisState} */
export const DIAGNOSIS_INITIAL = Object.freeze({
  key: '', result: null, divergence: null, running: false, error: '', overlay: false, heatmaps: [],
});

/**
 * The overlay's classes: a sequential scale of log10(divergence / noise floor), from "within the
 * noise floor" (0) to a thousand times it and more, and grey for nodes without a measured output.
 * `lo`/`hi` bound each class ([lo, hi), the last closed).
 * @type {readonly Bin[]}
 */
export const DIV_BINS = Object.freeze([
  { cls: 'div-noise', color: '#FFF7EC', lo: -Infinity, hi: 0, last: false, label: 'within noise', description: '' },
  { cls: 'div-1', color: '#FDD49E', lo: 0, hi: 0.5, last: false, label: '1–3 ×', description: '' },
  { cls: 'div-2', color: '#FDBB84', lo: 0.5, hi: 1, last: false, label: '3–10 ×', description: '' },
  { cls: 'div-3', color: '#FC8D59', lo: 1, hi: 2, last: false, label: '10–100 ×', description: '' },
  { cls: 'div-4', color: '#E34A33', lo: 2, hi: 3, last: false, label: '100–1000 ×', description: '' },
  { cls: 'div-5', color: '#B30000', lo: 3, hi: Infinity, last: true, label: '≥ 1000 ×', description: '' },
  { cls: 'div-unmeasured', color: '#D9D9D9', lo: NaN, hi: NaN, last: false, label: 'not measured', description: '' },
]);
/** The class of nodes without a measured output (and of Bench nodes without an NPU counterpart). */
export const DIV_UNMEASURED = DIV_BINS.length - 1;

/**
 * The overlay class of a divergence value: 0 (and below) is within the noise floor; NaN or null is
 * not measured.
 * @param {number | null | undefined} v
 */
export function divClass(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return DIV_UNMEASURED;
  if (v <= 0) return 0;
  for (let k = 1; k < DIV_UNMEASURED; k++) if (v < DIV_BINS[k].hi || DIV_BINS[k].last) return k;
  return DIV_UNMEASURED - 1;
}

/**
 * The overlay's classes of both graphs: an NPU node by its own divergence, a Bench node by its NPU
 * counterpart's (as the precision colours go), unmatched Bench nodes grey.
 * @param {Float32Array} divergence per NPU node
 * @param {Int32Array | null} benchMatched the Bench graph's counterpart column
 * @returns {{npu: Uint8Array, bench: Uint8Array | null}}
 */
export function divergenceClasses(divergence, benchMatched) {
  const npu = new Uint8Array(divergence.length);
  for (let i = 0; i < npu.length; i++) npu[i] = divClass(divergence[i]);
  let bench = null;
  if (benchMatched) {
    bench = new Uint8Array(benchMatched.length).fill(DIV_UNMEASURED);
    for (let j = 0; j < bench.length; j++) {
      const m = benchMatched[j];
      if (m >= 0 && m < npu.length) bench[j] = npu[m];
    }
  }
  return { npu, bench };
}

/**
 * Counts of the overlay's classes over the NPU nodes (the legend's numbers).
 * @param {Uint8Array} cls
 */
export function classCounts(cls) {
  const counts = new Array(DIV_BINS.length).fill(0);
  for (const c of cls) counts[c]++;
  return counts;
}

/**
 * One row of the suspects list.
 * @typedef {{node: string, bench: string | null, score: string, pass: string, step: number, rank: number, why: string, npuIndex: number | null, benchIndex: number | null, title: string}} SuspectItem
 */

/**
 * The rows of the suspects list, best first: the score with two decimals (as the CLI prints it),
 * and a tooltip with both full names and the reason.
 * @param {Diagnosis} d
 * @returns {SuspectItem[]}
 */
export function suspectItems(d) {
  return d.suspects.map((s) => ({
    node: s.node,
    bench: s.bench_node,
    score: s.score.toFixed(2),
    pass: s.pass,
    step: s.step,
    rank: s.rank,
    why: s.why,
    npuIndex: s.npuIndex,
    benchIndex: s.benchIndex,
    title: `${s.node}\n⇄ ${s.bench_node ?? '—'}\n${s.why}`,
  }));
}

/**
 * A heatmap as a matrix: the layers (columns) in the order they first appear over the rows, and
 * per row its cells by column (null where the row has no such layer or is not diagnosed yet).
 * @param {Heatmap} h
 * @returns {{layers: string[], cells: ((LayerCell | null)[] | null)[]}}
 */
export function heatmapMatrix(h) {
  /** @type {string[]} */
  const layers = [];
  const col = new Map();
  for (const d of h.rows) {
    for (const c of d?.layers ?? []) {
      if (!col.has(c.layer)) {
        col.set(c.layer, layers.length);
        layers.push(c.layer);
      }
    }
  }
  const cells = h.rows.map((d) => {
    if (!d) return null;
    /** @type {(LayerCell | null)[]} */
    const row = new Array(layers.length).fill(null);
    for (const c of d.layers) row[col.get(c.layer)] = c;
    return row;
  });
  return { layers, cells };
}

/**
 * The NPU node of a layer (`decoder.layers.1`): the first forward node in pre-order whose name has the
 * layer's path as whole components, i.e. the layer's module itself (its children follow it); -1 if none.
 * @param {string[]} names
 * @param {string} layer
 */
export function layerNode(names, layer) {
  const needle = `.${layer}.`;
  for (let i = 0; i < names.length; i++) {
    const n = names[i];
    if (n.includes(needle) && !n.includes('.backward')) return i;
  }
  return -1;
}

/**
 * The controller: runs the diagnosis of the shown result and the heatmaps, keeps the slice.
 * `resultShown(key)` resets it for a new result; `cancel()` stops a heatmap after its current row.
 * @param {import('../store.js').StateOf<{diagnosis: DiagnosisState}>} store
 * @param {{request: (body: any) => Promise<any>}} client
 */
export function createDiagnoseController(store, client) {
  const get = () => store.get().diagnosis;
  /** @param {Partial<DiagnosisState>} patch */
  const patch = (patch) => store.set((s) => ({ diagnosis: { ...s.diagnosis, ...patch } }));
  /** Bumped by every new result and cancel: a loop or answer of an older generation is dropped. */
  let gen = 0;

  /**
   * A new result is shown: its diagnosis is to be made; a running heatmap stops. The heatmaps stay
   * when `keepHeatmaps` (the same folders and options, another step or rank).
   * @param {string} key @param {boolean} [keepHeatmaps]
   */
  function resultShown(key, keepHeatmaps = false) {
    gen++;
    const heatmaps = keepHeatmaps ? get().heatmaps.map((h) => (h.running ? { ...h, running: false } : h)) : [];
    store.set({ diagnosis: { ...DIAGNOSIS_INITIAL, key, heatmaps } });
  }

  /** Stops a running heatmap after the row being diagnosed (the worker finishes that one). */
  function cancel() {
    gen++;
    const hs = get().heatmaps;
    if (hs.some((h) => h.running)) patch({ heatmaps: hs.map((h) => (h.running ? { ...h, running: false } : h)), running: false });
  }

  /**
   * Diagnoses the shown result (step and rank label it).
   * @param {number} step @param {number} rank
   * @returns {Promise<Diagnosis | null>} null when a newer result or cancel came first, or on error
   */
  async function diagnose(step, rank) {
    const g = gen;
    patch({ running: true, error: '' });
    try {
      const { diagnosis, divergence } = await client.request({ type: 'diagnose', step, rank });
      if (g !== gen) return null;
      patch({ result: diagnosis, divergence, running: false });
      return diagnosis;
    } catch (e) {
      if (g !== gen) return null;
      patch({ running: false, error: e instanceof Error ? e.message : String(e), result: null, divergence: null, overlay: false });
      return null;
    }
  }

  /** @param {boolean} on */
  function setOverlay(on) {
    patch({ overlay: on && !!get().divergence });
  }

  /**
   * Fills heatmaps row by row: for each, one `diagnoseStep` per step (or rank) in turn, the shown
   * one answered from `shown` without a request. `progress(done, total)` after each row.
   * @param {{axis: 'step' | 'rank', keys: number[], at: number}[]} specs
   * @param {(axis: 'step' | 'rank', key: number, at: number) => RunOptions} optionsOf the run options of one row
   * @param {{step: number, rank: number, diagnosis: Diagnosis | null}} shown
   * @param {(done: number, total: number, axis: 'step' | 'rank', key: number) => void} [progress]
   * @returns {Promise<boolean>} false when cancelled
   */
  async function heatmaps(specs, optionsOf, shown, progress) {
    const g = ++gen;
    /** @type {Heatmap[]} */
    let hs = specs.map((s) => ({ axis: s.axis, keys: s.keys, at: s.at, rows: s.keys.map(() => null), errors: s.keys.map(() => null), running: true }));
    patch({ heatmaps: hs, running: true, error: '' });
    const total = specs.reduce((n, s) => n + s.keys.length, 0);
    let done = 0;
    for (let h = 0; h < hs.length; h++) {
      for (let k = 0; k < hs[h].keys.length; k++) {
        const { axis, keys, at } = hs[h];
        const key = keys[k];
        progress?.(done, total, axis, key);
        const step = axis === 'step' ? key : at;
        const rank = axis === 'rank' ? key : at;
        /** @type {Diagnosis | null} */
        let d = null;
        /** @type {string | null} */
        let err = null;
        if (shown.diagnosis && step === shown.step && rank === shown.rank) d = shown.diagnosis;
        else {
          try {
            d = await client.request({ type: 'diagnoseStep', options: optionsOf(axis, key, at) });
          } catch (e) {
            err = e instanceof Error ? e.message : String(e);
          }
        }
        if (g !== gen) return false;
        const row = { ...hs[h], rows: hs[h].rows.slice(), errors: hs[h].errors.slice() };
        row.rows[k] = d;
        row.errors[k] = err;
        hs = hs.map((x, i) => (i === h ? row : x));
        patch({ heatmaps: hs });
        done++;
      }
      hs = hs.map((x, i) => (i === h ? { ...x, running: false } : x));
      patch({ heatmaps: hs });
    }
    progress?.(done, total, hs[hs.length - 1]?.axis ?? 'step', -1);
    patch({ running: false });
    return true;
  }

  return { resultShown, cancel, diagnose, setOverlay, heatmaps };
}
