// @ts-check
// Manual matching: picks, Match/Unmatch, undo/redo, the hand-made pairs, and keeping them across
// re-runs. No DOM, no worker code: it takes the store and the client (anything with
// `request({type: 'match', ops})` answering the core's change list) and changes only the store.
//
// The hand-made pairs of a result are remembered by node names per (step, rank), as msprobe's
// `.vis.config` keys them (`<tag>_<step>_<rank>.vis.config`), and re-applied by name to the next
// result of the same (step, rank), whatever made it (a step change, `-oc`, the mapping editor).
import { binOf } from '../colors.js';

/** @typedef {import('../protocol.js').Side} Side */
/** @typedef {import('../protocol.js').RunResult} RunResult */
/** @typedef {import('../protocol.js').MatchOp} MatchOp */
/** @typedef {import('../protocol.js').Changes} Changes */

/**
 * One undoable match operation: per changed node `[old matched, new matched, old precision, new precision]`
 * (NPU) or `[old matched, new matched]` (Bench), and the hand-made pairs before and after.
 * @typedef {object} HistoryEntry
 * @property {string} label
 * @property {Map<number, [number, number, number, number]>} npu
 * @property {Map<number, [number, number]>} bench
 * @property {Map<number, number>} manualBefore
 * @property {Map<number, number>} manualAfter
 */

/**
 * The part of the page's state this controller reads and writes.
 * @typedef {object} ManualState
 * @property {RunResult | null} result
 * @property {import('../colors.js').Classes | null} classes
 * @property {number} resultVersion  bumped when the shown result's columns change in place
 * @property {string} runKey  `step:rank` of the shown result ('' when none)
 * @property {string | null} matchBlocked  why matching cannot work on the shown result (null: it can)
 * @property {Record<Side, number>} pick
 * @property {Map<number, number>} manual  hand-made pairs: NPU index → Bench index
 * @property {{undo: HistoryEntry[], redo: HistoryEntry[]}} history
 * @property {boolean} matching
 * @property {{text: string, err: boolean}} matchMsg
 * @property {Map<string, [string, string][]>} kept  hand-made pairs by names, per run key
 */

/** @type {Pick<ManualState, 'pick' | 'manual' | 'history' | 'matching' | 'matchMsg'>} */
export const MANUAL_INITIAL = {
  pick: { npu: -1, bench: -1 },
  manual: new Map(),
  history: { undo: [], redo: [] },
  matching: false,
  matchMsg: { text: '', err: false },
};

/** The run key of a result: msprobe's `.vis.config` keys manual matches by step and rank. */
export const runKey = (/** @type {number} */ step, /** @type {number} */ rank) => `${step}:${rank}`;

/**
 * The forward/backward twin of a node name (`….forward.0` ↔ `….backward.0`, `Torch.cat.0.forward` ↔
 * `….backward`), as tb-graph-ascend matches "the opposite node" too; null when the name has neither.
 * @param {string} name
 */
export function twinName(name) {
  const m = /\.(forward|backward)(?=\.|$)(?!.*\.(forward|backward)(\.|$))/.exec(name);
  if (!m) return null;
  const other = m[1] === 'forward' ? 'backward' : 'forward';
  return name.slice(0, m.index) + '.' + other + name.slice(m.index + m[0].length);
}

/** Node type words. @param {number} t */
const typeWord = (t) => (t === 0 ? 'module' : t === 1 ? 'API' : 'API collection');

/**
 * The module path of a module node name (`Module.a.b.Linear.forward.0` → `Module.a.b.`), as the core's
 * recursive match carries a pair's renaming down to its children (compare.rs `module_path`).
 * @param {string} name
 */
function modulePath(name) {
  const segs = name.split('.');
  if (segs.length < 5 || !(segs[0] === 'Module' || segs[0] === 'Cell')) return null;
  return `${segs.slice(0, segs.length - 3).join('.')}.`;
}

/**
 * Which descendants a recursive match of (n, b) pairs, by the core's rule (a child pairs with the
 * Bench child of the same name, or of its name with the pair's module path swapped), and which it
 * leaves, with the name it looked for.
 * @param {import('../protocol.js').Graph} gn @param {import('../protocol.js').Graph} gb
 * @param {number} n @param {number} b
 * @returns {{paired: [number, number][], missed: {npu: number, wanted: string}[]}}
 */
