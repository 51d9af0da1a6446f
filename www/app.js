// @ts-check
// The page: inputs, load orchestration, the two panes, selection/expansion sync, legend and details.
import { CoreClient, CoreError } from './client.js';
import { SIDES, STAGES, unpackRunResult } from './protocol.js';
import { filesFromInput, filesFromDrop, sendFiles, readText, isYaml, isTensorFile } from './loader.js';
import { classify, errorBin, passBin, OVERFLOW_COLORS, binTitle, swatchBackground } from './colors.js';
import { TreeModel } from './tree.js';
import { GraphView } from './graphview.js';
import { Outline } from './outline.js';
import { DetailsPanel } from './details.js';
import { Minimap } from './minimap.js';
import { NodeList } from './listview.js';
import { searchNames, filterNodes } from './analysis.js';
import { toCsv } from './csv.js';
import { t, detectLang, setLang, getLang, translateDom } from './i18n.js';
import { MappingPanel } from './mappingpanel.js';
import { showWelcome } from './welcome.js';
import { installGraphExports } from './graphexport.js';
import { createStore } from './store.js';
import { createManualController, MANUAL_INITIAL, runKey } from './controllers/manual.js';
import { fitText, fontOf } from './elide.js';
import { createDiagnoseController, DIAGNOSIS_INITIAL, DIV_BINS, divergenceClasses, classCounts, suspectItems, heatmapMatrix, layerNode, divClass } from './controllers/diagnose.js';
import { createLayoutController, readLayout, defaultsFor } from './controllers/layout.js';
import { createOfferController } from './controllers/frameworks.js';
import { parseHash, buildHash } from './controllers/hash.js';
import { slotOf, sideOfSlot, errorPlaceOf, parallelOptionsOf } from './controllers/load.js';

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
 * @property {() => Promise<ArrayBuffer>} sqlWasm  the sql.js module bytes (for opening a .vis.db)
 */

/** @typedef {import('./controllers/manual.js').HistoryEntry} HistoryEntry */

/** @typedef {import('./controllers/hash.js').HashState} HashState */

/**
 * @typedef {object} Demo
 * @property {string} label
 * @property {{label: string, files: SourceFile[]}} npu
 * @property {{label: string, files: SourceFile[]}} bench
 * @property {{name: string, text: string} | null} mapping
 */

