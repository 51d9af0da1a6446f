// @ts-check
// The tools of the sidebar over the shown result: search (substring or regular expression), the
// filters by legend class, match state and overflow level with their counts, the node index by name,
// the hand-made pairs' list, and the exports that ask the worker (the compare table's CSV, the
// updated `.vis.db`) and reading a `.vis.config`. No DOM and no worker code: it takes the store and
// the client (anything with `request`); app.js draws the lists and saves the files.
import { searchNames, filterNodes } from '../analysis.js';

/** @typedef {import('../protocol.js').Side} Side */

/**
 * The part of the page's state this controller reads and writes.
 * @typedef {object} ToolsState
 * @property {import('../protocol.js').RunResult | null} result
 * @property {import('../colors.js').Classes | null} classes
 * @property {Record<Side, import('../tree.js').TreeModel | null>} models
 * @property {Map<number, number>} manual
 * @property {'dump' | 'vis'} mode
 * @property {import('../protocol.js').VisMeta | null} vis
 * @property {{text: string, err: boolean}} exportMsg
 */

/** @type {Pick<ToolsState, 'exportMsg'>} */
export const TOOLS_INITIAL = { exportMsg: { text: '', err: false } };

/**
 * The filter choices of a side: the result's ranged legend classes, unmatched/matched (a compare),
 * the overflow levels present, each with its count in the shown micro step.
 * @param {ToolsState} s @param {Side} side @param {(k: string, p?: Record<string, string | number>) => string} t
 * @returns {{value: string, label: string, count: number}[]}
 */
export function filterKinds(s, side, t) {
  const m = s.models[side];
  if (!m || !s.classes || !s.result) return [];
  /** @type {[string, string][]} */
  const kinds = [];
  if (s.result.bench) {
    s.classes.bins.forEach((b, k) => {
      if (Number.isFinite(b.lo)) kinds.push([`cls:${k}`, t(b.label)]);
    });
    kinds.push(['unmatched', t('unmatched only')], ['matched', t('matched only')]);
  }
  const levels = new Set();
  for (const o of m.g.overflow) if (o) levels.add(o);
  for (const level of levels) kinds.push([`overflow:${level}`, t('overflow {level}', { level })]);
  return kinds.map(([value, label]) => ({ value, label, count: filterNodes(m.g, m.cls, value, (i) => m.inStep(i)).length }));
}

/**
 * @param {import('../store.js').StateOf<ToolsState>} store
 * @param {{request: (req: any) => Promise<any>}} client
 * @param {(k: string, p?: Record<string, string | number>) => string} [t]
 */
export function createToolsController(store, client, t = (k, p) => k.replace(/\{(\w+)\}/g, (_, n) => String(p?.[n] ?? ''))) {
  const get = store.get;
  /** @type {{result: object, index: Record<Side, Map<string, number>>} | null} node indexes by name of a result, built on demand */
  let names = null;

  /** @param {string} text @param {boolean} [err] */
  const say = (text, err = false) => store.set({ exportMsg: { text, err } });

  /**
   * Searches a side's node names in the shown micro step.
   * @param {Side} side @param {string} query @param {boolean} regex
   * @returns {{hits: Int32Array, error: string | null}} `error`: the message of an invalid expression, as shown
   */
  function search(side, query, regex) {
    const m = get().models[side];
    if (!m) return { hits: new Int32Array(0), error: null };
    const { hits, error } = searchNames(m.g.names, query, regex, (i) => m.inStep(i));
    return { hits, error: error ? t('Invalid regular expression: {msg}', { msg: error }) : null };
  }

  /** The nodes of a side that a filter choice keeps, in the shown micro step. @param {Side} side @param {string} kind */
  function filter(side, kind) {
    const m = get().models[side];
    if (!m || !kind) return new Int32Array(0);
    return filterNodes(m.g, m.cls, kind, (i) => m.inStep(i));
  }

  /** Node indexes by name, per side, of the shown result. */
  function nameIndex() {
    const r = get().result;
    if (!r) return null;
    if (names?.result !== r) {
      const idx = (/** @type {string[]} */ n) => new Map(n.map((x, i) => [x, i]));
      names = { result: r, index: { npu: idx(r.npu.names), bench: idx(r.bench?.names ?? []) } };
    }
    return names.index;
  }

  /** The NPU nodes of the hand-made pairs, in order. */
  function pairItems() {
    return Int32Array.from([...get().manual.keys()].sort((a, b) => a - b));
  }

  /** A new result: the tools' messages go. */
  function resultShown() {
    say('');
  }

  /**
   * The compare table of every compared tensor, as CSV (built in the worker).
   * @returns {Promise<string | null>} null when there is none (the message says why)
   */
  async function compareCsv() {
    if (!get().result?.bench) {
      say(t('The compare table needs a compare result (two sides).'), true);
      return null;
    }
    try {
      say(t('Exporting the compare table') + '…');
      const { csv, rows } = await client.request({ type: 'exportCsv' });
      say(t('{n} compared tensors exported.', { n: rows }));
      return csv;
    } catch (e) {
      say(e instanceof Error ? e.message : String(e), true);
      return null;
    }
  }

  /**
   * The opened .vis.db with the manual matches made on it (the file itself is not changed).
   * @returns {Promise<{bytes: ArrayBuffer, name: string} | null>}
   */
  async function visDb() {
    const s = get();
    if (s.mode !== 'vis' || s.vis?.kind !== 'db') return null;
    const { bytes } = await client.request({ type: 'exportVis' });
    const name = s.vis.name.replace(/\.gz$/, '').replace(/(\.vis)?\.db$/, '') + '.matched.vis.db';
    return { bytes, name };
  }

  /**
   * A `.vis.config` file's pairs `{npu node: bench node}`, or the message why it is not one.
   * @param {string} text @param {string} file
   * @returns {{pairs: Record<string, string>} | {error: string}}
   */
  function parseConfig(text, file) {
    try {
      return { pairs: JSON.parse(text) };
    } catch (e) {
      return { error: t('{file}: not a JSON file ({msg})', { file, msg: e instanceof Error ? e.message : String(e) }) };
    }
  }

  return { search, filter, filterKinds: (/** @type {Side} */ side) => filterKinds(get(), side, t), nameIndex, pairItems, resultShown, compareCsv, visDb, parseConfig, say };
}