export function recursivePlan(gn, gb, n, b) {
  /** @type {[number, number][]} */
  const paired = [];
  /** @type {{npu: number, wanted: string}[]} */
  const missed = [];
  const kids = (/** @type {import('../protocol.js').Graph} */ g, /** @type {number} */ i) => {
    const out = [];
    for (let c = i + 1; c < g.subtreeEnd[i]; c = g.subtreeEnd[c]) out.push(c);
    return out;
  };
  const todo = [[n, b]];
  while (todo.length) {
    const [x, y] = /** @type {[number, number]} */ (todo.pop());
    const pn = modulePath(gn.names[x]);
    const pb = modulePath(gb.names[y]);
    const bench = new Map(kids(gb, y).map((c) => [gb.names[c], c]));
    for (const c of kids(gn, x)) {
      const name = gn.names[c];
      const swapped = pn && pb && name.startsWith(pn) ? pb + name.slice(pn.length) : null;
      const hit = bench.get(name) ?? (swapped ? bench.get(swapped) : undefined);
      if (hit !== undefined) {
        paired.push([c, hit]);
        todo.push([c, hit]);
      } else missed.push({ npu: c, wanted: swapped ?? name });
    }
  }
  return { paired, missed };
}

/**
 * @param {import('../store.js').StateOf<ManualState>} store the page's store (any state holding these fields)
 * @param {{request: (req: any) => Promise<any>}} client
 * @param {(key: string, params?: Record<string, string | number>) => string} [t] translation
 */