/**
 * `root`: the chosen folder's name ('' for loose files), which the core puts in front of paths in messages.
 * `demo`: the bundled demo's folder (set by loadDemo; a folder the user chooses replaces the demo as a whole).
 * @typedef {{label: string, root: string, files: SourceFile[], demo?: boolean}} Source
 */
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
  // Debug/test knobs: ?chunk=<bytes>&stream=<bytes> force small chunks and the core's streaming path;
  // ?heap=<bytes> caps the core's memory (the out-of-memory paths with small inputs); ?slice=<bytes>
  // sets the size of the core's reads of a dump.json (default 4 MiB); ?copy=1 sends construct.json and
  // stack.json to the core as bytes (the path of other JSON files) instead of as handles.
  const params = new URLSearchParams(location.search);
  const knob = (/** @type {string} */ k) => {
    const v = Number(params.get(k));
    return Number.isInteger(v) && v > 0 ? v : undefined;
  };
  const chunkSize = knob('chunk');
  const copyJson = knob('copy') === 1;
  const client = new CoreClient(host.makeWorker, host.wasmBytes, knob('stream'), knob('heap'), knob('slice'));

  const storage = (() => {
    try {
      return window.localStorage;
    } catch {
      return null;
    }
  })();
  /**
   * The page's state (store.js): views subscribe to its slices, controllers change it. `diagnosis`
   * is the divergence diagnosis of the shown result (controllers/diagnose.js): suspects, overlay, heatmaps.
   * @typedef {import('./controllers/manual.js').ManualState & {
   *   sources: Record<Side, Source | null>,
   *   applied: Record<Side, Source | null>,
   *   mappings: MappingChoice[],
   *   runLayout: {npu: Layout | null, bench: Layout | null} | null,
   *   sessionGen: number,
   *   sessionId: number,
   *   running: boolean,
   *   runOpts: import('./protocol.js').RunOptions | null,
   *   buildSide: Side,
   *   mode: 'dump' | 'vis',
   *   vis: import('./protocol.js').VisMeta | null,
   *   mergedRanks: number[] | null,
   *   selection: {side: Side, index: number} | null,
   *   layout: import('./controllers/layout.js').LayoutState,
   *   offer: import('./controllers/frameworks.js').Offer | null,
   *   diagnosis: import('./controllers/diagnose.js').DiagnosisState,
   * }} PageState
   */
  const store = createStore(/** @type {PageState} */ ({
    // The loaded inputs: the sources chosen (`sources`) and those of the shown result (`applied`), the
    // mapping choices, the step/rank layout, the worker session holding the result and its options.
    sources: { npu: null, bench: null },
    applied: { npu: null, bench: null },
    mappings: [],
    runLayout: null,
    /** worker generation that holds the current session (-1: none) */
    sessionGen: -1,
    /** the worker's id of the current session (newSession's `session`; -1: none), for `adoptSide` */
    sessionId: -1,
    /** a load or re-run is waiting for the worker */
    running: false,
    runOpts: null,
    /** which pane shows the single graph of a build result */
    buildSide: 'npu',
    /** 'dump': dump folders through the core; 'vis': a msprobe output file */
    mode: 'dump',
    vis: null,
    /** with a parallel merge: the main ranks of the step's merged graphs */
    mergedRanks: null,
    result: null,
    classes: null,
    resultVersion: 0,
    runKey: '',
    matchBlocked: null,
    kept: new Map(),
    ...MANUAL_INITIAL,
    selection: null,
    layout: readLayout(storage, defaultsFor(window.innerWidth, window.innerHeight)),
    offer: null,
    diagnosis: DIAGNOSIS_INITIAL,
  }));
  const mc = createManualController(store, client, (k, p) => t(k, p));
  const lc = createLayoutController(store, storage);
  const dc = createDiagnoseController(store, client);

  // The page's state as the code reads it: the fields with accessors live in the store; the rest are
  // request counters, the panes' tree models (view models), caches and the URL state in flight.
  const S = {
    get sources() {
      return store.get().sources;
    },
    set sources(v) {
      store.set({ sources: v });
    },
    get applied() {
      return store.get().applied;
    },
    set applied(v) {
      store.set({ applied: v });
    },
    get mappings() {
      return store.get().mappings;
    },
    set mappings(v) {
      store.set({ mappings: v });
    },
    get runLayout() {
      return store.get().runLayout;
    },
    set runLayout(v) {
      store.set({ runLayout: v });
    },
    get sessionGen() {
      return store.get().sessionGen;
    },
    set sessionGen(v) {
      store.set({ sessionGen: v });
    },
    get sessionId() {
      return store.get().sessionId;
    },
    set sessionId(v) {
      store.set({ sessionId: v });
    },
    get running() {
      return store.get().running;
    },
    set running(v) {
      store.set({ running: v });
    },
    get runOpts() {
      return store.get().runOpts;
    },
    set runOpts(v) {
      store.set({ runOpts: v });
    },
    get buildSide() {
      return store.get().buildSide;
    },
    set buildSide(v) {
      store.set({ buildSide: v });
    },
    get mode() {
      return store.get().mode;
    },
    set mode(v) {
      store.set({ mode: v });
    },
    get vis() {
      return store.get().vis;
    },
    set vis(v) {
      store.set({ vis: v });
    },
    get mergedRanks() {
      return store.get().mergedRanks;
    },
    set mergedRanks(v) {
      store.set({ mergedRanks: v });
    },
    get result() {
      return store.get().result;
    },
    set result(v) {
      store.set({ result: v });
    },
    get classes() {
      return store.get().classes;
    },
    set classes(v) {
      store.set({ classes: v });
    },
    /** @type {Record<Side, TreeModel | null>} */
    models: { npu: null, bench: null },
    get selection() {
      return store.get().selection;
    },
    set selection(v) {
      store.set({ selection: v });
    },
    loadSeq: 0,
    detailSeq: 0,
    loads: 0,
    get pick() {
      return store.get().pick;
    },
    get manual() {
      return store.get().manual;
    },
    get history() {
      return store.get().history;
    },
    get matching() {
      return store.get().matching;
    },
    /** @type {Record<Side, Map<string, number>> | null} node indexes by name, built on demand */
    nameIndex: null,
    /** @type {HashState | null} view state waiting for its files */
    pendingHash: null,
    restoring: false,
    /** @type {Promise<{reapplied: number, already: number, missing: number}>} the shown result's re-applying of kept manual pairs */
    reapply: Promise.resolve({ reapplied: 0, already: 0, missing: 0 }),
  };

  /** Listeners of the mapping panel (mappingpanel.js): a result was shown, matches changed. */
  const hooks = {
    /** @type {() => void} */
    shown: () => {},
    /** @type {() => void} */
    changed: () => {},
  };

  // ---------------------------------------------------------------- elements
  const panesEl = $('panes');
  const details = new DetailsPanel($('details'));
  /** @type {Record<Side, GraphView>} */
  const views = /** @type {any} */ ({});
  /** @type {Record<Side, Outline>} */
  const outlines = /** @type {any} */ ({});
  /** @type {Record<Side, Minimap>} */
  const minimaps = /** @type {any} */ ({});
  for (const side of SIDES) {
    views[side] = new GraphView(/** @type {HTMLCanvasElement} */ ($(`${side}-canvas`)), {
      onSelect: (i, e) => select(paneToGraph(side), i, 'canvas', e),
      onToggle: (i) => toggle(paneToGraph(side), i),
    });
    minimaps[side] = new Minimap(/** @type {HTMLElement} */ ($(`${side}-canvas`).parentElement), views[side]);
    outlines[side] = new Outline($(`${side}-outline`), side, {
      onSelect: (i, e) => select(paneToGraph(side), i, 'outline', e),
      onToggle: (i, open) => toggle(paneToGraph(side), i, open),
    });
    const pane = $(`${side}-pane`);
    for (const b of Array.from(pane.querySelectorAll('[data-act]'))) {
      b.addEventListener('click', () => {
        const act = /** @type {HTMLElement} */ (b).dataset.act;
        const gs = paneToGraph(side);
        const m = S.models[gs];
        if (act === 'fit') views[side].fit();
        else if (act === 'outline') lc.toggle('outlineOpen');
        else if (m && (act === 'expand-all' || act === 'collapse-all')) {
          m.setAll(act === 'expand-all');
          refresh(gs);
          views[side].fit();
          // With sync expand, the other pane follows (as a node's expand does).
          const om = S.models[otherSide(gs)];
          if (om && S.result?.bench && /** @type {HTMLInputElement} */ ($('opt-sync')).checked) {
            om.setAll(act === 'expand-all');
            refresh(otherSide(gs));
            views[graphToPane(otherSide(gs))].fit();
          }
          writeHash();
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
      progressStage.textContent = t('{stage} — {done} of {total}', { stage: t(stage), done: fmtBytes(done), total: fmtBytes(total) });
      progressBar.value = done / total;
    } else {
      progressStage.textContent = `${t(stage)}…`;
      progressBar.removeAttribute('value');
    }
  }
  function progressDone() {
    progressEl.hidden = true;
  }

  /**
   * The progress callback of a request that may read dump.json files (`check`, `run`): the core reads
   * a dump.json in slices and parses it as they come, which shows as that side's reading, with the
   * file's bytes; when the core is done with the file, the request's own stage shows again.
   * @param {number} seq the load's sequence number
   * @param {string} base the request's stage
   * @param {Record<Side, Source | null>} sources the session's sources (a lone Bench folder is in the core's npu slot)
   */
  function coreProgress(seq, base, sources) {
    return (/** @type {import('./protocol.js').ProgressResponse} */ p) => {
      if (seq !== S.loadSeq) return;
      if (!p.side) progress(p.stage, p.done, p.total);
      else if (p.done !== undefined && p.done === p.total) progress(base);
      else progress(sideOfSlot(p.side, sources) === 'npu' ? STAGES.readNpu : STAGES.readBench, p.done, p.total);
    };
  }

  /** @param {'npu' | 'bench' | 'mapping' | 'load' | 'vis' | 'parallel'} where @param {string} [msg] */
  function setError(where, msg) {
    const el = $(`${where}-error`);
    el.textContent = msg ?? '';
    el.hidden = !msg;
    // A message on the inputs is read where it belongs: unfold them.
    if (msg) lc.toggle('loadOpen', true);
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
      ...parallelOptions(rank),
    };
  }

  /**
   * The parallel-merge options as the CLI takes them (`--rank_size N [N]` ...), or none when the
   * rank size is empty. One value on a compare is used for both sides. A value that is not an
   * integer is refused with argparse's message.
   * @param {number} rank the rank chosen in the selector (a merged graph's rank when merging)
   */
  function parallelOptions(rank) {
    const val = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ ($(id)).value;
    const fields = { rankSize: val('opt-rank-size'), tp: val('opt-tp'), pp: val('opt-pp'), vpp: val('opt-vpp'), order: val('opt-order') };
    return parallelOptionsOf(fields, !!(S.sources.npu && S.sources.bench), rank, S.mergedRanks);
  }

  /**
   * After a run: with a parallel merge the rank selector lists the merged graphs of the step (one
   * per DP replica, by their main rank); without, the rank folders again.
   * @param {import('./protocol.js').RunResult} result
   */
  function showMerge(result) {
    const sel = /** @type {HTMLSelectElement} */ ($('rank-select'));
    if (result.merge) {
      S.mergedRanks = result.merge.ranks;
      fillSelect(sel, result.merge.ranks, 'merged rank');
      sel.value = String(result.merge.rank);
      $('rank-wrap').hidden = false;
    } else if (S.mergedRanks) {
      S.mergedRanks = null;
      if (S.runLayout) updateSelectors(S.runLayout);
    }
  }

  /**
   * Which input an error belongs to. Errors of file requests carry their side; the core's run/layout
   * messages start with the file's path, which begins with the side's folder name (setRootName).
   * @param {unknown} e
   * @param {Side[]} changed sides whose files were (re)chosen in this load
   * @returns {'npu' | 'bench' | 'mapping' | 'load' | 'parallel'}
   */
  function errorPlace(e, changed) {
    if (e instanceof CoreError && e.side) return e.side;
    return errorPlaceOf(e instanceof Error ? e.message : String(e), S.sources, changed);
  }

  /** Sides whose JSON files total more are not pre-checked (check parses every rank folder; run parses again). */
  const CHECK_LIMIT = 256 * 1024 * 1024;

  /** @param {Side} side @param {string} [note] */
  function showSource(side, note) {
    const src = S.sources[side];
    $(`${side}-src`).textContent = src
      ? `${src.label} — ${t(src.files.length === 1 ? '{n} file' : '{n} files', { n: src.files.length })}, ` +
        `${fmtBytes(src.files.reduce((s, f) => s + f.size, 0))}${note ? ` (${t(note)})` : ''}${src.demo ? ` · ${t('the bundled demo')}` : ''}`
      : t('drop a dump folder here');
    $(`${side}-card`).classList.toggle('is-demo', !!src?.demo);
  }

  /**
   * Whether a side of a new load can be taken over from the shown result's session instead of being
   * sent (and parsed) again: its source is the one that session holds, in the same slot of the core (a
   * lone Bench folder sits in the npu slot, so it moves when an NPU folder joins it), and that session
   * is still in this worker (not lost to a restart).
   * @param {Side} side @param {Side} slot the side's slot in the new session
   */
  function adoptable(side, slot) {
    const src = S.sources[side];
    if (!src || src !== S.applied[side] || S.mode !== 'dump' || S.sessionId < 0 || S.sessionGen !== client.generation) return false;
    return slotOf(side, S.applied) === slot;
  }

  /**
   * Reads the chosen sources into a fresh session and runs. A side the shown result's session holds
   * unchanged is adopted from it (`adoptSide`: not sent, read or parsed again). The shown result stays
   * until this succeeds.
   * @param {Side[]} changed
   */
  async function load(changed) {
    const seq = ++S.loadSeq;
    offers.cancel();
    dc.cancel();
    if (S.running) {
      // A load is running: terminate the worker (the old session goes with it) and start over.
      client.restart().catch(() => {});
    }
    S.running = true;
    setState('loading');
    // Every load reads both sides afresh, so an earlier message of either side is obsolete.
    for (const s of SIDES) setError(s);
    setError('load');
    setError('mapping');
    setError('vis');
    setError('parallel');
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
      if (S.sources.bench) slots.push([slotOf('bench', S.sources), 'bench', S.sources.bench]);
      const started = await client.request({ type: 'newSession', roots: Object.fromEntries(slots.map(([slot, , src]) => [slot, src.root])) });
      for (const [slot, side, src] of slots) {
        const stage = side === 'npu' ? STAGES.readNpu : STAGES.readBench;
        try {
          // The worker says no when the shown session is not the one named (the files are sent then).
          const adoption = adoptable(side, slot) ? await client.request({ type: 'adoptSide', side: slot, from: S.sessionId }) : null;
          if (adoption?.adopted) {
            if (adoption.suspended) window.__probelens.suspends++;
            if (seq !== S.loadSeq) return;
            continue;
          }
          await sendFiles(
            client, slot, src.files, (d, t) => seq === S.loadSeq && progress(stage, d, t), () => seq !== S.loadSeq, chunkSize, copyJson,
          );
          // Parse a newly chosen side now, so a broken file shows before the other side is read.
          if (changed.includes(side) && src.files.reduce((s, f) => s + (isTensorFile(f.path) ? 0 : f.size), 0) <= CHECK_LIMIT && seq === S.loadSeq) {
            const checking = side === 'npu' ? 'Checking NPU files' : 'Checking Bench files';
            progress(checking);
            await client.request({ type: 'check', side: slot }, [], coreProgress(seq, checking, S.sources));
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
      const opts = runOptions();
      const result = unpackRunResult(await client.request({ type: 'run', session: 'staging', options: opts }, [], coreProgress(seq, STAGES.run, S.sources)));
      if (seq !== S.loadSeq) return;
      setMode('dump');
      S.runOpts = opts;
      S.applied = { ...S.sources };
      S.runLayout = layout;
      S.sessionGen = client.generation;
      S.sessionId = started.session;
      for (const s of SIDES) {
        setError(s);
        showSource(s);
      }
      showMerge(result);
      display(result);
      foldInputs();
      await S.reapply;
    } catch (e) {
      if (seq !== S.loadSeq || (e instanceof CoreError && e.cancelled)) return;
      // A lone Bench folder is loaded into the core's npu slot (a load has a folder on some side).
      if (e instanceof CoreError && e.side) e.side = sideOfSlot(e.side, S.sources);
      const where = errorPlace(e, changed);
      setError(where, e instanceof Error ? e.message : String(e));
      client.request({ type: 'discardStaging' }).catch(() => {});
      // Keep showing (and using) the previous result; the new choice stays on its card with the error,
      // so that choosing the other side next loads both.
      if (S.runLayout) updateSelectors(S.runLayout);
      if (S.result && S.mode === 'dump') showMerge(S.result);
      if (S.mode === 'dump') for (const s of SIDES) showSource(s, S.sources[s] !== S.applied[s] ? 'not shown: see the error' : undefined);
      renderCardWarnings();
      window.__probelens.errors.push({ where, message: e instanceof Error ? e.message : String(e) });
      // The worker trapped (out of memory) and took the shown result's session with it.
      if (e instanceof CoreError && e.fatal) await revive(seq);
    } finally {
      if (seq === S.loadSeq) {
        S.running = false;
        updateMatchBlocked();
        progressDone();
        setState(S.result ? 'ready' : 'empty');
        document.body.dataset.loads = String(++S.loads);
      }
    }
  }

  /**
   * After the core trapped (e.g. out of memory on a too large dump) the worker is replaced and the
   * shown result's session is gone. The result stays drawn; this reads its folders again into the
   * fresh worker and re-runs them with the same options, then re-applies the matches that differ
   * (manual ones), so that details, matching and exports work again. If the result cannot be made
   * again exactly (files changed), the details ask for the folders instead.
   * @param {number} seq the failed load's sequence number (a newer load cancels this)
   */
  async function revive(seq) {
    const r = S.result;
    const opts = S.runOpts;
    const { npu, bench } = S.applied;
    if (!r || !opts || S.mode !== 'dump' || (!npu && !bench)) return;
    try {
      progress('Restoring the shown result');
      await client.start();
      /** @type {[Side, Source][]} */
      const slots = [];
      if (npu) slots.push(['npu', npu]);
      if (bench) slots.push([npu ? 'bench' : 'npu', bench]);
      const started = await client.request({ type: 'newSession', roots: Object.fromEntries(slots.map(([slot, src]) => [slot, src.root])) });
      for (const [slot, src] of slots) await sendFiles(client, slot, src.files, () => {}, () => seq !== S.loadSeq, chunkSize, copyJson);
      if (seq !== S.loadSeq) return;
      const again = unpackRunResult(await client.request({ type: 'run', session: 'staging', options: opts }));
      if (seq !== S.loadSeq || S.result !== r || again.npu.matched.length !== r.npu.matched.length) return;
      const matched = again.npu.matched;
      if (r.bench && again.bench) {
        /** @type {import('./protocol.js').MatchOp[]} */
        const ops = [];
        for (let i = 0; i < matched.length; i++) {
          if (matched[i] !== r.npu.matched[i] && matched[i] >= 0) ops.push({ op: 'unmatch', side: 'npu', index: i });
        }
        for (let i = 0; i < matched.length; i++) {
          const want = r.npu.matched[i];
          if (matched[i] !== want && want >= 0) ops.push({ op: 'match', npu: i, bench: want, recursive: false });
        }
        if (ops.length) {
          const ch = /** @type {import('./protocol.js').Changes} */ (await client.request({ type: 'match', ops }));
          for (const [i, , m] of ch.npu) matched[i] = m;
        }
      }
      if (seq !== S.loadSeq || S.result !== r) return;
      for (let i = 0; i < matched.length; i++) if (matched[i] !== r.npu.matched[i]) return;
      S.sessionGen = client.generation;
      S.sessionId = started.session;
      updateMatchBlocked();
      if (S.selection) loadDetails(S.selection.side, S.selection.index);
    } catch {
      // The details say to reload the folders (loadDetails: generation mismatch).
    }
  }

  /** Re-runs the current session with new options (no file reading). */
  async function rerun() {
    if (S.mode === 'vis') return runVis();
    const same = S.sources.npu === S.applied.npu && S.sources.bench === S.applied.bench;
    if (!S.result || !same || S.sessionGen !== client.generation || S.running) return load([]);
    const seq = ++S.loadSeq;
    dc.cancel();
    S.running = true;
    setState('loading');
    setError('load');
    setError('mapping');
    setError('parallel');
    try {
      progress(STAGES.run);
      const opts = runOptions();
      const result = unpackRunResult(await client.request({ type: 'run', session: 'current', options: opts }, [], coreProgress(seq, STAGES.run, S.applied)));
      if (seq !== S.loadSeq) return;
      S.runOpts = opts;
      showMerge(result);
      display(result);
      await S.reapply;
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
      o.textContent = `${t(label)} ${v}`;
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
    $('summary').textContent = t('No data loaded.');
    $('legend').replaceChildren();
    $('diagnostics').replaceChildren();
    renderCardWarnings();
    resetTools();
    updateMatchBlocked();
    S.reapply = mc.resultShown('');
    dc.resultShown('');
    hooks.shown();
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
    renderTitles();
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
    showWelcome(S.mode === 'dump' && !!(S.sources.npu?.demo && S.sources.bench?.demo));
    resetTools();
    updateMatchBlocked();
    // The hand-made pairs kept for this step and rank come back by name (one undo step).
    const key = S.mode === 'vis' ? runKey(visStep(), visRank()) : runKey(S.runOpts?.step ?? 0, S.runOpts?.rank ?? 0);
    S.reapply = mc.resultShown(key);
    // A new result has no diagnosis yet; the heatmaps stay while only the step or rank changed.
    const inputs = heatInputs();
    dc.resultShown(key, !!heatOf && heatOf.npu === inputs.npu && heatOf.bench === inputs.bench && heatOf.opts === inputs.opts && S.mode === 'dump');
    setupMicroSteps(result);
    window.__probelens.timings.displayMs = performance.now() - t0;
    considerOffer();
    hooks.shown();
    applyPendingHash();
  }

  function renderTitles() {
    const single = !!S.result && !S.result.bench;
    $('npu-title').textContent = single
      ? t('{side} — build graph', { side: t(S.buildSide === 'npu' ? 'Debug / NPU' : 'Bench') })
      : t('Debug / NPU');
    $('bench-title').textContent = t('Bench');
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
      sw.style.background = swatchBackground(classes.bins, k);
      const tx = document.createElement('span');
      tx.textContent = `${compare ? t(b.label) : t('nodes')} ${counts[k]}`;
      li.title = binTitle(b);
      li.append(sw, tx);
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
      li.title = result.bench
        ? t('overflow {level}: {n} NPU nodes, {b} Bench nodes', { level, n: counts[0], b: counts[1] })
        : t('overflow {level}', { level });
      const sw = document.createElement('span');
      sw.className = 'sw ov';
      sw.style.background = OVERFLOW_COLORS[level] ?? '#888';
      const tx = document.createElement('span');
      tx.textContent = `${t('overflow {level}', { level })} ${n}`;
      li.append(sw, tx);
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
    const perBin = new Array(classes.bins.length).fill(0);
    for (const v of classes.npu) perBin[v]++;
    const errK = errorBin(classes.bins);
    const passK = passBin(classes.bins);
    const errors = errK >= 0 ? perBin[errK] : 0;
    // Warnings: the ranged classes between pass and error (one in msprobe 26.x, three in legacy legends).
    let warnings = 0;
    classes.bins.forEach((b, k) => {
      if (Number.isFinite(b.lo) && k !== errK && k !== passK) warnings += perBin[k];
    });
    el.dataset.npuNodes = String(n);
    if (!compare || !result.bench) {
      el.dataset.benchNodes = '0';
      el.textContent = t('{n} nodes (build graph)', { n }) + (S.mode === 'vis' && S.vis ? ` · ${S.vis.name}` : '');
      return;
    }
    const nb = result.bench.names.length;
    const mN = S.models.npu?.matchedCount ?? 0;
    const mB = S.models.bench?.matchedCount ?? 0;
    Object.assign(el.dataset, {
      benchNodes: String(nb), matchedNpu: String(mN), matchedBench: String(mB),
      errors: String(errors), warnings: String(warnings),
    });
    el.textContent =
      t('NPU {n} nodes · Bench {nb} nodes · matched {m} · unmatched {un} NPU / {ub} Bench · errors {e} · warnings {w}', {
        n, nb, m: mN, un: n - mN, ub: nb - mB, e: errors, w: warnings,
      }) + (result.task ? ` · ${t('task {task}', { task: result.task })}` : '') + (S.mode === 'vis' && S.vis ? ` · ${S.vis.name}` : '');
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
    renderCardWarnings();
  }

  /**
   * The warnings and notes of the shown result also go next to what they concern: a side's card when
   * they name a file of its folder (`<root>/...`), the mapping card when they are about the layer
   * mapping. Not for a side whose newly chosen folder is not shown (its card has the load's error).
   */
  function renderCardWarnings() {
    /** @type {Record<'npu' | 'bench' | 'mapping', string[]>} */
    const notes = { npu: [], bench: [], mapping: [] };
    const roots = { npu: S.applied.npu?.root ?? '', bench: S.applied.bench?.root ?? '' };
    for (const d of S.mode === 'dump' ? S.result?.diagnostics ?? [] : []) {
      const text = `${d.file ? `${d.file}: ` : ''}${d.message}`;
      const of = (/** @type {Side} */ s) => !!roots[s] && text.startsWith(`${roots[s]}/`);
      const where = roots.npu !== roots.bench && of('npu') ? 'npu'
        : roots.npu !== roots.bench && of('bench') ? 'bench'
          : /^the layer mapping\b/.test(text) ? 'mapping' : null;
      if (where) notes[where].push(`${d.severity}: ${text}`);
    }
    for (const where of /** @type {const} */ (['npu', 'bench', 'mapping'])) {
      const shown = where === 'mapping' || S.sources[where] === S.applied[where];
      const el = $(`${where}-warn`);
      el.textContent = shown ? notes[where].join('\n') : '';
      el.hidden = !el.textContent;
    }
    renderCompact();
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
   * @param {'canvas' | 'outline' | 'api' | 'refresh'} from `refresh`: the same node again after a change (picks stay)
   * @param {MouseEvent} [e] the click (Ctrl/Cmd: only pick the node for a manual match)
   */
  function select(side, i, from, e) {
    const m = S.models[side];
    if (!m || i < 0 || i >= m.n) return;
    if (e && (e.ctrlKey || e.metaKey) && S.result?.bench) {
      mc.pickNode(side, i, 'ctrl');
      return;
    }
    if (!m.inStep(i)) setMicroStep(-1);
    // The selected node becomes the match pick of its side (a matched node brings its counterpart,
    // unless the other side holds a grey pick); moving in the outline with the keyboard picks nothing.
    if (from !== 'refresh') mc.pickNode(side, i, from === 'outline' && !e ? 'keyboard' : 'click');
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
    renderMatchButtons();
    writeHash();
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
    writeHash();
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
  /** Empties a side's card (the *Clear* button; the next load has no folder on that side). @param {Side} side */
  function clearSource(side) {
    S.sources = { ...S.sources, [side]: null };
    showSource(side);
    setError(side);
  }
  for (const side of SIDES) {
    $(`${side}-clear`).addEventListener('click', () => {
      if (!S.sources[side]) return;
      if (!confirmDiscard('Clear')) return;
      clearSource(side);
      load([side]);
    });
  }

  /**
   * A folder the user chose for a side. While the other side still holds the demo's folder, the user's
   * folder replaces the demo as a whole: the demo's other side is cleared (as its *Clear* does), so the
   * load shows the user's folder alone (a build graph) instead of comparing it with an unrelated demo
   * dump, whose layout may not even agree; the folder then chosen for the other side compares with it
   * (an NPU folder shown alone is adopted from this load's session, not read again). The mapping
   * choice stays (the demo's is a real Qwen2.5 mapping, likely the kind of model the user compares).
   * @param {Side} side @param {Source} src
   */
  function setSource(side, src) {
    if (!src.files.length) {
      setError(side, `${src.label}: no msprobe .json files (dump.json, construct.json, stack.json) found`);
      return;
    }
    if (!confirmDiscard('Choosing another folder')) return;
    const other = otherSide(side);
    // The demo's mapping never applies to the user's folders (even after both demo sides were cleared).
    if (S.sources[other]?.demo || S.sources[side]?.demo || S.mappings.some((m) => m.key === 'demo')) dropDemoMapping();
    if (S.sources[other]?.demo) clearSource(other);
    S.sources = { ...S.sources, [side]: src };
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
    none.textContent = t('no YAML (built-in rules)');
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
    S.mappings = [...S.mappings.filter((m) => m.key !== choice.key), choice];
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
  for (const id of ['opt-lm', 'opt-fm', 'opt-oc', 'step-select', 'rank-select', 'opt-rank-size', 'opt-tp', 'opt-pp', 'opt-vpp', 'opt-order']) {
    $(id).addEventListener('change', () => rerun());
  }
  /** @type {string[]} the bundled templates */
  let templateNames = [];
  host.listTemplates().then(
    (names) => {
      templateNames = names;
      S.mappings = [...S.mappings, ...names.map((name) => ({ key: `tpl:${name}`, name: `template: ${name}`, text: '' }))];
      renderMappingSelect();
    },
    () => renderMappingSelect(),
  );
  renderMappingSelect();

  /**
   * The demo's layer mapping is the demo's own: a user's folders are never compared under it. When
   * the user's folder replaces the demo, the demo's mapping leaves the choices (and `-lm`, when it
   * was on for it); a bundled template that fits the user's pair is offered instead (considerOffer).
   */
  function dropDemoMapping() {
    const wasChosen = currentMapping()?.key === 'demo';
    S.mappings = S.mappings.filter((m) => m.key !== 'demo');
    renderMappingSelect();
    if (wasChosen) {
      mappingSelect.value = '';
      /** @type {HTMLInputElement} */ ($('opt-lm')).checked = false;
    }
  }

  // ---------------------------------------------------------------- template offer (controllers/frameworks.js)
  const offers = createOfferController(store, client, (name) => host.getTemplate(name));
  /**
   * After a compare of the user's folders without a mapping: when the module names say which stacks
   * the pair comes from (MindSpeed-LLM / MindSpeed-MM vs HF) and a bundled template fits, offer it in
   * one click (controllers/frameworks.js); what it would match is counted in the background.
   */
  function considerOffer() {
    const r = S.result;
    const lm = /** @type {HTMLInputElement} */ ($('opt-lm')).checked;
    const fuzzy = /** @type {HTMLInputElement} */ ($('opt-fm')).checked;
    const users = S.mode === 'dump' && !S.applied.npu?.demo && !S.applied.bench?.demo;
    offers.consider({
      names: r?.bench && users ? { npu: r.npu.names, bench: r.bench.names } : null,
      unmapped: !(lm && currentMapping()) && !fuzzy,
      matchedNow: S.models.npu?.matchedCount ?? 0,
      templates: templateNames,
      runOptions: S.runOpts,
    });
  }
  function renderOffer() {
    const o = store.get().offer;
    const el = $('template-offer');
    el.hidden = !o;
    if (!o) return;
    el.dataset.template = o.template;
    el.dataset.gain = o.gain === null ? '' : String(o.gain);
    el.dataset.now = String(o.now);
    const p = { npu: o.npu, bench: o.bench, template: o.template, now: o.now, gain: o.gain ?? '' };
    const base = t('NPU looks like {npu}, Bench like {bench}: the bundled {template} fits this pair', p);
    const text = o.gain === null
      ? `${base} (${t('now {now} NPU nodes matched; counting what it would match…', p)})`
      : o.gain < 0 ? `${base} (${t('now {now} NPU nodes matched', p)}).` : `${base}: ${t('it would match {gain} NPU nodes instead of {now}.', p)}`;
    $('offer-text').textContent = text;
    el.title = text;
  }
  store.subscribe(['offer'], renderOffer);
  $('offer-accept').addEventListener('click', () => {
    const template = offers.accept();
    if (!template) return;
    mappingSelect.value = `tpl:${template}`;
    mappingSelect.dispatchEvent(new Event('change'));
  });
  $('offer-dismiss').addEventListener('click', () => offers.dismiss());

  $('demo-btn').addEventListener('click', () => {
    if (confirmDiscard('Demo')) loadDemo();
  });

  async function loadDemo() {
    try {
      progress('Reading the demo');
      const demo = await host.loadDemo();
      S.sources = { npu: { ...demo.npu, root: demo.npu.label, demo: true }, bench: { ...demo.bench, root: demo.bench.label, demo: true } };
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

  // ---------------------------------------------------------------- layout (controllers/layout.js)
  // The graphs are the page: the load bar folds to one line once something is shown, the details
  // are a drawer, the sidebar and the outlines can be hidden or resized; sizes are remembered.
  const MINI = { w: 168 + 16, h: 118 + 16 };
  /** @param {PageState['layout']} l */
  function applyLayout(l) {
    const body = document.body;
    body.style.setProperty('--sidebar-w', `${l.sidebarW}px`);
    body.style.setProperty('--details-h', `${l.detailsH}px`);
    body.style.setProperty('--outline-w', `${l.outlineW}px`);
    panesEl.style.setProperty('--split', `${l.split}%`);
    body.dataset.detailsOpen = String(l.detailsOpen);
    body.dataset.outlineOpen = String(l.outlineOpen);
    const lb = $('loadbar');
    lb.classList.toggle('compact', !l.loadOpen);
    $('load-toggle').setAttribute('aria-expanded', String(l.loadOpen));
    /** @type {HTMLElement} */ ($('load-toggle').querySelector('.tw')).textContent = l.loadOpen ? '▾' : '▸';
    const sb = $('sidebar');
    sb.hidden = !l.sidebarOpen;
    $('sidebar-toggle').textContent = l.sidebarOpen ? '‹' : '›';
    $('sidebar-toggle').setAttribute('aria-expanded', String(l.sidebarOpen));
    $('details-toggle').setAttribute('aria-expanded', String(l.detailsOpen));
    for (const b of Array.from(document.querySelectorAll('[data-act="outline"]'))) b.setAttribute('aria-pressed', String(l.outlineOpen));
    /** @type {HTMLInputElement} */ ($('opt-minimap')).checked = l.minimapOpen;
    for (const side of SIDES) {
      minimaps[side].setEnabled(l.minimapOpen);
      views[side].reserve = l.minimapOpen ? MINI : null;
      miniButtons[side].textContent = l.minimapOpen ? '–' : t('map');
      miniButtons[side].title = t(l.minimapOpen ? 'Hide the minimap' : 'Show the minimap');
      miniButtons[side].style.right = l.minimapOpen ? `${8 + 1}px` : '8px';
    }
  }
  /** @type {Record<Side, HTMLButtonElement>} */
  const miniButtons = /** @type {any} */ ({});
  for (const side of SIDES) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'minimap-toggle';
    b.dataset.side = side;
    b.addEventListener('click', () => lc.toggle('minimapOpen'));
    /** @type {HTMLElement} */ ($(`${side}-canvas`).parentElement).append(b);
    miniButtons[side] = b;
  }
  store.subscribe(['layout'], (st, prev) => {
    applyLayout(st.layout);
    // Fit again when the minimap's corner changed.
    if (st.layout.minimapOpen !== prev.layout.minimapOpen) for (const side of SIDES) views[side].fit();
  });
  applyLayout(store.get().layout);

  $('load-toggle').addEventListener('click', () => lc.toggle('loadOpen'));
  $('load-compact').addEventListener('click', () => lc.toggle('loadOpen', true));
  $('details-toggle').addEventListener('click', () => lc.toggle('detailsOpen'));
  $('sidebar-toggle').addEventListener('click', () => lc.toggle('sidebarOpen'));
  $('opt-minimap').addEventListener('change', () => lc.toggle('minimapOpen', /** @type {HTMLInputElement} */ ($('opt-minimap')).checked));

  /**
   * A drag handle: pointer drags and arrow keys change one size.
   * @param {HTMLElement} handle @param {(ev: PointerEvent) => number} at the size for a pointer position
   * @param {'sidebarW' | 'detailsH' | 'split' | 'outlineW'} key @param {[string, string, number]} keys decrease key, increase key, step
   */
  function dragSize(handle, at, key, keys) {
    handle.addEventListener('pointerdown', (e) => {
      handle.setPointerCapture(e.pointerId);
      const move = (/** @type {PointerEvent} */ ev) => lc.set({ [key]: at(ev) });
      const up = () => {
        handle.removeEventListener('pointermove', move);
        handle.removeEventListener('pointerup', up);
      };
      handle.addEventListener('pointermove', move);
      handle.addEventListener('pointerup', up);
    });
    handle.addEventListener('keydown', (e) => {
      if (e.key !== keys[0] && e.key !== keys[1]) return;
      e.preventDefault();
      lc.set({ [key]: store.get().layout[key] + (e.key === keys[0] ? -keys[2] : keys[2]) });
    });
  }
  dragSize($('splitter'), (ev) => {
    const r = panesEl.getBoundingClientRect();
    return ((ev.clientX - r.left) / r.width) * 100;
  }, 'split', ['ArrowLeft', 'ArrowRight', 3]);
  dragSize($('hsplit'), (ev) => Math.min(window.innerHeight - 200, window.innerHeight - ev.clientY), 'detailsH', ['ArrowDown', 'ArrowUp', 30]);
  dragSize($('sidebar-resize'), (ev) => ev.clientX - $('sidebar').getBoundingClientRect().left, 'sidebarW', ['ArrowLeft', 'ArrowRight', 20]);
  $('hsplit').addEventListener('dblclick', () => lc.toggle('detailsOpen'));
  for (const h of /** @type {HTMLElement[]} */ (Array.from(document.querySelectorAll('.oresize')))) {
    const outline = $(`${h.dataset.side}-outline`);
    dragSize(h, (ev) => ev.clientX - outline.getBoundingClientRect().left, 'outlineW', ['ArrowLeft', 'ArrowRight', 20]);
  }

  /** The folded load bar's line: what is loaded, marked when it is the demo. */
  function renderCompact() {
    const el = $('load-compact');
    el.replaceChildren();
    /** @param {string} label @param {Source | null} src */
    const part = (label, src) => {
      const sp = document.createElement('span');
      sp.textContent = `${t(label)}: ${src ? src.label : '—'}`;
      el.append(sp);
      if (src?.demo) {
        const tag = document.createElement('span');
        tag.className = 'demo-tag';
        tag.textContent = t('demo');
        el.append(tag);
      }
    };
    if (S.mode === 'vis' && S.vis) {
      el.textContent = `${t('msprobe output')}: ${S.vis.name}`;
      return;
    }
    part('NPU', S.applied.npu);
    el.append(' ⇄ ');
    part('Bench', S.applied.bench);
    // Notes on the cards (warnings naming a side's file or the mapping) are folded away with them: say so.
    const notes = ['npu', 'bench', 'mapping'].filter((w) => !$(`${w}-warn`).hidden).length;
    if (notes) {
      const w = document.createElement('span');
      w.className = 'compact-warn';
      w.textContent = ` · ⚠ ${t('notes on the inputs: open them')}`;
      el.append(w);
    }
  }
  /** After a load: fold the inputs (unless a message on them needs reading). */
  function foldInputs() {
    renderCompact();
    const msg = ['npu', 'bench', 'mapping', 'vis', 'parallel'].some((w) => !$(`${w}-error`).hidden);
    if (!msg) lc.toggle('loadOpen', false);
  }

  // ---------------------------------------------------------------- mode (dump folders / msprobe file)
  /** @param {'dump' | 'vis'} mode */
  function setMode(mode) {
    S.mode = mode;
    document.body.dataset.mode = mode;
    for (const id of ['opt-lm', 'opt-fm', 'opt-oc', 'mapping-select', 'mapping-file']) {
      /** @type {HTMLInputElement | HTMLSelectElement} */ ($(id)).disabled = mode === 'vis';
    }
    if (mode === 'dump') {
      S.vis = null;
      $('vis-src').textContent = '.vis.db / .vis';
    }
  }

  // ---------------------------------------------------------------- msprobe output files
  /** @param {File} file */
  async function openVis(file) {
    const seq = ++S.loadSeq;
    if (S.running) client.restart().catch(() => {});
    S.running = true;
    setState('loading');
    setError('vis');
    setError('load');
    try {
      progress(STAGES.openVis);
      await client.start();
      const bytes = await file.arrayBuffer();
      const sqlWasm = await host.sqlWasm();
      const meta = await client.request({ type: 'openVis', name: file.name, bytes, sqlWasm }, [bytes, sqlWasm]);
      if (seq !== S.loadSeq) return;
      setMode('vis');
      S.vis = meta;
      S.sources = { npu: null, bench: null };
      S.applied = { npu: null, bench: null };
      S.sessionGen = client.generation;
      S.sessionId = -1;
      const layout = {
        npu: { kind: /** @type {'steps' | 'ranks' | 'files'} */ (meta.steps.length > 1 ? 'steps' : meta.ranks.length > 1 ? 'ranks' : 'files'), steps: meta.steps, ranks: meta.ranks },
        bench: null,
      };
      S.runLayout = layout;
      // A new file starts at its first step and rank.
      for (const id of ['step-select', 'rank-select']) $(id).replaceChildren();
      updateSelectors(layout);
      for (const side of SIDES) {
        setError(side);
        $(`${side}-src`).textContent = t('not used: showing {file}', { file: file.name });
      }
      $('vis-src').textContent = `${file.name} — ${meta.kind === 'db' ? '.vis.db' : t('.vis JSON (msprobe ≤ 8.1)')}`;
      const result = unpackRunResult(await client.request({ type: 'runVis', step: visStep(), rank: visRank() }));
      if (seq !== S.loadSeq) return;
      display(result);
      foldInputs();
    } catch (e) {
      if (seq !== S.loadSeq || (e instanceof CoreError && e.cancelled)) return;
      const msg = e instanceof Error ? e.message : String(e);
      setError('vis', msg);
      window.__probelens.errors.push({ where: 'vis', message: msg });
    } finally {
      if (seq === S.loadSeq) {
        S.running = false;
        progressDone();
        setState(S.result ? 'ready' : 'empty');
        document.body.dataset.loads = String(++S.loads);
      }
    }
  }

  const visStep = () => Number(/** @type {HTMLSelectElement} */ ($('step-select')).value || S.vis?.steps[0] || 0);
  const visRank = () => Number(/** @type {HTMLSelectElement} */ ($('rank-select')).value || S.vis?.ranks[0] || 0);

  /** Shows another step/rank of the opened file. */
  async function runVis() {
    const seq = ++S.loadSeq;
    S.running = true;
    setState('loading');
    setError('vis');
    try {
      progress(STAGES.openVis);
      const result = unpackRunResult(await client.request({ type: 'runVis', step: visStep(), rank: visRank() }));
      if (seq !== S.loadSeq) return;
      display(result);
    } catch (e) {
      if (seq !== S.loadSeq || (e instanceof CoreError && e.cancelled)) return;
      const msg = e instanceof Error ? e.message : String(e);
      setError('vis', msg);
      window.__probelens.errors.push({ where: 'vis', message: msg });
    } finally {
      if (seq === S.loadSeq) {
        S.running = false;
        progressDone();
        setState(S.result ? 'ready' : 'empty');
        document.body.dataset.loads = String(++S.loads);
      }
    }
  }

  $('vis-file').addEventListener('change', () => {
    const input = /** @type {HTMLInputElement} */ ($('vis-file'));
    const f = input.files?.[0];
    if (f && confirmDiscard('Opening a .vis.db')) openVis(f);
    input.value = '';
  });
  $('vis-card').addEventListener('dragover', (e) => {
    e.preventDefault();
    $('vis-card').classList.add('drop-hover');
  });
  $('vis-card').addEventListener('dragleave', () => $('vis-card').classList.remove('drop-hover'));
  $('vis-card').addEventListener('drop', (e) => {
    e.preventDefault();
    $('vis-card').classList.remove('drop-hover');
    const f = e.dataTransfer?.files?.[0];
    if (f && confirmDiscard('Opening a .vis.db')) openVis(f);
  });

  // ---------------------------------------------------------------- micro steps
  /** @param {RunResult} result */
  function setupMicroSteps(result) {
    const sel = /** @type {HTMLSelectElement} */ ($('micro-select'));
    const n = result.microSteps ?? 1;
    sel.replaceChildren();
    $('micro-wrap').hidden = !(n > 1);
    if (!(n > 1)) return;
    const all = document.createElement('option');
    all.value = '-1';
    all.textContent = t('all');
    sel.append(all);
    for (let k = 0; k < n; k++) {
      const o = document.createElement('option');
      o.value = String(k);
      o.textContent = String(k);
      sel.append(o);
    }
    sel.value = '-1';
  }

  /** Shows only the root children of micro step k (-1: all) in both panes. @param {number} k */
  function setMicroStep(k) {
    const sel = /** @type {HTMLSelectElement} */ ($('micro-select'));
    if (sel.querySelector(`option[value="${k}"]`)) sel.value = String(k);
    let changed = false;
    for (const side of SIDES) {
      const m = S.models[side];
      if (m && m.setMicroStep(k)) {
        changed = true;
        refresh(side);
        views[graphToPane(side)].fit();
      }
    }
    if (changed) {
      runSearch();
      runFilter();
      writeHash();
    }
  }
  $('micro-select').addEventListener('change', () => setMicroStep(Number(/** @type {HTMLSelectElement} */ ($('micro-select')).value)));

  // ---------------------------------------------------------------- search
  const searchSide = /** @type {HTMLSelectElement} */ ($('search-side'));
  const searchInput = /** @type {HTMLInputElement} */ ($('search-input'));
  const searchRegex = /** @type {HTMLInputElement} */ ($('search-regex'));
  /** @param {Side} side @returns {ListSourceFns} */
  const listFns = (side) => ({
    label: (i) => S.models[side]?.g.names[i] ?? '',
    color: (i) => {
      const m = S.models[side];
      const b = m && S.classes ? S.classes.bins[m.cls[i]] : null;
      return b ? b.color : '';
    },
  });
  /** @typedef {{label: (i: number) => string, color: (i: number) => string}} ListSourceFns */
  const countText = (/** @type {number} */ n, /** @type {number} */ pos) =>
    pos >= 0 ? t('{pos} of {n}', { pos: pos + 1, n }) : t(n === 1 ? '{n} node' : '{n} nodes', { n });
  const searchList = new NodeList($('search-box'), 'search', {
    label: (i) => listFns(/** @type {Side} */ (searchSide.value)).label(i),
    color: (i) => listFns(/** @type {Side} */ (searchSide.value)).color(i),
    onPick: (i) => pickFromList(/** @type {Side} */ (searchSide.value), i),
  }, countText);
  let searchTimer = 0;
  function runSearch() {
    const side = /** @type {Side} */ (searchSide.value);
    const m = S.models[side];
    const msg = $('search-msg');
    if (!m) {
      searchList.setItems(new Int32Array(0));
      msg.textContent = '';
      return;
    }
    const { hits, error } = searchNames(m.g.names, searchInput.value, searchRegex.checked, (i) => m.inStep(i));
    msg.textContent = error ? t('Invalid regular expression: {msg}', { msg: error }) : '';
    msg.classList.toggle('err', !!error);
    searchInput.setAttribute('aria-invalid', error ? 'true' : 'false');
    searchList.setItems(hits);
  }
  searchInput.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = window.setTimeout(runSearch, 120);
  });
  searchInput.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      clearTimeout(searchTimer);
      runSearch();
      searchList.step(e.shiftKey ? -1 : 1);
    } else if (e.key === 'ArrowDown') {
      e.preventDefault();
      searchList.el.focus();
      searchList.step(1);
    }
  });
  searchRegex.addEventListener('change', runSearch);
  searchSide.addEventListener('change', runSearch);

  /** Reveals, centres and selects a node chosen in a list. @param {Side} side @param {number} i */
  function pickFromList(side, i) {
    if (side === 'bench' && !S.result?.bench) return;
    select(side, i, 'api');
  }

  // ---------------------------------------------------------------- filters
  const filterSide = /** @type {HTMLSelectElement} */ ($('filter-side'));
  const filterKind = /** @type {HTMLSelectElement} */ ($('filter-kind'));
  const filterList = new NodeList($('filter-box'), 'filter', {
    label: (i) => listFns(/** @type {Side} */ (filterSide.value)).label(i),
    color: (i) => listFns(/** @type {Side} */ (filterSide.value)).color(i),
    onPick: (i) => pickFromList(/** @type {Side} */ (filterSide.value), i),
  }, countText);

  /** Fills the filter choices from the result's legend, each with its count on the chosen side. */
  function renderFilterKinds() {
    const keep = filterKind.value;
    filterKind.replaceChildren();
    const side = /** @type {Side} */ (filterSide.value);
    const m = S.models[side];
    const none = document.createElement('option');
    none.value = '';
    none.textContent = t('— choose a filter —');
    filterKind.append(none);
    if (!m || !S.classes || !S.result) return;
    const compare = !!S.result.bench;
    /** @type {[string, string][]} */
    const kinds = [];
    if (compare) {
      S.classes.bins.forEach((b, k) => {
        if (Number.isFinite(b.lo)) kinds.push([`cls:${k}`, t(b.label)]);
      });
      kinds.push(['unmatched', t('unmatched only')], ['matched', t('matched only')]);
    }
    const levels = new Set();
    for (const o of m.g.overflow) if (o) levels.add(o);
    for (const level of levels) kinds.push([`overflow:${level}`, t('overflow {level}', { level })]);
    for (const [value, label] of kinds) {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = `${label} (${filterNodes(m.g, m.cls, value, (i) => m.inStep(i)).length})`;
      filterKind.append(o);
    }
    filterKind.value = kinds.some(([v]) => v === keep) ? keep : '';
  }

  function runFilter() {
    const side = /** @type {Side} */ (filterSide.value);
    const m = S.models[side];
    renderFilterKinds();
    if (!m || !filterKind.value) {
      filterList.setItems(new Int32Array(0));
      return;
    }
    const pos = filterList.pos;
    filterList.setItems(filterNodes(m.g, m.cls, filterKind.value, (i) => m.inStep(i)));
    if (pos >= 0 && pos < filterList.items.length) {
      filterList.pos = pos;
      filterList.updateCount();
      filterList.render();
    }
  }
  filterKind.addEventListener('change', () => {
    filterList.pos = -1;
    runFilter();
  });
  filterSide.addEventListener('change', () => {
    filterList.pos = -1;
    runFilter();
  });

  // ---------------------------------------------------------------- diagnosis (controllers/diagnose.js)
  const divMsg = $('diverge-msg');
  const divList = $('diverge-list');
  const divWhy = $('diverge-why');
  const divOverlay = /** @type {HTMLInputElement} */ ($('diverge-overlay'));
  const heatPop = $('heatmap-pop');

  /** The step and rank of the shown result (the labels of its diagnosis). */
  function shownStepRank() {
    return { step: S.runOpts?.step ?? 0, rank: S.runOpts?.mergedRank ?? S.runOpts?.rank ?? 0 };
  }

  /** Why the diagnosis cannot run on the shown result, or ''. */
  function diagnoseBlocked() {
    if (!S.result || !S.result.bench) return t('The diagnosis needs a compare result (two sides).');
    if (S.mode !== 'dump') return t('The diagnosis needs the dump folders (this result was read from a msprobe output file).');
    if (S.sessionGen !== client.generation) return t('The core was restarted: reload the folders to diagnose.');
    return '';
  }

  /** Diagnoses the shown result and shows its top suspect. */
  async function runDiagnosis() {
    const why = diagnoseBlocked();
    if (why) {
      store.set((st) => ({ diagnosis: { ...st.diagnosis, error: why, result: null, divergence: null, overlay: false } }));
      return;
    }
    const { step, rank } = shownStepRank();
    const d = await dc.diagnose(step, rank);
    if (d && d.suspects.length) showSuspect(0);
  }
  $('diverge-btn').addEventListener('click', () => {
    runDiagnosis();
  });
  divOverlay.addEventListener('change', () => dc.setOverlay(divOverlay.checked));

  /**
   * Reveals suspect k on both sides: selects its NPU node (which reveals its counterpart) and, when
   * its Bench node is not that counterpart, reveals the Bench node too; the reason shows below.
   * @param {number} k
   */
  function showSuspect(k) {
    const d = store.get().diagnosis.result;
    const s = d?.suspects[k];
    if (!s || !S.result) return;
    if (s.npuIndex !== null && s.npuIndex >= 0) select('npu', s.npuIndex, 'api');
    const b = s.benchIndex;
    if (b !== null && b >= 0 && S.result.bench && (s.npuIndex === null || S.result.npu.matched[s.npuIndex] !== b)) {
      revealNode('bench', b);
      views[graphToPane('bench')].peer = b;
      outlines[graphToPane('bench')].setSelection(-1, b);
    }
    divWhy.textContent = `${s.node} ⇄ ${s.bench_node ?? t('(no Bench counterpart)')}: ${s.why}`;
    divWhy.dataset.node = s.node;
    divWhy.dataset.benchNode = s.bench_node ?? '';
    for (const li of Array.from(divList.children)) li.setAttribute('aria-current', String(Number(/** @type {HTMLElement} */ (li).dataset.k) === k));
  }

  /** The verdict line, as the CLI's (`Diagnosis::verdict_line`). @param {import('./protocol.js').Diagnosis} d */
  function verdictText(d) {
    const top = d.suspects[0];
    if (!top) return t('The runs agree within their float noise: no measured tensor differs beyond it ({n} tensors measured).', { n: d.measured });
    return t('The runs part ways at step {step}, rank {rank}, in {node} ({pass} pass).', { step: top.step, rank: top.rank, node: top.node, pass: t(top.pass) });
  }

  /** @type {string} the font of the suspects' names (read once) */
  let suspectFont = '';
  function renderSuspects() {
    const st = store.get().diagnosis;
    const d = st.result;
    divList.replaceChildren();
    divWhy.textContent = '';
    if (!d) return;
    const width = Math.max(80, divList.clientWidth - 8);
    for (const [k, it] of suspectItems(d).entries()) {
      const li = document.createElement('li');
      li.tabIndex = 0;
      li.dataset.k = String(k);
      li.dataset.node = it.node;
      li.dataset.benchNode = it.bench ?? '';
      li.title = it.title;
      const name = document.createElement('span');
      name.className = 's-name';
      if (!suspectFont) suspectFont = fontOf(divList);
      name.textContent = fitText(it.node, width, suspectFont);
      const meta = document.createElement('span');
      meta.className = 's-meta';
      meta.textContent = t('score {score} · {pass} · step {step} rank {rank}', { score: it.score, pass: t(it.pass), step: it.step, rank: it.rank });
      li.append(name, meta);
      li.addEventListener('click', () => showSuspect(k));
      li.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') showSuspect(k);
      });
      divList.append(li);
    }
  }

  /** Colours the panes by divergence (the overlay on) or by the result's classes. */
  function applyOverlay() {
    const st = store.get().diagnosis;
    const r = S.result;
    const on = st.overlay && !!st.divergence && !!r && st.divergence.length === r.npu.names.length;
    const legend = $('div-legend');
    legend.replaceChildren();
    legend.hidden = !on;
    if (!on || !r || !st.divergence) {
      for (const side of SIDES) {
        views[side].setPaint(null);
        outlines[side].setPaint(null);
      }
      return;
    }
    const cls = divergenceClasses(st.divergence, r.bench ? r.bench.matched : null);
    for (const side of SIDES) {
      const c = side === 'npu' ? cls.npu : cls.bench;
      const paint = c ? { bins: DIV_BINS, cls: c } : null;
      views[graphToPane(side)].setPaint(paint);
      outlines[graphToPane(side)].setPaint(paint);
    }
    const counts = classCounts(cls.npu);
    DIV_BINS.forEach((b, k) => {
      const li = document.createElement('li');
      li.dataset.div = b.cls;
      li.dataset.count = String(counts[k]);
      const sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = b.color;
      const tx = document.createElement('span');
      tx.textContent = `${t(b.label)} (${counts[k]})`;
      li.append(sw, tx);
      legend.append(li);
    });
  }

  function renderVerdict() {
    const d = store.get().diagnosis;
    divMsg.classList.toggle('err', !!d.error);
    divMsg.textContent = d.error ? d.error : d.running && !d.heatmaps.some((h) => h.running) ? t('Diagnosing…') : d.result ? verdictText(d.result) : '';
    divMsg.dataset.node = d.result?.suspects[0]?.node ?? '';
    divMsg.dataset.verdict = d.result?.verdict ?? '';
  }

  /** After a language switch: the diagnosis' texts again (the suspect shown keeps its place). */
  function relabelDiagnosis() {
    const cur = divList.querySelector('li[aria-current="true"]');
    const k = cur ? Number(/** @type {HTMLElement} */ (cur).dataset.k) : -1;
    renderVerdict();
    renderSuspects();
    const s = store.get().diagnosis.result?.suspects[k];
    if (s) {
      divWhy.textContent = `${s.node} ⇄ ${s.bench_node ?? t('(no Bench counterpart)')}: ${s.why}`;
      divList.children[k]?.setAttribute('aria-current', 'true');
    }
    applyOverlay();
    renderHeatmaps();
  }

  store.subscribe(['diagnosis'], (st, prev) => {
    const d = st.diagnosis;
    const p = prev.diagnosis;
    if (d.result !== p.result || d.running !== p.running || d.error !== p.error) {
      renderVerdict();
      if (d.result !== p.result) renderSuspects();
    }
    divOverlay.disabled = !d.divergence;
    // Shown once there is a diagnosis: until then the tool takes no more room than its buttons.
    $('diverge-overlay-row').hidden = !d.divergence;
    divOverlay.checked = d.overlay;
    if (d.overlay !== p.overlay || d.divergence !== p.divergence) applyOverlay();
    if (d.heatmaps !== p.heatmaps || d.key !== p.key) renderHeatmaps();
  });

  // ---- heatmaps
  /** The values of a selector's options (the loaded steps or ranks). @param {string} id */
  const optionValues = (id) => Array.from(/** @type {HTMLSelectElement} */ ($(id)).options, (o) => Number(o.value));
  /** What the heatmaps depend on besides the step and rank: the sources and the other options. */
  function heatInputs() {
    const rest = { ...(S.runOpts ?? {}) };
    for (const k of ['step', 'rank', 'mergedRank']) delete rest[/** @type {'step'} */ (k)];
    return { npu: S.applied.npu, bench: S.applied.bench, opts: JSON.stringify(rest) };
  }
  /** @type {ReturnType<typeof heatInputs> | null} the inputs of the heatmaps shown */
  let heatOf = null;

  async function runHeatmaps() {
    const why = diagnoseBlocked();
    if (why) {
      store.set((st) => ({ diagnosis: { ...st.diagnosis, error: why } }));
      return;
    }
    const { step, rank } = shownStepRank();
    const steps = optionValues('step-select');
    const ranks = S.mergedRanks ? [] : optionValues('rank-select');
    /** @type {{axis: 'step' | 'rank', keys: number[], at: number}[]} */
    const specs = [{ axis: 'step', keys: steps.length ? steps : [step], at: rank }];
    if (ranks.length > 1) specs.push({ axis: 'rank', keys: ranks, at: step });
    heatOf = heatInputs();
    heatPop.hidden = false;
    const opts = /** @type {import('./protocol.js').RunOptions} */ (S.runOpts);
    const d = store.get().diagnosis.result;
    const progressEl = $('heatmap-progress');
    const ok = await dc.heatmaps(
      specs,
      (axis, key, at) => {
        const o = { ...opts, step: axis === 'step' ? key : at, rank: axis === 'rank' ? key : at };
        delete o.mergedRank;
        return o;
      },
      { step, rank, diagnosis: d && d.step === step && d.rank === rank ? d : null },
      (done, total, axis, key) => {
        heatPop.dataset.done = String(done);
        heatPop.dataset.total = String(total);
        if (key < 0) {
          progressEl.textContent = '';
          return;
        }
        const spec = specs.find((x) => x.axis === axis);
        const k = spec ? spec.keys.indexOf(key) + 1 : 0;
        progressEl.textContent = t(axis === 'step' ? 'step {k} of {n}' : 'rank {k} of {n}', { k, n: spec?.keys.length ?? 0 });
      },
    );
    if (!ok) progressEl.textContent = t('stopped');
  }
  $('heatmap-btn').addEventListener('click', () => {
    runHeatmaps();
  });
  /** Hides the heatmaps, stopping them after the row in progress. */
  function closeHeatmaps() {
    dc.cancel();
    heatPop.hidden = true;
  }
  $('heatmap-close').addEventListener('click', closeHeatmaps);

  function renderHeatmaps() {
    const st = store.get().diagnosis;
    const box = $('heatmap-tables');
    box.replaceChildren();
    heatPop.dataset.running = String(st.heatmaps.some((h) => h.running));
    if (!st.heatmaps.length) heatPop.hidden = true;
    const { step, rank } = shownStepRank();
    for (const h of st.heatmaps) {
      const { layers, cells } = heatmapMatrix(h);
      const table = document.createElement('table');
      table.className = 'heatmap';
      table.dataset.axis = h.axis;
      const cap = document.createElement('caption');
      cap.textContent = h.axis === 'step' ? t('step × layer (rank {rank})', { rank: h.at }) : t('rank × layer (step {step})', { step: h.at });
      table.append(cap);
      const head = document.createElement('thead');
      const hr = document.createElement('tr');
      hr.append(document.createElement('th'));
      for (const l of layers) {
        const th = document.createElement('th');
        th.textContent = l;
        th.title = l;
        hr.append(th);
      }
      head.append(hr);
      table.append(head);
      const body = document.createElement('tbody');
      h.keys.forEach((key, k) => {
        const tr = document.createElement('tr');
        tr.dataset.key = String(key);
        const shown = h.axis === 'step' ? key === step && h.at === rank : key === rank && h.at === step;
        tr.classList.toggle('shown', shown);
        const th = document.createElement('th');
        th.textContent = `${t(h.axis)} ${key}`;
        const d = h.rows[k];
        if (d) th.title = d.verdict === 'agree' ? t('agree') : t('diverged');
        tr.append(th);
        const row = cells[k];
        const err = h.errors[k];
        for (let c = 0; c < Math.max(1, layers.length); c++) {
          const td = document.createElement('td');
          const cell = row?.[c] ?? null;
          const layer = layers[c] ?? '';
          if (err) {
            td.className = 'err';
            td.textContent = '!';
            td.title = err;
          } else if (!row) {
            td.className = 'pending';
          } else if (cell) {
            const v = cell.div;
            td.style.background = DIV_BINS[divClass(v)].color;
            td.dataset.layer = layer;
            td.dataset.div = v === null ? '' : String(v);
            if (cell.source) {
              td.classList.add('source');
              td.dataset.source = 'true';
            }
            td.title = `${t(h.axis)} ${key} · ${layer}: ${v === null ? t('not measured') : t('divergence 10^{v} × the noise floor', { v: v.toFixed(2) })}${cell.source ? ` · ${t('holds the top suspect')}` : ''}`;
            td.addEventListener('click', () => openCell(h.axis, key, h.at, layer));
          }
          tr.append(td);
        }
        body.append(tr);
      });
      table.append(body);
      box.append(table);
    }
  }

  /**
   * Shows the step (or rank) of a heatmap cell, with the other coordinate of its heatmap, and reveals
   * the layer's module in the NPU pane.
   * @param {'step' | 'rank'} axis @param {number} key @param {number} at @param {string} layer
   */
  async function openCell(axis, key, at, layer) {
    const stepSel = /** @type {HTMLSelectElement} */ ($('step-select'));
    const rankSel = /** @type {HTMLSelectElement} */ ($('rank-select'));
    const want = { step: axis === 'step' ? key : at, rank: axis === 'rank' ? key : at };
    const { step, rank } = shownStepRank();
    if (want.step !== step || want.rank !== rank) {
      stepSel.value = String(want.step);
      rankSel.value = String(want.rank);
      await rerun();
    }
    const r = S.result;
    if (!r) return;
    const i = layerNode(r.npu.names, layer);
    if (i >= 0) select('npu', i, 'api');
  }

  // ---------------------------------------------------------------- manual match (controllers/manual.js)
  const pairsList = new NodeList($('pairs-box'), 'pairs', {
    label: (i) => `${S.result?.npu.names[i] ?? ''} ⇄ ${S.result?.bench?.names[S.manual.get(i) ?? -1] ?? ''}`,
    color: (i) => listFns('npu').color(i),
    onPick: (i) => select('npu', i, 'api'),
  }, (n, pos) => (pos >= 0 ? t('{pos} of {n}', { pos: pos + 1, n }) : t(n === 1 ? '{n} manual pair' : '{n} manual pairs', { n })));

  /** @param {string} text @param {boolean} [err] */
  const matchMsg = (text, err = false) => mc.say(text, err);
  const canMatch = () => mc.canMatch();

  /** Why manual matching cannot work on the shown result, or null. */
  function matchBlockedReason() {
    // A .vis.db of statistics or md5: the pair is re-compared from the statistics the file stores.
    if (S.mode === 'vis') return S.vis?.whyNotMatch ?? null;
    if (S.result && S.result.bench && S.sessionGen !== client.generation) return t('The core was restarted: reload the folders to match by hand.');
    return null;
  }
  function updateMatchBlocked() {
    store.set({ matchBlocked: S.result?.bench ? matchBlockedReason() : null });
  }

  function renderPicks() {
    for (const side of SIDES) {
      const i = S.pick[side];
      const g = side === 'npu' ? S.result?.npu : S.result?.bench;
      const el = $(`pick-${side}`);
      el.textContent = g && i >= 0 ? g.names[i] : '—';
      el.title = el.textContent;
      if (S.result?.bench) {
        views[side].pick = i;
        outlines[side].pick = i;
        views[side].invalidate();
        outlines[side].render();
      }
    }
  }

  function renderMatchButtons() {
    const ok = canMatch();
    const r = S.result;
    const recursive = /** @type {HTMLInputElement} */ ($('match-recursive')).checked;
    const plan = mc.preview(recursive);
    /** @type {HTMLButtonElement} */ ($('match-btn')).disabled = !ok || !plan.ok || S.matching;
    $('match-btn').title = plan.text;
    const blocked = store.get().matchBlocked;
    $('match-hint').hidden = !!blocked;
    const pv = $('match-preview');
    pv.textContent = r?.bench ? plan.text : '';
    pv.classList.toggle('blocked', !plan.ok);
    const sel = S.selection;
    const g = sel && r ? (sel.side === 'npu' ? r.npu : r.bench) : null;
    /** @type {HTMLButtonElement} */ ($('unmatch-btn')).disabled = !ok || !sel || !g || g.matched[sel.index] < 0;
    /** @type {HTMLButtonElement} */ ($('undo-btn')).disabled = !ok || !S.history.undo.length;
    /** @type {HTMLButtonElement} */ ($('redo-btn')).disabled = !ok || !S.history.redo.length;
    /** @type {HTMLButtonElement} */ ($('match-save')).disabled = !ok || !S.manual.size;
    $('match-save-db').hidden = !(S.mode === 'vis' && S.vis?.kind === 'db');
    /** @type {HTMLButtonElement} */ ($('match-save-db')).disabled = !ok || !S.history.undo.length;
    /** @type {HTMLInputElement} */ ($('match-load')).disabled = !ok;
    for (const id of ['unmatch-btn', 'undo-btn', 'redo-btn', 'match-save']) $(id).title = blocked ?? $(id).dataset.tip ?? '';
    $('match-tool').dataset.manual = String(S.manual.size);
    $('match-tool').dataset.undo = String(S.history.undo.length);
    $('match-tool').dataset.redo = String(S.history.redo.length);
  }
  for (const id of ['unmatch-btn', 'undo-btn', 'redo-btn', 'match-save']) $(id).dataset.tip = $(id).title;

  function renderPairs() {
    pairsList.setItems(Int32Array.from([...S.manual.keys()].sort((a, b) => a - b)));
  }

  store.subscribe(['pick', 'result'], renderPicks);
  store.subscribe(['pick', 'manual', 'history', 'matching', 'selection', 'result', 'matchBlocked', 'resultVersion'], renderMatchButtons);
  store.subscribe(['manual', 'result'], renderPairs);
  store.subscribe(['matchMsg'], (st) => {
    const el = $('match-msg');
    el.textContent = st.matchMsg.text;
    el.classList.toggle('err', st.matchMsg.err);
  });
  $('match-recursive').addEventListener('change', renderMatchButtons);

  // The shown result's columns changed in place (a match operation): counts, colours, lists, details.
  store.subscribe(['resultVersion'], () => {
    const r = S.result;
    const c = S.classes;
    if (!r || !c) return;
    for (const side of SIDES) {
      const m = S.models[side];
      if (!m) continue;
      m.recount();
      outlines[side].el.dataset.matchedCount = String(m.matchedCount);
      outlines[side].render();
      views[side].invalidate();
    }
    renderLegend(r, c, true);
    renderSummary(r, c, true);
    runFilter();
    // The diagnosis was made before this change (manual matches take part in it): make it again.
    if (store.get().diagnosis.result) dc.resultShown(store.get().diagnosis.key, true);
    if (S.selection) {
      // The counterpart may have changed: select again (keeps the view and the picks) and reload the details.
      const { side, index } = S.selection;
      select(side, index, 'refresh');
    }
    hooks.changed();
  });

  /** Clears the tools' state for a new result (the hand-made pairs: see `mc.resultShown`). */
  function resetTools() {
    S.nameIndex = null;
    $('export-msg').textContent = '';
    runSearch();
    filterList.pos = -1;
    runFilter();
  }

  /** @param {import('./protocol.js').MatchOp[]} ops @param {string} label */
  const userOps = (ops, label) => mc.userOps(ops, label);

  async function doMatch() {
    const { npu } = S.pick;
    const recursive = /** @type {HTMLInputElement} */ ($('match-recursive')).checked;
    if (S.matching) return;
    const entry = await mc.match(recursive);
    if (entry) select('npu', npu, 'refresh');
  }

  async function doUnmatch() {
    const sel = S.selection;
    if (!sel) return;
    if (/** @type {HTMLButtonElement} */ ($('unmatch-btn')).disabled) {
      const blocked = store.get().matchBlocked;
      if (blocked) matchMsg(blocked, true);
      return;
    }
    await mc.unmatch(sel.side, sel.index);
  }

  /** @param {boolean} redo */
  const undoRedo = (redo) => mc.undoRedo(redo);

  function nameIndex() {
    if (!S.nameIndex && S.result) {
      const idx = (/** @type {string[]} */ names) => new Map(names.map((n, i) => [n, i]));
      S.nameIndex = { npu: idx(S.result.npu.names), bench: idx(S.result.bench?.names ?? []) };
    }
    return S.nameIndex;
  }

  function saveManual() {
    if (!S.result?.bench || !S.manual.size) return;
    const step = /** @type {HTMLSelectElement} */ ($('step-select')).value || '0';
    const rank = /** @type {HTMLSelectElement} */ ($('rank-select')).value || '0';
    download(new Blob([mc.configText()], { type: 'application/json' }), `probelens_${step}_${rank}.vis.config`);
    matchMsg(t('Saved {n} manual pair(s).', { n: S.manual.size }));
  }

  /** Re-applies a .vis.config file `{npu node: bench node}` by names. @param {File} file */
  async function loadManual(file) {
    let obj;
    try {
      obj = JSON.parse(await readText(file));
    } catch (e) {
      matchMsg(t('{file}: not a JSON file ({msg})', { file: file.name, msg: e instanceof Error ? e.message : String(e) }), true);
      return;
    }
    await mc.loadConfig(obj, file.name);
  }

  /**
   * Before an action that would drop the hand-made pairs for good (other folders, the demo, a
   * msprobe file): asks, naming how many. Pairs of other steps/ranks count too (kept by name).
   * @param {string} action what the user did, for the question
   */
  function confirmDiscard(action) {
    const shown = S.manual.size;
    let kept = 0;
    for (const [k, v] of store.get().kept) if (k !== store.get().runKey) kept += v.length;
    const n = shown + kept;
    if (!n) return true;
    const ok = window.confirm(t('{action} discards your {n} manual match(es). Save them first with Manual match → Save (.vis.config). Discard them?', { action: t(action), n }));
    if (ok) mc.forgetAll();
    return ok;
  }

  /** The opened .vis.db with the manual matches made on it, downloaded (the file itself is not changed). */
  async function saveVisDb() {
    if (S.mode !== 'vis' || S.vis?.kind !== 'db') return;
    try {
      const { bytes } = await client.request({ type: 'exportVis' });
      const name = S.vis.name.replace(/\.gz$/, '').replace(/(\.vis)?\.db$/, '') + '.matched.vis.db';
      download(new Blob([bytes], { type: 'application/vnd.sqlite3' }), name);
      matchMsg(t('Saved {file} with {n} manual pair(s).', { file: name, n: S.manual.size }));
    } catch (e) {
      matchMsg(e instanceof Error ? e.message : String(e), true);
    }
  }
  $('match-save-db').addEventListener('click', () => saveVisDb());
  $('match-btn').addEventListener('click', () => doMatch());
  $('unmatch-btn').addEventListener('click', () => doUnmatch());
  $('undo-btn').addEventListener('click', () => undoRedo(false));
  $('redo-btn').addEventListener('click', () => undoRedo(true));
  $('match-save').addEventListener('click', () => saveManual());
  $('match-load').addEventListener('change', () => {
    const input = /** @type {HTMLInputElement} */ ($('match-load'));
    const f = input.files?.[0];
    if (f) loadManual(f);
    input.value = '';
  });

  // ---------------------------------------------------------------- exports
  /** Saves a blob through an <a download> with a blob: URL. @param {Blob} blob @param {string} name */
  function download(blob, name) {
    const url = URL.createObjectURL(blob);
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    a.hidden = true;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30000);
  }

  /** @param {string} text @param {boolean} [err] */
  function exportMsg(text, err = false) {
    $('export-msg').textContent = text;
    $('export-msg').classList.toggle('err', err);
  }

  installGraphExports(views, download, exportMsg);
  $('csv-node').addEventListener('click', () => {
    if (!details.table.length) return exportMsg(t('Select a node with tensors first.'), true);
    const name = details.root.dataset.node || 'node';
    download(new Blob([toCsv(details.table)], { type: 'text/csv' }), `${name.replace(/[^\w.-]+/g, '_')}.csv`);
  });
  $('csv-all').addEventListener('click', async () => {
    if (!S.result?.bench) return exportMsg(t('The compare table needs a compare result (two sides).'), true);
    try {
      exportMsg(t('Exporting the compare table') + '…');
      const { csv, rows } = await client.request({ type: 'exportCsv' });
      download(new Blob([csv], { type: 'text/csv' }), 'probelens_compare.csv');
      exportMsg(t('{n} compared tensors exported.', { n: rows }));
    } catch (e) {
      exportMsg(e instanceof Error ? e.message : String(e), true);
    }
  });

  // ---------------------------------------------------------------- mapping editor, suggestions, export
  /** Matched and unmatched node counts of the shown result, per side. */
  function matchCounts() {
    const r = S.result;
    const mN = S.models.npu?.matchedCount ?? 0;
    const mB = S.models.bench?.matchedCount ?? 0;
    return {
      matchedNpu: mN,
      matchedBench: mB,
      unmatchedNpu: (r?.npu.names.length ?? 0) - mN,
      unmatchedBench: (r?.bench?.names.length ?? 0) - mB,
    };
  }

  /**
   * Re-runs the shown step/rank/options with `text` as the layer mapping (the editor's choice in the
   * mapping card, -lm on), then re-applies the hand-made pairs by node name where both nodes exist.
   * @param {string} text @param {string} name file name for the core's messages
   * @returns {Promise<import('./mappingpanel.js').MappingRun | null>} null when the run failed or was superseded
   */
  async function runMapping(text, name) {
    const r0 = S.result;
    if (!r0 || S.mode !== 'dump') return null;
    const before = matchCounts();
    /** @type {[string, string][]} */
    addMapping({ key: 'editor', name: `editor: ${name}`, text });
    /** @type {HTMLInputElement} */ ($('opt-lm')).checked = true;
    const t0 = performance.now();
    // The re-run re-applies the hand-made pairs of this step and rank by name (display → mc.resultShown).
    await rerun();
    const runMs = performance.now() - t0;
    const r = S.result;
    if (!r || r === r0 || currentMapping()?.key !== 'editor') return null;
    const re = await S.reapply;
    if (S.result !== r) return null;
    return { before, after: matchCounts(), runMs, ...re };
  }

  /** Reveals a node in its pane without selecting it. @param {Side} side @param {number} i */
  function revealNode(side, i) {
    const m = S.models[side];
    if (!m || i < 0 || i >= m.n) return;
    if (!m.inStep(i)) setMicroStep(-1);
    if (m.reveal(i)) refresh(side);
    const pane = graphToPane(side);
    outlines[pane].scrollTo(i);
    views[pane].showNode(i);
    views[pane].invalidate();
  }

  const mappingPanel = new MappingPanel({
    client,
    hooks,
    result: () => (S.mode === 'dump' && S.sessionGen === client.generation ? S.result : null),
    busy: () => S.running || S.matching,
    canMatch,
    whyNot: () => store.get().matchBlocked ?? (store.get().matchMsg.text || t('Manual matching needs a compare result (two sides).')),
    fuzzy: () => /** @type {HTMLInputElement} */ ($('opt-fm')).checked,
    manualPairs: () => mc.pairsByName(),
    mappingChoice: () => {
      const c = currentMapping();
      return c ? { key: c.key, name: c.name.replace(/^[a-z]+: /, ''), text: c.text } : null;
    },
    runMapping,
    userOps,
    counts: matchCounts,
    showPair: (npu, bench) => {
      select('npu', npu, 'api');
      mc.setPicks({ npu, bench });
      revealNode('bench', bench);
    },
    download,
    listTemplates: () => host.listTemplates(),
    getTemplate: (name) => host.getTemplate(name),
  });
  $('mapping-toggle').addEventListener('click', () => mappingPanel.toggle());

  // ---------------------------------------------------------------- language, help, sidebar
  const langBtn = $('lang-btn');
  function relabel() {
    translateDom(document);
    langBtn.textContent = getLang() === 'zh' ? 'English' : '中文';
    document.title = t('probelens — msprobe NPU vs Bench graph compare');
    if (S.result) {
      const compare = S.result.graphType === 'compare' && !!S.result.bench;
      renderTitles();
      if (S.classes) {
        renderLegend(S.result, S.classes, compare);
        renderSummary(S.result, S.classes, compare);
      }
    } else if (!S.running) $('summary').textContent = t('No data loaded.');
    if (S.mode === 'dump') for (const side of SIDES) showSource(side);
    renderMappingSelect();
    if (S.runLayout) updateSelectors(S.runLayout);
    const micro = /** @type {HTMLSelectElement} */ ($('micro-select')).querySelector('option[value="-1"]');
    if (micro) micro.textContent = t('all');
    searchList.updateCount();
    filterList.updateCount();
    pairsList.updateCount();
    renderFilterKinds();
    details.rerender();
    mappingPanel.relabel();
    relabelDiagnosis();
  }
  langBtn.addEventListener('click', () => {
    setLang(getLang() === 'zh' ? 'en' : 'zh', true);
    relabel();
    writeHash();
  });

  const helpPop = $('help-pop');
  /** @param {boolean} [show] */
  function toggleHelp(show) {
    helpPop.hidden = !(show ?? helpPop.hidden);
    $('help-btn').setAttribute('aria-expanded', helpPop.hidden ? 'false' : 'true');
    if (!helpPop.hidden) $('help-close').focus();
  }
  $('help-btn').addEventListener('click', () => toggleHelp());
  $('help-close').addEventListener('click', () => toggleHelp(false));
  document.addEventListener('pointerdown', (e) => {
    const tgt = /** @type {HTMLElement} */ (e.target);
    if (!helpPop.hidden && !helpPop.contains(tgt) && tgt !== $('help-btn')) toggleHelp(false);
  });


  // ---------------------------------------------------------------- keyboard
  /** The pane under the pointer, else the pane of the selection, else the NPU pane. @returns {Side} */
  function activePane() {
    for (const side of SIDES) if (views[side].pointer.inside) return side;
    return S.selection ? graphToPane(S.selection.side) : 'npu';
  }

  document.addEventListener('keydown', (e) => {
    const tgt = /** @type {HTMLElement} */ (e.target);
    const typing =
      (tgt instanceof HTMLInputElement && !['checkbox', 'radio', 'button', 'file'].includes(tgt.type)) ||
      tgt instanceof HTMLTextAreaElement || tgt instanceof HTMLSelectElement || tgt.isContentEditable;
    if (e.key === 'Escape') {
      if (!helpPop.hidden) toggleHelp(false);
      else if (!heatPop.hidden) closeHeatmaps();
      else if (tgt === searchInput) searchInput.blur();
      return;
    }
    if (typing || e.defaultPrevented) return;
    const mod = e.ctrlKey || e.metaKey;
    if (mod && !e.altKey && (e.key === 'z' || e.key === 'Z')) {
      e.preventDefault();
      undoRedo(e.shiftKey);
      return;
    }
    if (mod && !e.altKey && (e.key === 'y' || e.key === 'Y')) {
      e.preventDefault();
      undoRedo(true);
      return;
    }
    if (mod || e.altKey) return;
    const pane = activePane();
    switch (e.key) {
      case '/':
        e.preventDefault();
        if (!store.get().layout.sidebarOpen) lc.toggle('sidebarOpen', true);
        searchInput.focus();
        searchInput.select();
        return;
      case '?':
        e.preventDefault();
        toggleHelp();
        return;
      case 'w': case 'W':
        views[pane].zoomKey(1.25);
        return;
      case 's': case 'S':
        views[pane].zoomKey(1 / 1.25);
        return;
      case 'a': case 'A':
        views[pane].panBy(80, 0);
        return;
      case 'd': case 'D':
        views[pane].panBy(-80, 0);
        return;
      case 'm': case 'M':
        e.preventDefault();
        doMatch();
        return;
      default:
    }
    // Arrows, Enter, Home/End, PageUp/PageDown on the page move in the outline of the active pane.
    const nav = ['ArrowDown', 'ArrowUp', 'ArrowLeft', 'ArrowRight', 'Enter', 'Home', 'End', 'PageUp', 'PageDown'];
    if (nav.includes(e.key) && (tgt === document.body || tgt instanceof HTMLCanvasElement)) {
      outlines[pane].el.focus();
      outlines[pane].onKey(e);
    }
  });

  // ---------------------------------------------------------------- URL hash (view state)
  /** @returns {HashState | null} */
  const readHash = () => parseHash(location.hash);

  let hashTimer = 0;
  let lastHash = '';
  function writeHash() {
    if (S.restoring) return;
    clearTimeout(hashTimer);
    hashTimer = window.setTimeout(() => {
      if (S.restoring) return;
      /** @type {Parameters<typeof buildHash>[0]} */
      const v = { lang: getLang(), open: {}, all: {} };
      if (S.result) {
        if (!$('step-wrap').hidden) v.step = /** @type {HTMLSelectElement} */ ($('step-select')).value;
        if (!$('rank-wrap').hidden) v.rank = /** @type {HTMLSelectElement} */ ($('rank-select')).value;
        v.micro = S.models.npu?.micro ?? -1;
        if (S.selection) {
          const g = S.selection.side === 'npu' ? S.result.npu : S.result.bench;
          if (g) v.sel = { side: S.selection.side, name: g.names[S.selection.index] };
        }
        for (const side of SIDES) {
          const m = S.models[side];
          if (!m) continue;
          const open = [];
          let all = true;
          for (let i = 1; i < m.n; i++) {
            if (!m.hasChildren(i)) continue;
            if (m.expanded[i]) open.push(m.g.names[i]);
            else all = false;
          }
          /** @type {any} */ (v.open)[side] = open;
          /** @type {any} */ (v.all)[side] = all;
        }
      }
      lastHash = buildHash(v);
      if (location.hash !== lastHash) history.replaceState(null, '', lastHash);
    }, 150);
  }

  /** Applies a view state from the URL once its files are shown. */
  function applyPendingHash() {
    const h = S.pendingHash;
    const r = S.result;
    if (!h || !r) return;
    // Another step or rank first (a re-run; display() comes back here).
    if (!h.switched) {
      h.switched = true;
      let rerunNeeded = false;
      for (const [key, want] of /** @type {[string, number | undefined][]} */ ([['step', h.step], ['rank', h.rank]])) {
        const sel = /** @type {HTMLSelectElement} */ ($(`${key}-select`));
        if (want !== undefined && !$(`${key}-wrap`).hidden && sel.value !== String(want) && sel.querySelector(`option[value="${want}"]`)) {
          sel.value = String(want);
          rerunNeeded = true;
        }
      }
      if (rerunNeeded) {
        setTimeout(() => rerun(), 0);
        return;
      }
    }
    S.pendingHash = null;
    S.restoring = true;
    try {
      if (h.micro !== undefined && h.micro >= 0 && r.microSteps > h.micro) setMicroStep(h.micro);
      const idx = nameIndex();
      for (const side of SIDES) {
        const m = S.models[side];
        const open = h.open[side];
        if (!m || !open || !idx) continue;
        if (open === '*') m.setAll(true);
        else for (const name of open) {
          const i = idx[side].get(name);
          if (i !== undefined) m.setExpanded(i, true);
        }
        refresh(side);
      }
      if (h.sel && idx) {
        const i = idx[h.sel.side].get(h.sel.name);
        if (i !== undefined) select(h.sel.side, i, 'api');
      }
    } finally {
      S.restoring = false;
    }
    writeHash();
  }

  window.addEventListener('hashchange', () => {
    if (location.hash === lastHash) return;
    const h = readHash();
    if (!h) return;
    if (h.lang === 'en' || h.lang === 'zh') {
      setLang(h.lang, false);
      relabel();
    }
    S.pendingHash = h;
    applyPendingHash();
  });

  // ---------------------------------------------------------------- test & debug hook
  window.__probelens = {
    lastResult: null,
    errors: [],
    timings: { displayMs: 0 },
    /** Loads for which the shown result (a build) freed its graph (see the worker's `adoptSide`). */
    suspends: 0,
    get state() {
      return S;
    },
    get diagnosis() {
      return store.get().diagnosis;
    },
    views,
    outlines,
    minimaps,
    select: (/** @type {Side} */ side, /** @type {number} */ i) => select(side, i, 'api'),
    toggle: (/** @type {Side} */ side, /** @type {number} */ i, /** @type {boolean | undefined} */ open) => toggle(side, i, open),
    setMicroStep,
    loadDemo,
    mappingPanel,
  };

  S.pendingHash = readHash();
  const hashLang = S.pendingHash?.lang;
  setLang(hashLang === 'en' || hashLang === 'zh' ? hashLang : detectLang(), false);
  relabel();
  clearDisplay();
  setState('empty');
  loadDemo();
}
