// @ts-check
// The page: inputs, load orchestration, the two panes, selection/expansion sync, legend and details.
import { CoreClient, CoreError } from './client.js';
import { SIDES, STAGES, unpackRunResult } from './protocol.js';
import { filesFromInput, filesFromDrop, sendFiles, readText, isYaml } from './loader.js';
import { classify, OVERFLOW_COLORS } from './colors.js';
import { TreeModel } from './tree.js';
import { GraphView } from './graphview.js';
import { Outline } from './outline.js';
import { DetailsPanel } from './details.js';

/** @typedef {import('./protocol.js').Side} Side */
/** @typedef {import('./protocol.js').RunResult} RunResult */
/** @typedef {import('./protocol.js').Layout} Layout */
/** @typedef {import('./loader.js').SourceFile} SourceFile */

/**
 * What the entry point (served site or single file) provides.
 * @typedef {object} Host
 * @property {() => Worker} makeWorker
 * @property {() => (ArrayBuffer | undefined)} wasmBytes  module bytes for initSync, or undefined (worker fetches)
 * @property {() => Promise<Demo>} loadDemo
 * @property {() => Promise<string[]>} listTemplates  bundled mapping templates (mappings/*.yaml)
 * @property {(name: string) => Promise<string>} getTemplate
 */

/**
 * @typedef {object} Demo
 * @property {string} label
 * @property {{label: string, files: SourceFile[]}} npu
 * @property {{label: string, files: SourceFile[]}} bench
 * @property {{name: string, text: string} | null} mapping
 */

/** `root`: the chosen folder's name ('' for loose files), which the core puts in front of paths in messages. */
/** @typedef {{label: string, root: string, files: SourceFile[]}} Source */
/** @typedef {{key: string, name: string, text: string}} MappingChoice */

/** @param {string} id */
function $(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error(`missing #${id}`);
  return e;
}

/** @param {Side} s @returns {Side} */
const otherSide = (s) => (s === 'npu' ? 'bench' : 'npu');