export function createManualController(store, client, t = (k, p) => k.replace(/\{(\w+)\}/g, (_, n) => String(p?.[n] ?? ''))) {
  const get = store.get;
  /** @param {string} text @param {boolean} [err] */
  const say = (text, err = false) => store.set({ matchMsg: { text, err } });

  /** Whether the shown result can be matched by hand (a compare of dump folders, in this worker). */
  function canMatch() {
    const s = get();
    return !s.matchBlocked && !!s.result?.bench && s.result.graphType === 'compare';
  }

  /** Names of the hand-made pairs, in NPU order. @returns {[string, string][]} */
  function pairsByName() {
    const { result: r, manual } = get();
    if (!r || !r.bench) return [];
    const b = r.bench;
    return [...manual].sort((x, y) => x[0] - y[0]).map(([i, j]) => /** @type {[string, string]} */ ([r.npu.names[i], b.names[j]]));
  }

  /**
   * A node chosen in a pane. `click`: it becomes the pick of its side, and a matched node brings its
   * counterpart as the other side's pick unless that side holds a grey (unmatched) pick, which stays;
   * `ctrl`: only its side's pick; `keyboard` (moving in the outline): the picks stay.
   * @param {Side} side @param {number} i @param {'click' | 'ctrl' | 'keyboard'} how
   */
  function pickNode(side, i, how) {
    const r = get().result;
    if (!r?.bench || how === 'keyboard') return;
    const g = side === 'npu' ? r.npu : r.bench;
    const og = side === 'npu' ? r.bench : r.npu;
    const other = side === 'npu' ? 'bench' : 'npu';
    const pick = { ...get().pick, [side]: i };
    const peer = g.matched[i];
    const held = pick[other];
    const greyHeld = held >= 0 && og.matched[held] < 0;
    if (how === 'click' && peer >= 0 && !greyHeld) pick[other] = peer;
    store.set({ pick });
  }

  /** @param {Record<Side, number>} pick */
  function setPicks(pick) {
    store.set({ pick: { ...pick } });
  }

  /**
   * What Match would do with the current picks, said before it happens: the pair, the matches it
   * displaces, the backward twin it matches too, whether descendants follow; or why it cannot.
   * @param {boolean} recursive
   * @returns {{ok: boolean, text: string, ops: MatchOp[]}}
   */
  function preview(recursive) {
    const s = get();
    const r = s.result;
    if (s.matchBlocked) return { ok: false, text: s.matchBlocked, ops: [] };
    if (!r || !r.bench || r.graphType !== 'compare') return { ok: false, text: t('Manual matching needs a compare result (two sides).'), ops: [] };
    const { npu, bench } = s.pick;
    if (npu < 0 || bench < 0) return { ok: false, text: t('Pick a node on each side: click it (Ctrl/⌘-click picks without selecting).'), ops: [] };
    const gn = r.npu;
    const gb = r.bench;
    if (gn.matched[npu] === bench) return { ok: false, text: t('These two nodes are already matched.'), ops: [] };
    if (gn.nodeType[npu] !== gb.nodeType[bench] && (gn.nodeType[npu] === 0 || gb.nodeType[bench] === 0)) {
      return {
        ok: false,
        text: t('Cannot match a {a} with a {b}: msprobe matches only nodes of the same type.', { a: t(typeWord(gn.nodeType[npu])), b: t(typeWord(gb.nodeType[bench])) }),
        ops: [],
      };
    }
    /** @type {MatchOp[]} */
    const ops = [{ op: 'match', npu, bench, recursive }];
    const parts = [t('Match will pair {a} ⇄ {b}.', { a: gn.names[npu], b: gb.names[bench] })];
    const kind = (/** @type {number} */ i) => (s.manual.has(i) ? t('manual') : t('automatic'));
    if (gn.matched[npu] >= 0) parts.push(t('It replaces the {kind} match {a} ⇄ {b}.', { kind: kind(npu), a: gn.names[npu], b: gb.names[gn.matched[npu]] }));
    if (gb.matched[bench] >= 0) parts.push(t('It replaces the {kind} match {a} ⇄ {b}.', { kind: kind(gb.matched[bench]), a: gn.names[gb.matched[bench]], b: gb.names[bench] }));
    const tn = twinName(gn.names[npu]);
    const tb = twinName(gb.names[bench]);
    if (tn && tb) {
      const i = gn.names.indexOf(tn);
      const j = gb.names.indexOf(tb);
      if (i >= 0 && j >= 0 && gn.matched[i] !== j && gn.nodeType[i] === gb.nodeType[j]) {
        ops.push({ op: 'match', npu: i, bench: j, recursive });
        parts.push(t('Its {dir} twin {a} ⇄ {b} is matched too.', { dir: t(/\.backward(\.|$)/.test(tn) ? 'backward' : 'forward'), a: tn, b: tb }));
      }
    }
    if (recursive) {
      const plan = recursivePlan(gn, gb, npu, bench);
      const total = plan.paired.length + plan.missed.length;
      if (total) parts.push(t('Recursive: {k} of {n} descendants have a Bench node of the same name below it.', { k: plan.paired.length, n: total }));
    }
    return { ok: true, text: parts.join(' '), ops };
  }

  /**
   * Applies a change list of the core to the shown result: columns and classes, in place, then
   * `resultVersion` is bumped so views recount and redraw.
   * @param {Changes} ch
   */
  function applyChanges(ch) {
    const { result: r, classes: c } = get();
    if (!r || !r.bench || !c || !c.bench) return;
    const g = r.npu;
    const b = r.bench;
    const nRanged = c.bins.length - 2;
    for (const [i, p, m] of ch.npu) {
      g.precision[i] = p === null ? NaN : p;
      g.matched[i] = m;
    }
    for (const [j, , m] of ch.bench) b.matched[j] = m;
    /** @type {Set<number>} */
    const benchTouched = new Set(ch.bench.map((x) => x[0]));
    for (const [i] of ch.npu) {
      c.npu[i] = g.matched[i] < 0 ? c.unmatched : binOf(c.bins, nRanged, g.precision[i], c.none);
      if (g.matched[i] >= 0) benchTouched.add(g.matched[i]);
    }
    for (const j of benchTouched) {
      const m = b.matched[j];
      c.bench[j] = m < 0 ? c.unmatched : Number.isFinite(b.precision[j]) ? binOf(c.bins, nRanged, b.precision[j], c.none) : c.npu[m];
    }
    store.set((s) => ({ resultVersion: s.resultVersion + 1 }));
  }

  /**
   * Sends operations to the core as one step and applies the answer.
   * @param {MatchOp[]} ops @param {string} label
   * @returns {Promise<HistoryEntry | null>}
   */
  async function runOps(ops, label) {
    const r = get().result;
    if (!ops.length || !r || !r.bench) return null;
    const ch = /** @type {Changes} */ (await client.request({ type: 'match', ops }));
    if (get().result !== r) return null;
    /** @type {HistoryEntry} */
    const entry = { label, npu: new Map(), bench: new Map(), manualBefore: new Map(get().manual), manualAfter: new Map() };
    for (const [i, p, m] of ch.npu) entry.npu.set(i, [r.npu.matched[i], m, r.npu.precision[i], p === null ? NaN : p]);
    for (const [j, , m] of ch.bench) entry.bench.set(j, [r.bench.matched[j], m]);
    applyChanges(ch);
    return entry;
  }

  /** Remembers the hand-made pairs of the shown result by names, under its run key. */
  function keep() {
    const s = get();
    if (!s.runKey || !s.result?.bench) return;
    const kept = new Map(s.kept);
    const pairs = pairsByName();
    if (pairs.length) kept.set(s.runKey, pairs);
    else kept.delete(s.runKey);
    store.set({ kept });
  }

  /**
   * One user operation (one undo step).
   * @param {MatchOp[]} ops @param {string} label
   */
  async function userOps(ops, label) {
    if (!canMatch() || get().matching) return null;
    store.set({ matching: true });
    try {
      const entry = await runOps(ops, label);
      if (!entry) return null;
      const r = /** @type {RunResult} */ (get().result);
      const manual = new Map(get().manual);
      for (const [i, [oldM, newM]] of entry.npu) if (newM >= 0 && newM !== oldM) manual.set(i, newM);
      for (const [i, b] of [...manual]) if (r.npu.matched[i] !== b) manual.delete(i);
      entry.manualAfter = new Map(manual);
      const history = get().history;
      if (entry.npu.size || entry.bench.size) store.set({ manual, history: { undo: [...history.undo, entry], redo: [] } });
      else store.set({ manual });
      keep();
      return entry;
    } catch (e) {
      say(e instanceof Error ? e.message : String(e), true);
      return null;
    } finally {
      store.set({ matching: false });
    }
  }

  /**
   * Match of the two picks (with the backward twin; descendants when recursive). The message says
   * what changed: pairs made, matches displaced, and for a recursive match the descendants left and why.
   * @param {boolean} recursive
   */
  async function match(recursive) {
    const plan = preview(recursive);
    if (!plan.ok) {
      say(plan.text, true);
      return null;
    }
    const r = /** @type {RunResult} */ (get().result);
    const gb = /** @type {import('../protocol.js').Graph} */ (r.bench);
    const { npu, bench } = get().pick;
    const before = { n: r.npu.matched[npu], b: gb.matched[bench] };
    const rec = recursive ? recursivePlan(r.npu, gb, npu, bench) : null;
    const entry = await userOps(plan.ops, 'match');
    if (!entry) return null;
    const linked = [...entry.npu.values()].filter(([o, n]) => n >= 0 && n !== o).length;
    const parts = [t('Matched {n} NPU node(s).', { n: linked })];
    if (before.n >= 0) parts.push(t('Replaced: {a} ⇄ {b}.', { a: r.npu.names[npu], b: gb.names[before.n] }));
    if (before.b >= 0 && before.b !== npu) parts.push(t('Replaced: {a} ⇄ {b}.', { a: r.npu.names[before.b], b: gb.names[bench] }));
    if (plan.ops.length > 1) parts.push(t('Twin matched too: {a} ⇄ {b}.', { a: r.npu.names[/** @type {any} */ (plan.ops[1]).npu], b: gb.names[/** @type {any} */ (plan.ops[1]).bench] }));
    if (rec && rec.missed.length) {
      const ex = rec.missed[0];
      parts.push(t('Recursive: {k} of {n} descendants matched; {m} have no Bench node of the same name below {b} (e.g. {x}: no {w}).', {
        k: rec.paired.length, n: rec.paired.length + rec.missed.length, m: rec.missed.length, b: gb.names[bench], x: r.npu.names[ex.npu], w: ex.wanted,
      }));
    }
    say(parts.join(' '));
    return entry;
  }

  /**
   * The twin pair of a matched pair `(i, j)` (NPU, Bench): the indexes of their forward/backward twins
   * when those are matched to each other, else null.
   * @param {number} i @param {number} j
   */
  function twinPair(i, j) {
    const r = get().result;
    if (!r || !r.bench || i < 0 || j < 0) return null;
    const tn = twinName(r.npu.names[i]);
    const tb = twinName(r.bench.names[j]);
    if (!tn || !tb) return null;
    const ti = r.npu.names.indexOf(tn);
    const tj = r.bench.names.indexOf(tb);
    return ti >= 0 && tj >= 0 && r.npu.matched[ti] === tj ? [ti, tj] : null;
  }

  /**
   * Removes the match of a node, and of its forward/backward twin when the twins are matched to
   * each other (as Match pairs them together).
   * @param {Side} side @param {number} index
   */
  async function unmatch(side, index) {
    const r = get().result;
    const i = side === 'npu' ? index : r?.bench?.matched[index] ?? -1;
    const j = side === 'npu' ? r?.npu.matched[index] ?? -1 : index;
    const twin = twinPair(i, j);
    /** @type {MatchOp[]} */
    const ops = [{ op: 'unmatch', side, index }];
    if (twin) ops.push({ op: 'unmatch', side: 'npu', index: twin[0] });
    const entry = await userOps(ops, 'unmatch');
    if (entry && r) {
      say(twin
        ? t('Unmatched, with its twin {a} ⇄ {b}.', { a: r.npu.names[twin[0]], b: /** @type {import('../protocol.js').Graph} */ (r.bench).names[twin[1]] })
        : t('Unmatched.'));
    }
    return entry;
  }

  /**
   * Brings the changed nodes of a history entry back to one of its two states.
   * @param {HistoryEntry} entry @param {0 | 1} want 0: before the operation, 1: after
   */
  async function restore(entry, want) {
    const r = /** @type {RunResult} */ (get().result);
    const g = r.npu;
    const b = /** @type {import('../protocol.js').Graph} */ (r.bench);
    /** @type {MatchOp[]} */
    const ops = [];
    for (const [i, v] of entry.npu) if (g.matched[i] >= 0 && g.matched[i] !== v[want]) ops.push({ op: 'unmatch', side: 'npu', index: i });
    for (const [j, v] of entry.bench) if (b.matched[j] >= 0 && b.matched[j] !== v[want]) ops.push({ op: 'unmatch', side: 'bench', index: j });
    for (const [i, v] of entry.npu) if (v[want] >= 0 && g.matched[i] !== v[want]) ops.push({ op: 'match', npu: i, bench: v[want], recursive: false });
    await runOps(ops, want ? 'redo' : 'undo');
    store.set({ manual: new Map(want ? entry.manualAfter : entry.manualBefore) });
    let differ = 0;
    const same = (/** @type {number} */ x, /** @type {number} */ y) => x === y || (Number.isNaN(x) && Number.isNaN(y));
    for (const [i, v] of entry.npu) if (g.matched[i] !== v[want] || !same(g.precision[i], v[want + 2])) differ++;
    for (const [j, v] of entry.bench) if (b.matched[j] !== v[want]) differ++;
    return differ;
  }

  /** @param {boolean} redo */
  async function undoRedo(redo) {
    if (!canMatch() || get().matching) return;
    const h = get().history;
    const from = [...(redo ? h.redo : h.undo)];
    const to = [...(redo ? h.undo : h.redo)];
    const entry = from.pop();
    if (!entry) return;
    store.set({ matching: true });
    try {
      const differ = await restore(entry, redo ? 1 : 0);
      to.push(entry);
      store.set({ history: redo ? { undo: to, redo: from } : { undo: from, redo: to } });
      keep();
      say(differ ? t('Could not restore exactly: {n} node(s) differ.', { n: differ }) : t(redo ? 'Redone: {label}.' : 'Undone: {label}.', { label: t(entry.label) }), differ > 0);
    } catch (e) {
      say(e instanceof Error ? e.message : String(e), true);
    } finally {
      store.set({ matching: false });
    }
  }

  /**
   * Match operations that re-apply pairs given by names to the shown result.
   * @param {[string, string][]} pairs
   */
  function opsByName(pairs) {
    const r = get().result;
    /** @type {MatchOp[]} */
    const ops = [];
    let already = 0;
    let missing = 0;
    if (!r || !r.bench) return { ops, already, missing: pairs.length };
    const ni = new Map(r.npu.names.map((n, i) => [n, i]));
    const bi = new Map(r.bench.names.map((n, i) => [n, i]));
    for (const [n, b] of pairs) {
      const i = ni.get(n);
      const j = bi.get(b);
      if (i === undefined || j === undefined) missing++;
      else if (r.npu.matched[i] === j) already++;
      else ops.push({ op: 'match', npu: i, bench: j, recursive: false });
    }
    return { ops, already, missing };
  }

  /**
   * A new result is shown: picks, pairs and history start empty. The pairs kept for its run key
   * are re-applied by name (one undo step), as the mapping editor does; `carry` (pairs of the result
   * it replaces, when a re-run keeps the same step and rank) is merged in.
   * @param {string} key the new result's run key
   * @param {[string, string][]} [carry]
   * @returns {Promise<{reapplied: number, already: number, missing: number}>}
   */
  async function resultShown(key, carry = []) {
    const kept = get().kept.get(key) ?? [];
    const seen = new Set(kept.map(([n]) => n));
    const pairs = [...kept, ...carry.filter(([n]) => !seen.has(n))];
    store.set({ ...MANUAL_INITIAL, pick: { npu: -1, bench: -1 }, manual: new Map(), history: { undo: [], redo: [] }, runKey: key });
    if (!pairs.length || !canMatch()) return { reapplied: 0, already: 0, missing: pairs.length };
    const { ops, already, missing } = opsByName(pairs);
    if (ops.length) await userOps(ops, 're-apply manual matches');
    if (ops.length || missing) {
      say(missing
        ? t('Re-applied {n} manual pair(s) by name; {m} name nodes not in this result.', { n: ops.length + already, m: missing })
        : t('Re-applied {n} manual pair(s) by name.', { n: ops.length + already }), missing > 0);
    }
    return { reapplied: ops.length, already, missing };
  }

  /**
   * The hand-made pairs that an action would discard for good: those of the shown result when the
   * next result cannot take them back (another worker, a file, the demo). Pairs under other run
   * keys are kept by name and come back with their step and rank.
   */
  function atRisk() {
    return get().manual.size;
  }

  /** Forgets every kept pair (a new set of folders). */
  function forgetAll() {
    store.set({ kept: new Map() });
  }

  /**
   * Re-applies a `.vis.config` object `{npu node: bench node}` by names (one undo step).
   * @param {unknown} obj @param {string} file
   */
  async function loadConfig(obj, file) {
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) {
      say(t('{file}: expected a JSON object {npu node: bench node}', { file }), true);
      return null;
    }
    /** @type {[string, string][]} */
    const pairs = [];
    let bad = 0;
    for (const [n, b] of Object.entries(obj)) {
      if (typeof b === 'string') pairs.push([n, b]);
      else bad++;
    }
    const { ops, already, missing } = opsByName(pairs);
    const notFound = missing + bad;
    if (!ops.length && !already) {
      say(t('{file}: none of its {n} pair(s) name nodes of this result.', { file, n: notFound }), true);
      return null;
    }
    const entry = ops.length ? await userOps(ops, 'load') : null;
    if (entry || !ops.length) say(t('Applied {ok} pair(s) from {file}; {bad} not found.', { ok: ops.length + already, file, bad: notFound }), notFound > 0);
    return entry;
  }

  /** The `.vis.config` text of the hand-made pairs. */
  function configText() {
    /** @type {Record<string, string>} */
    const out = {};
    for (const [n, b] of pairsByName()) out[n] = b;
    return JSON.stringify(out, null, 2) + '\n';
  }

  return { canMatch, pickNode, setPicks, preview, match, unmatch, undoRedo, userOps, runOps, applyChanges, resultShown, pairsByName, opsByName, atRisk, forgetAll, keep, loadConfig, configText, say };
}
