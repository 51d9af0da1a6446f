// @ts-check
// The view state carried in the URL hash (`#lang=…&step=…&rank=…&micro=…&sel=side:name&on=…&ob=…`):
// parsing and writing it, as pure functions of strings and plain values (no DOM, no `location`).

/** @typedef {import('../protocol.js').Side} Side */

/**
 * @typedef {{lang?: string, step?: number, rank?: number, micro?: number, sel?: {side: Side, name: string}, open: Partial<Record<Side, string[] | '*'>>, switched?: boolean}} HashState
 */

/** Hash keys of the expanded nodes per side. */
const OPEN_KEYS = /** @type {[string, Side][]} */ ([['on', 'npu'], ['ob', 'bench']]);

/** More expanded names than this are not written (the URL would get too long). */
export const MAX_OPEN = 400;

/**
 * @param {string} hash `location.hash`, with or without its `#`
 * @returns {HashState | null}
 */
export function parseHash(hash) {
  const h = hash.replace(/^#/, '');
  if (!h) return null;
  const p = new URLSearchParams(h);
  const num = (/** @type {string} */ k) => (p.has(k) && Number.isInteger(Number(p.get(k))) ? Number(p.get(k)) : undefined);
  /** @type {HashState} */
  const st = { lang: p.get('lang') ?? undefined, step: num('step'), rank: num('rank'), micro: num('micro'), open: {} };
  const sel = p.get('sel');
  if (sel && /^(npu|bench):/.test(sel)) {
    const k = sel.indexOf(':');
    st.sel = { side: /** @type {Side} */ (sel.slice(0, k)), name: sel.slice(k + 1) };
  }
  for (const [key, side] of OPEN_KEYS) {
    const v = p.get(key);
    if (v === '*') st.open[side] = '*';
    else if (v) st.open[side] = v.split(',').filter(Boolean);
  }
  return st;
}

/**
 * The hash of a view: `open[side]` lists the expanded nodes' names, `all[side]` says whether every
 * node with children is expanded (written `*`).
 * @param {{lang: string, step?: string, rank?: string, micro?: number, sel?: {side: Side, name: string} | null,
 *   open?: Partial<Record<Side, string[]>>, all?: Partial<Record<Side, boolean>>}} v
 */
export function buildHash(v) {
  const p = new URLSearchParams();
  p.set('lang', v.lang);
  if (v.step !== undefined) p.set('step', v.step);
  if (v.rank !== undefined) p.set('rank', v.rank);
  if (v.micro !== undefined && v.micro >= 0) p.set('micro', String(v.micro));
  if (v.sel) p.set('sel', `${v.sel.side}:${v.sel.name}`);
  for (const [key, side] of OPEN_KEYS) {
    const open = v.open?.[side] ?? [];
    if (v.all?.[side] && open.length) p.set(key, '*');
    else if (open.length && open.length <= MAX_OPEN) p.set(key, open.join(','));
  }
  return `#${p.toString()}`;
}

/**
 * The view of the shown result as `buildHash` takes it: the step and rank chosen (when their
 * selectors are shown), the micro step, the selected node's name, the expanded nodes of each pane.
 * @param {{result: import('../protocol.js').RunResult | null, models: Record<Side, import('../tree.js').TreeModel | null>, selection: {side: Side, index: number} | null}} s
 * @param {string} lang @param {{step?: string, rank?: string}} chosen
 * @returns {Parameters<typeof buildHash>[0]}
 */
export function viewOf(s, lang, chosen) {
  /** @type {Parameters<typeof buildHash>[0] & {open: Partial<Record<Side, string[]>>, all: Partial<Record<Side, boolean>>}} */
  const v = { lang, open: {}, all: {} };
  if (!s.result) return v;
  v.step = chosen.step;
  v.rank = chosen.rank;
  v.micro = s.models.npu?.micro ?? -1;
  if (s.selection) {
    const g = s.selection.side === 'npu' ? s.result.npu : s.result.bench;
    if (g) v.sel = { side: s.selection.side, name: g.names[s.selection.index] };
  }
  for (const side of /** @type {Side[]} */ (['npu', 'bench'])) {
    const m = s.models[side];
    if (!m) continue;
    const open = [];
    let all = true;
    for (let i = 1; i < m.n; i++) {
      if (!m.hasChildren(i)) continue;
      if (m.expanded[i]) open.push(m.g.names[i]);
      else all = false;
    }
    v.open[side] = open;
    v.all[side] = all;
  }
  return v;
}

/**
 * What keeping the URL's hash asks of the page (app.js implements it over `location` and the selectors).
 * @typedef {object} HashUi
 * @property {() => string} lang
 * @property {() => {step?: string, rank?: string}} chosen  the step and rank chosen, where their selectors are shown
 * @property {(key: 'step' | 'rank', value: number) => boolean} choose  chooses a listed step or rank; false when it is already chosen, not listed or not shown
 * @property {() => void} rerun  runs the step and rank chosen
 * @property {(hash: string) => void} replace  writes the hash (unless it is already the URL's)
 * @property {(k: number) => void} setMicroStep
 * @property {(side: Side) => void} refresh  a graph's expansion changed
 * @property {(side: Side, i: number) => void} select
 * @property {() => Record<Side, Map<string, number>> | null} nameIndex  node indexes by name of the shown result
 * @property {(fn: () => void, ms: number) => unknown} [later]  setTimeout
 * @property {(t: unknown) => void} [cancel]  clearTimeout
 */

/**
 * The URL hash carries the view: written (debounced) after every change of it, and a view from the
 * URL applied once its files are shown (another step or rank first, by a re-run).
 * @param {import('../store.js').StateOf<Parameters<typeof viewOf>[0]>} store
 * @param {HashUi} ui
 */
export function createHashController(store, ui) {
  const later = ui.later ?? ((fn, ms) => setTimeout(fn, ms));
  const cancel = ui.cancel ?? ((t) => clearTimeout(/** @type {any} */ (t)));
  /** @type {unknown} */
  let timer = null;
  /** the hash last written */
  let last = '';
  /** @type {HashState | null} view state waiting for its files */
  let pending = null;
  /** a view state from the URL is being applied (the hash is not written meanwhile) */
  let restoring = false;

  /** Writes the view's hash (150 ms after the last change). */
  function write() {
    if (restoring) return;
    cancel(timer);
    timer = later(() => {
      if (restoring) return;
      last = buildHash(viewOf(store.get(), ui.lang(), store.get().result ? ui.chosen() : {}));
      ui.replace(last);
    }, 150);
  }

  /** Applies the view state from the URL once its files are shown. */
  function apply() {
    const h = pending;
    const r = store.get().result;
    if (!h || !r) return;
    // Another step or rank first (a re-run; a new result comes back here).
    if (!h.switched) {
      h.switched = true;
      let rerun = false;
      for (const [key, want] of /** @type {['step' | 'rank', number | undefined][]} */ ([['step', h.step], ['rank', h.rank]])) {
        if (want !== undefined && ui.choose(key, want)) rerun = true;
      }
      if (rerun) {
        later(() => ui.rerun(), 0);
        return;
      }
    }
    pending = null;
    restoring = true;
    try {
      if (h.micro !== undefined && h.micro >= 0 && r.microSteps > h.micro) ui.setMicroStep(h.micro);
      const idx = ui.nameIndex();
      for (const side of /** @type {Side[]} */ (['npu', 'bench'])) {
        const m = store.get().models[side];
        const open = h.open[side];
        if (!m || !open || !idx) continue;
        if (open === '*') m.setAll(true);
        else for (const name of open) {
          const i = idx[side].get(name);
          if (i !== undefined) m.setExpanded(i, true);
        }
        ui.refresh(side);
      }
      if (h.sel && idx) {
        const i = idx[h.sel.side].get(h.sel.name);
        if (i !== undefined) ui.select(h.sel.side, i);
      }
    } finally {
      restoring = false;
    }
    write();
  }

  return {
    write,
    apply,
    /** A view state to apply once its files are shown (from the URL). @param {HashState | null} h */
    setPending(h) {
      pending = h;
    },
    /** The hash last written by the page. */
    get last() {
      return last;
    },
  };
}