/** @param {number} n */
function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** @param {Host} host */
export function startApp(host) {
  // Debug/test knobs: ?chunk=<bytes>&stream=<bytes> force small chunks and the core's streaming path.
  const params = new URLSearchParams(location.search);
  const knob = (/** @type {string} */ k) => {
    const v = Number(params.get(k));
    return Number.isInteger(v) && v > 0 ? v : undefined;
  };
  const chunkSize = knob('chunk');
  const client = new CoreClient(host.makeWorker, host.wasmBytes, knob('stream'));

  const S = {
    /** @type {Record<Side, Source | null>} sources the user chose */
    sources: { npu: null, bench: null },
    /** @type {Record<Side, Source | null>} sources of the session whose result is shown */
    applied: { npu: null, bench: null },
    /** @type {MappingChoice[]} */
    mappings: [],
    /** @type {RunResult | null} */
    result: null,
    /** @type {import('./colors.js').Classes | null} */
    classes: null,
    /** @type {Record<Side, TreeModel | null>} */
    models: { npu: null, bench: null },
    /** @type {{side: Side, index: number} | null} */
    selection: null,
    /** @type {{npu: Layout | null, bench: Layout | null} | null} */
    layout: null,
    /** worker generation that holds the current session (-1: none) */
    sessionGen: -1,
    loadSeq: 0,
    /** a load or re-run is waiting for the worker */
    running: false,
    detailSeq: 0,
    loads: 0,
    /** which pane shows the single graph of a build result */
    buildSide: /** @type {Side} */ ('npu'),
  };

  // ---------------------------------------------------------------- elements
  const panesEl = $('panes');
  const details = new DetailsPanel($('details'));
  /** @type {Record<Side, GraphView>} */
  const views = /** @type {any} */ ({});
  /** @type {Record<Side, Outline>} */
  const outlines = /** @type {any} */ ({});
  for (const side of SIDES) {
    views[side] = new GraphView(/** @type {HTMLCanvasElement} */ ($(`${side}-canvas`)), {
      onSelect: (i) => select(paneToGraph(side), i, 'canvas'),
      onToggle: (i) => toggle(paneToGraph(side), i),
    });
    outlines[side] = new Outline($(`${side}-outline`), side, {
      onSelect: (i) => select(paneToGraph(side), i, 'outline'),
      onToggle: (i, open) => toggle(paneToGraph(side), i, open),
    });
    const pane = $(`${side}-pane`);
    for (const b of Array.from(pane.querySelectorAll('[data-act]'))) {
      b.addEventListener('click', () => {
        const act = /** @type {HTMLElement} */ (b).dataset.act;
        const gs = paneToGraph(side);
        const m = S.models[gs];
        if (act === 'fit') views[side].fit();
        else if (m && (act === 'expand-all' || act === 'collapse-all')) {
          m.setAll(act === 'expand-all');
          refresh(gs);
          views[side].fit();
        }
      });
    }
  }

  // In a build result the single graph lives in the `npu` slot; show it in the pane of the loaded side.
  /** @param {Side} pane @returns {Side} */
  function paneToGraph(pane) {
    return S.result && !S.result.bench ? 'npu' : pane;
  }
  /** @param {Side} graph @returns {Side} */
  function graphToPane(graph) {
    return S.result && !S.result.bench ? 'npu' : graph;
  }

  // ---------------------------------------------------------------- progress & errors
  const progressEl = $('progress');
  const progressStage = $('progress-stage');
  const progressBar = /** @type {HTMLProgressElement} */ ($('progress-bar'));
  /** @param {string} stage @param {number} [done] @param {number} [total] */
  function progress(stage, done, total) {
    progressEl.hidden = false;
    progressEl.dataset.stage = stage;
    if (done !== undefined && total) {
      progressStage.textContent = `${stage} — ${fmtBytes(done)} of ${fmtBytes(total)}`;
      progressBar.value = done / total;
    } else {
      progressStage.textContent = `${stage}…`;
      progressBar.removeAttribute('value');
    }
  }
  function progressDone() {
    progressEl.hidden = true;
  }

  /** @param {'npu' | 'bench' | 'mapping' | 'load'} where @param {string} [msg] */
  function setError(where, msg) {
    const el = $(`${where}-error`);
    el.textContent = msg ?? '';
    el.hidden = !msg;
  }

  /** @param {string} state */
  function setState(state) {
    document.body.dataset.state = state;
  }

  // ---------------------------------------------------------------- loading
  function runOptions() {
    const step = Number(/** @type {HTMLSelectElement} */ ($('step-select')).value || 0);
    const rank = Number(/** @type {HTMLSelectElement} */ ($('rank-select')).value || 0);
    const lm = /** @type {HTMLInputElement} */ ($('opt-lm')).checked;
    const choice = currentMapping();
    return {
      step,
      rank,
      layerMapping: lm ? (choice ? choice.text : '') : null,
      layerMappingName: choice ? choice.name.replace(/^[a-z]+: /, '') : undefined,
      fuzzy: /** @type {HTMLInputElement} */ ($('opt-fm')).checked,
      overflowCheck: /** @type {HTMLInputElement} */ ($('opt-oc')).checked,
    };
  }

  /**
   * Which input an error belongs to. Errors of file requests carry their side; the core's run/layout
   * messages start with the file's path, which begins with the side's folder name (setRootName).
   * @param {unknown} e
   * @param {Side[]} changed sides whose files were (re)chosen in this load
   * @returns {'npu' | 'bench' | 'mapping' | 'load'}
   */
  function errorPlace(e, changed) {
    if (e instanceof CoreError && e.side) return e.side;
    const msg = e instanceof Error ? e.message : String(e);
    const mentions = (/** @type {Side} */ side) => {
      const root = S.sources[side]?.root;
      return !!root && (msg.startsWith(`${root}/`) || msg.startsWith(`${root}:`) || msg.includes(` ${root}/`));
    };
    const inNpu = mentions('npu');
    const inBench = mentions('bench');
    if (inNpu !== inBench && S.sources.npu?.root !== S.sources.bench?.root) return inNpu ? 'npu' : 'bench';
    if (/\b(ya?ml|layer mapping|mapping)\b/i.test(msg) && !inNpu && !inBench) return 'mapping';
    if (changed.length === 1) return changed[0];
    return 'load';
  }

  /** Sides above this total size are not pre-checked (check parses every rank folder; run parses again). */
  const CHECK_LIMIT = 256 * 1024 * 1024;

  /** @param {Side} side @param {string} [note] */
  function showSource(side, note) {
    const src = S.sources[side];
    $(`${side}-src`).textContent = src
      ? `${src.label} — ${src.files.length} file${src.files.length === 1 ? '' : 's'}, ` +
        `${fmtBytes(src.files.reduce((s, f) => s + f.size, 0))}${note ? ` (${note})` : ''}`
      : 'drop a dump folder here';
  }

  /**
   * Reads the chosen sources into a fresh session and runs. The shown result stays until this succeeds.
   * @param {Side[]} changed
   */
  async function load(changed) {
    const seq = ++S.loadSeq;
    if (S.running) {
      // A load is running: terminate the worker (the old session goes with it) and start over.
      client.restart().catch(() => {});
    }
    S.running = true;
    setState('loading');
    for (const s of changed) setError(s);
    setError('load');
    setError('mapping');
    try {
      if (!S.sources.npu && !S.sources.bench) {
        clearDisplay();
        return;
      }
      progress(STAGES.startCore);
      await client.start();
      // The core builds a single graph from the npu slot; a Bench folder alone goes there too.
      /** @type {[Side, Side, Source][]} [slot in the core, side in the UI, source] */
      const slots = [];
      if (S.sources.npu) slots.push(['npu', 'npu', S.sources.npu]);
      if (S.sources.bench) slots.push([S.sources.npu ? 'bench' : 'npu', 'bench', S.sources.bench]);
      await client.request({ type: 'newSession', roots: Object.fromEntries(slots.map(([slot, , src]) => [slot, src.root])) });
      for (const [slot, side, src] of slots) {
        const stage = side === 'npu' ? STAGES.readNpu : STAGES.readBench;
        try {
          await sendFiles(
            client, slot, src.files, (d, t) => seq === S.loadSeq && progress(stage, d, t), () => seq !== S.loadSeq, chunkSize,
          );
          // Parse a newly chosen side now, so a broken file shows before the other side is read.
          if (changed.includes(side) && src.files.reduce((s, f) => s + f.size, 0) <= CHECK_LIMIT && seq === S.loadSeq) {
            progress(`Checking ${side === 'npu' ? 'NPU' : 'Bench'} files`);
            await client.request({ type: 'check', side: slot });
          }
        } catch (e) {
          if (e instanceof CoreError && !e.cancelled) e.side = side;
          throw e;
        }
        if (seq !== S.loadSeq) return;
      }
      progress(STAGES.layout);
      const layout = await client.request({ type: 'layout' });
      if (seq !== S.loadSeq) return;
      updateSelectors(layout);
      progress(STAGES.run);
      const result = unpackRunResult(await client.request({ type: 'run', session: 'staging', options: runOptions() }, [], (p) => {
        if (seq === S.loadSeq) progress(p.stage, p.done, p.total);
      }));
      if (seq !== S.loadSeq) return;
      S.applied = { ...S.sources };
      S.layout = layout;
      S.sessionGen = client.generation;
      for (const s of SIDES) {
        setError(s);
        showSource(s);
      }
      display(result);
    } catch (e) {
      if (seq !== S.loadSeq || (e instanceof CoreError && e.cancelled)) return;
      // A lone Bench folder is loaded into the core's npu slot.
      if (e instanceof CoreError && e.side === 'npu' && !S.sources.npu && S.sources.bench) e.side = 'bench';
      const where = errorPlace(e, changed);
      setError(where, e instanceof Error ? e.message : String(e));
      client.request({ type: 'discardStaging' }).catch(() => {});
      // Keep showing (and using) the previous result; the new choice stays on its card with the error,
      // so that choosing the other side next loads both.
      if (S.layout) updateSelectors(S.layout);
      for (const s of SIDES) showSource(s, S.sources[s] !== S.applied[s] ? 'not shown: see the error' : undefined);
      window.__probelens.errors.push({ where, message: e instanceof Error ? e.message : String(e) });
    } finally {
      if (seq === S.loadSeq) {
        S.running = false;
        progressDone();
        setState(S.result ? 'ready' : 'empty');
        document.body.dataset.loads = String(++S.loads);
      }
    }
  }

  /** Re-runs the current session with new options (no file reading). */
  async function rerun() {
    const same = S.sources.npu === S.applied.npu && S.sources.bench === S.applied.bench;
    if (!S.result || !same || S.sessionGen !== client.generation || S.running) return load([]);
    const seq = ++S.loadSeq;
    S.running = true;
    setState('loading');
    setError('load');
    setError('mapping');
    try {
      progress(STAGES.run);
      const result = unpackRunResult(await client.request({ type: 'run', session: 'current', options: runOptions() }, [], (p) => {
        if (seq === S.loadSeq) progress(p.stage, p.done, p.total);
      }));
      if (seq !== S.loadSeq) return;
      display(result);
    } catch (e) {
      if (seq !== S.loadSeq || (e instanceof CoreError && e.cancelled)) return;
      const msg = e instanceof Error ? e.message : String(e);
      const where = errorPlace(e, []);
      setError(where, msg);
      window.__probelens.errors.push({ where, message: msg });
    } finally {
      if (seq === S.loadSeq) {
        S.running = false;
        progressDone();
        setState(S.result ? 'ready' : 'empty');
        document.body.dataset.loads = String(++S.loads);
      }
    }
  }

  /** @param {{npu: Layout | null, bench: Layout | null}} layout */
  function updateSelectors(layout) {
    const steps = new Set();
    const ranks = new Set();
    let showSteps = false;
    let showRanks = false;
    for (const side of SIDES) {
      const l = layout[side];
      if (!l) continue;
      for (const s of l.steps ?? []) steps.add(s);
      for (const r of l.ranks ?? []) ranks.add(r);
      if (l.kind === 'steps') showSteps = true;
      if (l.kind === 'steps' || l.kind === 'ranks') showRanks = true;
    }
    fillSelect(/** @type {HTMLSelectElement} */ ($('step-select')), [...steps].sort((a, b) => a - b), 'step');
    fillSelect(/** @type {HTMLSelectElement} */ ($('rank-select')), [...ranks].sort((a, b) => a - b), 'rank');
    $('step-wrap').hidden = !showSteps || steps.size === 0;
    $('rank-wrap').hidden = !showRanks || ranks.size === 0;
  }

  /** @param {HTMLSelectElement} sel @param {number[]} values @param {string} label */
  function fillSelect(sel, values, label) {
    const keep = sel.value;
    sel.replaceChildren();
    for (const v of values) {
      const o = document.createElement('option');
      o.value = String(v);
      o.textContent = `${label} ${v}`;
      sel.append(o);
    }
    if (values.map(String).includes(keep)) sel.value = keep;
    else if (values.length) sel.value = String(values[0]);
  }

  function clearDisplay() {
    S.result = null;
    S.classes = null;
    S.models = { npu: null, bench: null };
    S.selection = null;
    window.__probelens.lastResult = null;
    for (const side of SIDES) {
      views[side].setModel(null, []);
      outlines[side].setModel(null, [], false);
    }
    details.clear('Load a dump folder on each side.');
    $('summary').textContent = 'No data loaded.';
    $('legend').replaceChildren();
    $('diagnostics').replaceChildren();
  }

  // ---------------------------------------------------------------- showing a result
  /** @param {RunResult} result */
  function display(result) {
    const t0 = performance.now();
    progress(STAGES.render);
    S.result = result;
    /** @type {import('./colors.js').Classes} */
    const classes = classify(result);
    S.classes = classes;
    const compare = result.graphType === 'compare' && !!result.bench;
    S.models = {
      npu: new TreeModel(result.npu, classes.npu),
      bench: result.bench && classes.bench ? new TreeModel(result.bench, classes.bench) : null,
    };
    S.selection = null;
    const single = !result.bench;
    panesEl.classList.toggle('single', single);
    S.buildSide = single && !S.applied.npu && S.applied.bench ? 'bench' : 'npu';
    $('npu-title').textContent = single
      ? `${S.buildSide === 'npu' ? 'Debug / NPU' : 'Bench'} — build graph`
      : 'Debug / NPU';
    $('bench-title').textContent = 'Bench';
    for (const side of SIDES) {
      const m = single ? (side === 'npu' ? S.models.npu : null) : S.models[side];
      outlines[side].setModel(m, classes.bins, compare);
      views[side].setModel(m, classes.bins);
    }
    renderLegend(result, classes, compare);
    renderSummary(result, classes, compare);
    renderDiagnostics(result);
    details.clear(compare ? 'Select a node to compare its tensors.' : 'Select a node to see its tensors.');
    window.__probelens.lastResult = result;
    window.__probelens.timings.displayMs = performance.now() - t0;
  }

  /**
   * @param {RunResult} result
   * @param {import('./colors.js').Classes} classes
   * @param {boolean} compare
   */
  function renderLegend(result, classes, compare) {
    const ul = $('legend');
    ul.replaceChildren();
    const counts = new Array(classes.bins.length).fill(0);
    for (const c of classes.npu) counts[c]++;
    classes.bins.forEach((/** @type {import('./colors.js').Bin} */ b, /** @type {number} */ k) => {
      if (!compare && b.cls !== 'none') return;
      if (b.cls === 'none' && counts[k] === 0) return;
      const li = document.createElement('li');
      li.dataset.precision = b.cls;
      li.dataset.count = String(counts[k]);
      const sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = b.color;
      const t = document.createElement('span');
      t.textContent = `${compare ? b.label : 'nodes'} ${counts[k]}`;
      li.title = b.description + (Number.isFinite(b.lo) ? ` [${b.lo}, ${b.hi}${b.last ? ']' : ')'}` : '');
      li.append(sw, t);
      ul.append(li);
    });
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
    for (const level of ['medium', 'high', 'critical', ...[...ov.keys()].filter((l) => !(l in OVERFLOW_COLORS))]) {
      const counts = ov.get(level);
      if (!counts) continue;
      const n = result.bench ? `${counts[0]} / ${counts[1]}` : String(counts[0]);
      const li = document.createElement('li');
      li.dataset.overflow = level;
      li.dataset.count = String(counts[0]);
      li.title = result.bench ? `overflow ${level}: ${counts[0]} NPU nodes, ${counts[1]} Bench nodes` : `overflow ${level}`;
      const sw = document.createElement('span');
      sw.className = 'sw ov';
      sw.style.background = OVERFLOW_COLORS[level] ?? '#888';
      const t = document.createElement('span');
      t.textContent = `overflow ${level} ${n}`;
      li.append(sw, t);
      ul.append(li);
    }
  }

  /**
   * @param {RunResult} result
   * @param {import('./colors.js').Classes} classes
   * @param {boolean} compare
   */
  function renderSummary(result, classes, compare) {
    const el = $('summary');
    const n = result.npu.names.length;
    const count = (/** @type {string} */ cls) => {
      const k = classes.bins.findIndex((b) => b.cls === cls);
      let c = 0;
      if (k >= 0) for (const v of classes.npu) if (v === k) c++;
      return c;
    };
    el.dataset.npuNodes = String(n);
    if (!compare || !result.bench) {
      el.dataset.benchNodes = '0';
      el.textContent = `${n} nodes (build graph${result.task ? `, task ${result.task}` : ''})`;
      return;
    }
    const nb = result.bench.names.length;
    const mN = S.models.npu?.matchedCount ?? 0;
    const mB = S.models.bench?.matchedCount ?? 0;
    const errors = count('error');
    const warnings = count('warning');
    Object.assign(el.dataset, {
      benchNodes: String(nb), matchedNpu: String(mN), matchedBench: String(mB),
      errors: String(errors), warnings: String(warnings),
    });
    el.textContent =
      `NPU ${n} nodes · Bench ${nb} nodes · matched ${mN} · unmatched ${n - mN} NPU / ${nb - mB} Bench · ` +
      `errors ${errors} · warnings ${warnings}` + (result.task ? ` · task ${result.task}` : '');
  }

  /** @param {RunResult} result */
  function renderDiagnostics(result) {
    const ul = $('diagnostics');
    ul.replaceChildren();
    for (const d of result.diagnostics ?? []) {
      const li = document.createElement('li');
      li.className = d.severity;
      li.textContent = `${d.severity}: ${d.file ? `${d.file}: ` : ''}${d.message}`;
      ul.append(li);
    }
  }

  // ---------------------------------------------------------------- selection & expansion
  /** @param {Side} graphSide */
  function refresh(graphSide) {
    const pane = graphToPane(graphSide);
    outlines[pane].refresh();
    views[pane].invalidate();
  }

  /**
   * @param {Side} side graph side of the node
   * @param {number} i
   * @param {'canvas' | 'outline' | 'api'} from
   */
  function select(side, i, from) {
    const m = S.models[side];
    if (!m || i < 0 || i >= m.n) return;
    S.selection = { side, index: i };
    if (m.reveal(i)) refresh(side);
    const pane = graphToPane(side);
    views[pane].selected = i;
    views[pane].peer = -1;
    outlines[pane].setSelection(i, -1);
    if (from !== 'outline') outlines[pane].scrollTo(i);
    if (from !== 'canvas') views[pane].showNode(i);
    views[pane].invalidate();
    const other = otherSide(side);
    const om = S.models[other];
    if (om && S.result?.bench) {
      const peer = m.g.matched[i];
      const opane = graphToPane(other);
      if (peer >= 0 && peer < om.n) {
        if (om.reveal(peer)) refresh(other);
        views[opane].selected = -1;
        views[opane].peer = peer;
        outlines[opane].setSelection(-1, peer);
        outlines[opane].scrollTo(peer);
        views[opane].showNode(peer);
      } else {
        views[opane].selected = -1;
        views[opane].peer = -1;
        outlines[opane].setSelection(-1, -1);
        views[opane].invalidate();
      }
    }
    loadDetails(side, i);
  }

  /** @param {Side} side @param {number} i */
  async function loadDetails(side, i) {
    const seq = ++S.detailSeq;
    try {
      if (S.sessionGen !== client.generation) {
        details.clear('Details are unavailable: the core was restarted. Reload the folders.');
        return;
      }
      const pair = await client.request({ type: 'nodePair', side, index: i });
      if (seq !== S.detailSeq) return;
      const build = !S.result?.bench;
      details.show(pair, side, S.result?.toolTip ?? null, build ? (S.buildSide === 'npu' ? 'NPU' : 'Bench') : null);
    } catch (e) {
      if (seq !== S.detailSeq || (e instanceof CoreError && e.cancelled)) return;
      details.clear(`Could not read the node: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /**
   * Expands/collapses a node; with sync on, the matched node of the other pane follows.
   * @param {Side} side @param {number} i @param {boolean} [open]
   */
  function toggle(side, i, open) {
    const m = S.models[side];
    if (!m || !m.hasChildren(i)) return;
    const want = open ?? !m.expanded[i];
    if (!want && i === 0) return; // the root stays open
    if (!m.setExpanded(i, want)) return;
    refresh(side);
    const sync = /** @type {HTMLInputElement} */ ($('opt-sync')).checked;
    const other = otherSide(side);
    const om = S.models[other];
    if (!sync || !om || !S.result?.bench) return;
    let peer = m.g.matched[i];
    if (peer < 0 && want) {
      // Unmatched: open the counterpart of the nearest matched ancestor instead.
      for (let a = m.g.parent[i]; a >= 0 && peer < 0; a = m.g.parent[a]) peer = m.g.matched[a];
    }
    if (peer < 0 || peer >= om.n) return;
    let changed = false;
    if (want) changed = om.reveal(peer) || changed;
    if (peer !== 0 || want) changed = om.setExpanded(peer, want) || changed;
    if (changed) refresh(other);
  }

  // ---------------------------------------------------------------- inputs
  for (const side of SIDES) {
    const input = /** @type {HTMLInputElement} */ ($(`${side}-dir`));
    input.addEventListener('change', () => {
      const list = input.files;
      if (!list || !list.length) return;
      const first = list[0].webkitRelativePath || list[0].name;
      const label = first.includes('/') ? first.slice(0, first.indexOf('/')) : 'files';
      setSource(side, { label, root: label === 'files' ? '' : label, files: filesFromInput(list) });
      input.value = '';
    });
    for (const zone of [$(`${side}-card`), $(`${side}-pane`)]) installDrop(zone, side);
  }
  for (const side of SIDES) {
    $(`${side}-clear`).addEventListener('click', () => {
      if (!S.sources[side]) return;
      S.sources[side] = null;
      showSource(side);
      setError(side);
      load([side]);
    });
  }

  /** @param {Side} side @param {Source} src */
  function setSource(side, src) {
    if (!src.files.length) {
      setError(side, `${src.label}: no msprobe .json files (dump.json, construct.json, stack.json) found`);
      return;
    }
    S.sources[side] = src;
    showSource(side);
    load([side]);
  }

  /** @param {HTMLElement} zone @param {Side | 'mapping'} target */
  function installDrop(zone, target) {
    zone.addEventListener('dragover', (e) => {
      e.preventDefault();
      if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy';
      zone.classList.add('drop-hover');
    });
    zone.addEventListener('dragleave', () => zone.classList.remove('drop-hover'));
    zone.addEventListener('drop', (e) => {
      e.preventDefault();
      zone.classList.remove('drop-hover');
      if (!e.dataTransfer) return;
      filesFromDrop(e.dataTransfer).then(
        async ({ files, yaml, rootName }) => {
          if (yaml && (target === 'mapping' || !files.length)) {
            await setMappingFile(yaml);
            return;
          }
          if (target === 'mapping') {
            setError('mapping', 'drop a .yaml layer mapping here');
            return;
          }
          setSource(target, { label: rootName || (files.length === 1 ? files[0].path : 'dropped files'), root: rootName, files });
        },
        (err) => setError(target, `could not read the drop: ${err instanceof Error ? err.message : String(err)}`),
      );
    });
  }
  installDrop($('mapping-card'), 'mapping');

  // Dropping outside the targets must not navigate away.
  window.addEventListener('dragover', (e) => e.preventDefault());
  window.addEventListener('drop', (e) => e.preventDefault());

  // ---------------------------------------------------------------- mapping & options
  const mappingSelect = /** @type {HTMLSelectElement} */ ($('mapping-select'));
  function renderMappingSelect() {
    const keep = mappingSelect.value;
    mappingSelect.replaceChildren();
    const none = document.createElement('option');
    none.value = '';
    none.textContent = 'no YAML (built-in rules)';
    mappingSelect.append(none);
    for (const m of S.mappings) {
      const o = document.createElement('option');
      o.value = m.key;
      o.textContent = m.name;
      mappingSelect.append(o);
    }
    mappingSelect.value = S.mappings.some((m) => m.key === keep) ? keep : '';
  }
  function currentMapping() {
    return S.mappings.find((m) => m.key === mappingSelect.value) ?? null;
  }
  /** @param {MappingChoice} choice */
  function addMapping(choice) {
    S.mappings = S.mappings.filter((m) => m.key !== choice.key);
    S.mappings.push(choice);
    renderMappingSelect();
    mappingSelect.value = choice.key;
  }
  /** @param {Blob & {name?: string}} file */
  async function setMappingFile(file) {
    setError('mapping');
    if (!isYaml(file.name ?? '')) {
      setError('mapping', `${file.name}: not a .yaml file`);
      return;
    }
    const text = await readText(file);
    addMapping({ key: 'file', name: `file: ${file.name}`, text });
    /** @type {HTMLInputElement} */ ($('opt-lm')).checked = true;
    rerun();
  }
  $('mapping-file').addEventListener('change', () => {
    const input = /** @type {HTMLInputElement} */ ($('mapping-file'));
    const f = input.files?.[0];
    if (f) setMappingFile(f);
    input.value = '';
  });
  mappingSelect.addEventListener('change', async () => {
    setError('mapping');
    const key = mappingSelect.value;
    const choice = currentMapping();
    if (choice && key.startsWith('tpl:') && !choice.text) {
      try {
        choice.text = await host.getTemplate(choice.name.replace(/^template: /, ''));
      } catch (e) {
        setError('mapping', `could not read the template: ${e instanceof Error ? e.message : String(e)}`);
        return;
      }
    }
    if (key) /** @type {HTMLInputElement} */ ($('opt-lm')).checked = true;
    rerun();
  });
  for (const id of ['opt-lm', 'opt-fm', 'opt-oc', 'step-select', 'rank-select']) {
    $(id).addEventListener('change', () => rerun());
  }
  host.listTemplates().then(
    (names) => {
      for (const name of names) S.mappings.push({ key: `tpl:${name}`, name: `template: ${name}`, text: '' });
      renderMappingSelect();
    },
    () => renderMappingSelect(),
  );
  renderMappingSelect();

  $('demo-btn').addEventListener('click', () => loadDemo());

  async function loadDemo() {
    try {
      progress('Reading the demo');
      const demo = await host.loadDemo();
      S.sources = { npu: { ...demo.npu, root: demo.npu.label }, bench: { ...demo.bench, root: demo.bench.label } };
      for (const s of SIDES) showSource(s);
      if (demo.mapping) {
        addMapping({ key: 'demo', name: `demo: ${demo.mapping.name}`, text: demo.mapping.text });
        /** @type {HTMLInputElement} */ ($('opt-lm')).checked = true;
      }
      await load(['npu', 'bench']);
    } catch (e) {
      progressDone();
      setError('load', `could not load the demo: ${e instanceof Error ? e.message : String(e)}`);
      setState(S.result ? 'ready' : 'empty');
    }
  }

  // ---------------------------------------------------------------- splitter
  const splitter = $('splitter');
  splitter.addEventListener('pointerdown', (e) => {
    splitter.setPointerCapture(e.pointerId);
    const move = (/** @type {PointerEvent} */ ev) => {
      const r = panesEl.getBoundingClientRect();
      const pct = Math.min(85, Math.max(15, ((ev.clientX - r.left) / r.width) * 100));
      panesEl.style.setProperty('--split', `${pct}%`);
    };
    const up = () => {
      splitter.removeEventListener('pointermove', move);
      splitter.removeEventListener('pointerup', up);
    };
    splitter.addEventListener('pointermove', move);
    splitter.addEventListener('pointerup', up);
  });
  splitter.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
    const cur = parseFloat(getComputedStyle(panesEl).getPropertyValue('--split')) || 50;
    const pct = Math.min(85, Math.max(15, cur + (e.key === 'ArrowLeft' ? -3 : 3)));
    panesEl.style.setProperty('--split', `${pct}%`);
  });

  // Horizontal splitter between the panes and the details panel.
  const hsplit = $('hsplit');
  /** @param {number} px height of the details panel */
  const setDetailsHeight = (px) => {
    const max = window.innerHeight - 260;
    document.body.style.setProperty('--details-h', `${Math.max(80, Math.min(max, px))}px`);
  };
  hsplit.addEventListener('pointerdown', (e) => {
    hsplit.setPointerCapture(e.pointerId);
    const move = (/** @type {PointerEvent} */ ev) => setDetailsHeight(window.innerHeight - ev.clientY);
    const up = () => {
      hsplit.removeEventListener('pointermove', move);
      hsplit.removeEventListener('pointerup', up);
    };
    hsplit.addEventListener('pointermove', move);
    hsplit.addEventListener('pointerup', up);
  });
  hsplit.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowUp' && e.key !== 'ArrowDown') return;
    e.preventDefault();
    setDetailsHeight($('details').getBoundingClientRect().height + (e.key === 'ArrowUp' ? 30 : -30));
  });

  // ---------------------------------------------------------------- test & debug hook
  window.__probelens = {
    lastResult: null,
    errors: [],
    timings: { displayMs: 0 },
    get state() {
      return S;
    },
    views,
    outlines,
    select: (/** @type {Side} */ side, /** @type {number} */ i) => select(side, i, 'api'),
    toggle: (/** @type {Side} */ side, /** @type {number} */ i, /** @type {boolean | undefined} */ open) => toggle(side, i, open),
    loadDemo,
  };

  clearDisplay();
  setState('empty');
  loadDemo();
}
