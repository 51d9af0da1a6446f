// @ts-check
// The page: wiring. The state lives in one store (store.js); the feature logic in controllers/
// (load, display, selection, manual match, tools, layout, diagnosis, template offer, URL hash), which
// hold no DOM; this file makes the elements, draws from the store and hands the controllers what
// they ask of the page.
import { $ } from './dom.js';
import { CoreClient } from './client.js';
import { SIDES } from './protocol.js';
import { filesFromInput, filesFromDrop, readText, isYaml } from './loader.js';
import { GraphView } from './graphview.js';
import { Outline } from './outline.js';
import { DetailsPanel } from './details.js';
import { Minimap } from './minimap.js';
import { NodeList } from './listview.js';
import { toCsv } from './csv.js';
import { t, detectLang, setLang, getLang, translateDom } from './i18n.js';
import { MappingPanel } from './mappingpanel.js';
import { showWelcome } from './welcome.js';
import { installGraphExports } from './graphexport.js';
import { createStore } from './store.js';
import { installDiagnosis } from './diagnoseview.js';
import { installLayout } from './layoutview.js';
import { installManualMatch } from './matchview.js';
import { fmtBytes, showSource, renderTitles, renderLegend, renderSummary, renderDiagnostics, renderCardWarnings, renderCompact } from './resultview.js';
import { createManualController, MANUAL_INITIAL } from './controllers/manual.js';
import { createDiagnoseController, DIAGNOSIS_INITIAL } from './controllers/diagnose.js';
import { createLayoutController, readLayout, defaultsFor } from './controllers/layout.js';
import { createOfferController } from './controllers/frameworks.js';
import { parseHash, createHashController } from './controllers/hash.js';
import { createLoadController, LOAD_INITIAL, pairKey } from './controllers/load.js';
import { createDisplayController, DISPLAY_INITIAL, matchCounts, graphOfPane, paneOfGraph } from './controllers/display.js';
import { createSelectionController } from './controllers/selection.js';
import { createToolsController, TOOLS_INITIAL } from './controllers/tools.js';

/** @typedef {import('./protocol.js').Side} Side */
/** @typedef {import('./protocol.js').RunResult} RunResult */
/** @typedef {import('./protocol.js').Layout} Layout */
/** @typedef {import('./controllers/load.js').Source} Source */
/** @typedef {import('./controllers/load.js').MappingChoice} MappingChoice */

/**
 * What the entry point (served site or single file) provides.
 * @typedef {object} Host
 * @property {() => Worker} makeWorker
 * @property {() => (ArrayBuffer | undefined)} wasmBytes  module bytes for initSync, or undefined (worker fetches)
 * @property {() => Promise<import('./controllers/load.js').Demo>} loadDemo
 * @property {() => Promise<string[]>} listTemplates  bundled mapping templates (mappings/*.yaml)
 * @property {(name: string) => Promise<string>} getTemplate
 * @property {() => Promise<ArrayBuffer>} sqlWasm  the sql.js module bytes (for opening a .vis.db)
 */

/** @param {string} id */
const input = (id) => /** @type {HTMLInputElement} */ ($(id));
/** @param {string} id */
const select$ = (id) => /** @type {HTMLSelectElement} */ ($(id));

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
  const client = new CoreClient(host.makeWorker, host.wasmBytes, knob('stream'), knob('heap'), knob('slice'));

  const storage = (() => {
    try {
      return window.localStorage;
    } catch {
      return null;
    }
  })();
  /**
   * The page's state (store.js): views subscribe to its slices, controllers change it.
   * @typedef {import('./controllers/manual.js').ManualState
   *   & import('./controllers/load.js').LoadState
   *   & import('./controllers/display.js').DisplayState
   *   & import('./controllers/tools.js').ToolsState
   *   & {
   *   layout: import('./controllers/layout.js').LayoutState,
   *   offer: import('./controllers/frameworks.js').Offer | null,
   *   diagnosis: import('./controllers/diagnose.js').DiagnosisState,
   * }} PageState
   */
  const store = createStore(/** @type {PageState} */ ({
    ...LOAD_INITIAL,
    ...DISPLAY_INITIAL,
    ...TOOLS_INITIAL,
    classes: null,
    resultVersion: 0,
    runKey: '',
    matchBlocked: null,
    kept: new Map(),
    ...MANUAL_INITIAL,
    layout: readLayout(storage, defaultsFor(window.innerWidth, window.innerHeight)),
    offer: null,
    diagnosis: DIAGNOSIS_INITIAL,
  }));
  const get = store.get;
  const mc = createManualController(store, client, (k, p) => t(k, p));
  const lay = createLayoutController(store, storage);
  const dc = createDiagnoseController(store, client);
  const offers = createOfferController(store, client, (name) => host.getTemplate(name));
  const tools = createToolsController(store, client, (k, p) => t(k, p));
  const disp = createDisplayController(store, {
    ui: { render: renderResult, shown: resultShownUi },
    manual: mc,
    diagnosis: dc,
    generation: () => client.generation,
    visPair: () => ld.visPair(),
    t: (k) => t(k),
  });
  const sel = createSelectionController(store, client, {
    manual: mc,
    ui: {
      refresh: (pane) => {
        outlines[pane].refresh();
        views[pane].invalidate();
      },
      showSelected(pane, i, from) {
        views[pane].selected = i;
        views[pane].peer = -1;
        outlines[pane].setSelection(i, -1);
        if (from !== 'outline') outlines[pane].scrollTo(i);
        if (from !== 'canvas') views[pane].showNode(i);
        views[pane].invalidate();
      },
      showPeer(pane, peer) {
        views[pane].selected = -1;
        views[pane].peer = peer;
        outlines[pane].setSelection(-1, peer);
        if (peer < 0) {
          views[pane].invalidate();
          return;
        }
        outlines[pane].scrollTo(peer);
        views[pane].showNode(peer);
      },
      reveal(pane, i) {
        outlines[pane].scrollTo(i);
        views[pane].showNode(i);
        views[pane].invalidate();
      },
      fit: (pane) => views[pane].fit(),
      microShown(k, changed) {
        const el = select$('micro-select');
        if (el.querySelector(`option[value="${k}"]`)) el.value = String(k);
        if (changed) {
          runSearch();
          runFilter();
        }
      },
      sync: () => input('opt-sync').checked,
      viewChanged: () => writeHash(),
    },
  });
  const ld = createLoadController(store, client, {
    selected: () => ({ step: numberOf('step-select'), rank: numberOf('rank-select') }),
    flags: () => ({ lm: input('opt-lm').checked, mapping: currentMapping(), fuzzy: input('opt-fm').checked, overflowCheck: input('opt-oc').checked }),
    parallel: () => ({ rankSize: input('opt-rank-size').value, tp: input('opt-tp').value, pp: input('opt-pp').value, vpp: input('opt-vpp').value, order: input('opt-order').value }),
    selectors: updateSelectors,
    choose(step, rank) {
      const steps = select$('step-select');
      const ranks = select$('rank-select');
      if (steps.querySelector(`option[value="${step}"]`)) steps.value = String(step);
      if (ranks.querySelector(`option[value="${rank}"]`)) ranks.value = String(rank);
      markRankErrors();
    },
    display: (result) => disp.show(result),
    clear: () => disp.clear(),
    cards: (notes) => {
      for (const s of SIDES) showSource(get(), s, notes?.[s]);
    },
    cardsText(text) {
      for (const s of SIDES) $(`${s}-src`).textContent = text;
    },
    visText: (text) => {
      $('vis-src').textContent = text;
    },
    loaded: foldInputs,
    failed: () => renderCardWarnings(get()),
    dropDemoMapping,
    addMapping(choice) {
      addMapping(choice);
      input('opt-lm').checked = true;
    },
    confirm: (text) => window.confirm(text),
    cancelBackground() {
      offers.cancel();
      dc.cancel();
    },
    stopDiagnosis: () => dc.cancel(),
    matchBlocked: () => disp.updateMatchBlocked(),
    revived() {
      disp.updateMatchBlocked();
      sel.reloadDetails();
    },
  }, host, { chunkSize: knob('chunk'), copyJson: knob('copy') === 1, forgetManual: () => mc.forgetAll(), t: (k, p) => t(k, p) });

  /** A selector's value as a number, or null when it lists nothing. @param {string} id */
  function numberOf(id) {
    const v = select$(id).value;
    return v === '' ? null : Number(v);
  }

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
  /** The graph a pane shows (a build's single graph is the npu one). @param {Side} pane */
  const paneToGraph = (pane) => graphOfPane(get().result, pane);
  /** The pane that shows a graph. @param {Side} graph */
  const graphToPane = (graph) => paneOfGraph(get().result, graph);
  for (const side of SIDES) {
    views[side] = new GraphView(/** @type {HTMLCanvasElement} */ ($(`${side}-canvas`)), {
      onSelect: (i, e) => sel.select(paneToGraph(side), i, 'canvas', e),
      onToggle: (i) => sel.toggle(paneToGraph(side), i),
    });
    minimaps[side] = new Minimap(/** @type {HTMLElement} */ ($(`${side}-canvas`).parentElement), views[side]);
    outlines[side] = new Outline($(`${side}-outline`), side, {
      onSelect: (i, e) => sel.select(paneToGraph(side), i, 'outline', e),
      onToggle: (i, open) => sel.toggle(paneToGraph(side), i, open),
    });
    for (const b of Array.from($(`${side}-pane`).querySelectorAll('[data-act]'))) {
      b.addEventListener('click', () => {
        const act = /** @type {HTMLElement} */ (b).dataset.act;
        if (act === 'fit') views[side].fit();
        else if (act === 'outline') lay.toggle('outlineOpen');
        else if (act === 'expand-all' || act === 'collapse-all') sel.expandAll(side, act === 'expand-all');
      });
    }
  }

  // ---------------------------------------------------------------- progress, errors, page state
  const progressEl = $('progress');
  const progressStage = $('progress-stage');
  const progressBar = /** @type {HTMLProgressElement} */ ($('progress-bar'));
  store.subscribe(['progress'], ({ progress: p }) => {
    progressEl.hidden = !p;
    if (!p) return;
    progressEl.dataset.stage = p.stage;
    if (p.done !== undefined && p.total) {
      progressStage.textContent = t('{stage} — {done} of {total}', { stage: t(p.stage), done: fmtBytes(p.done), total: fmtBytes(p.total) });
      progressBar.value = p.done / p.total;
    } else {
      progressStage.textContent = `${t(p.stage)}…`;
      progressBar.removeAttribute('value');
    }
  });
  const ERROR_PLACES = /** @type {const} */ (['npu', 'bench', 'mapping', 'load', 'vis', 'parallel']);
  store.subscribe(['errors'], ({ errors }, prev) => {
    for (const where of ERROR_PLACES) {
      const msg = errors[where] ?? '';
      if (msg === (prev.errors[where] ?? '')) continue;
      const el = $(`${where}-error`);
      el.textContent = msg;
      el.hidden = !msg;
      // A message on the inputs is read where it belongs: unfold them.
      if (msg) lay.toggle('loadOpen', true);
    }
  });
  store.subscribe(['phase', 'loads'], ({ phase, loads }) => {
    document.body.dataset.state = phase;
    if (loads) document.body.dataset.loads = String(loads);
  });
  store.subscribe(['mode'], ({ mode }) => {
    document.body.dataset.mode = mode;
    for (const id of ['opt-lm', 'opt-fm', 'opt-oc', 'mapping-select', 'mapping-file']) {
      /** @type {HTMLInputElement | HTMLSelectElement} */ ($(id)).disabled = mode === 'vis';
    }
    if (mode === 'dump') $('vis-src').textContent = '.vis.db / .vis';
  });
  store.subscribe(['details'], ({ details: d }) => {
    if ('text' in d) details.clear(d.text);
    else details.show(d.pair, d.side, d.toolTip, d.build);
  });

  // ---------------------------------------------------------------- the step and rank selectors
  /**
   * What the selectors list, to draw them again in another language: a layout (a tree whose first
   * rank is broken: not the shown result's) or a parallel merge's graphs.
   * @type {{layout: {npu: Layout | null, bench: Layout | null} | null, merge: {ranks: number[], rank: number} | null}}
   */
  let listed = { layout: null, merge: null };

  /**
   * Lists a layout's steps and ranks (or, with a parallel merge, the merged graphs of the step) in the
   * selectors; a rank whose folder could not be read is marked with its message.
   * @param {{npu: Layout | null, bench: Layout | null} | null} layout
   * @param {{ranks: number[], rank: number} | null} [merge]
   */
  function updateSelectors(layout, merge) {
    listed = { layout, merge: merge ?? null };
    if (!layout) {
      for (const id of ['step-select', 'rank-select']) $(id).replaceChildren();
      return;
    }
    if (merge) {
      fillSelect(select$('rank-select'), merge.ranks, 'merged rank');
      select$('rank-select').value = String(merge.rank);
      $('rank-wrap').hidden = false;
      return;
    }
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
    fillSelect(select$('step-select'), [...steps].sort((a, b) => a - b), 'step');
    fillSelect(select$('rank-select'), [...ranks].sort((a, b) => a - b), 'rank');
    $('step-wrap').hidden = !showSteps || steps.size === 0;
    $('rank-wrap').hidden = !showRanks || ranks.size === 0;
    markRankErrors();
  }

  /** @param {HTMLSelectElement} el @param {number[]} values @param {string} label */
  function fillSelect(el, values, label) {
    const keep = el.value;
    el.replaceChildren();
    for (const v of values) {
      const o = document.createElement('option');
      o.value = String(v);
      o.textContent = `${t(label)} ${v}`;
      el.append(o);
    }
    if (values.map(String).includes(keep)) el.value = keep;
    else if (values.length) el.value = String(values[0]);
  }

  /**
   * The rank entries whose folder (of the chosen step) could not be read or parsed: marked ⚠, with
   * the message as their tooltip; the selector says so while such an entry is chosen.
   */
  function markRankErrors() {
    const errs = get().rankErrors;
    const step = numberOf('step-select') ?? 0;
    const ranks = select$('rank-select');
    if (get().mergedRanks) return;
    for (const o of Array.from(ranks.options)) {
      const msg = errs.get(pairKey(step, Number(o.value)));
      o.textContent = `${t('rank')} ${o.value}${msg ? ` ⚠ ${t('cannot be read')}` : ''}`;
      o.title = msg ?? '';
      if (msg) o.dataset.error = msg;
      else delete o.dataset.error;
    }
    const chosen = ranks.selectedOptions[0]?.dataset.error ?? '';
    ranks.classList.toggle('has-error', !!chosen);
    ranks.title = chosen;
  }
  store.subscribe(['rankErrors'], markRankErrors);
  $('step-select').addEventListener('change', markRankErrors);
  $('rank-select').addEventListener('change', markRankErrors);

  // ---------------------------------------------------------------- showing a result
  /**
   * Draws a result (display controller's `render`): panes, titles, legend, summary, diagnostics.
   * @param {RunResult | null} result @param {import('./colors.js').Classes | null} classes @param {boolean} compare
   */
  function renderResult(result, classes, compare) {
    window.__probelens.lastResult = result;
    const { models } = get();
    if (!result || !classes) {
      for (const side of SIDES) {
        views[side].setModel(null, []);
        outlines[side].setModel(null, [], false);
      }
      $('summary').textContent = t('No data loaded.');
      $('legend').replaceChildren();
      $('diagnostics').replaceChildren();
      renderCardWarnings(get());
      resetTools();
      return;
    }
    const single = !result.bench;
    panesEl.classList.toggle('single', single);
    renderTitles(get());
    for (const side of SIDES) {
      const m = single ? (side === 'npu' ? models.npu : null) : models[side];
      outlines[side].setModel(m, classes.bins, compare);
      views[side].setModel(m, classes.bins);
    }
    renderLegend(result, classes, compare);
    renderSummary(get(), result, classes, compare);
    renderDiagnostics(result);
    renderCardWarnings(get());
    showWelcome(get().mode === 'dump' && !!(get().sources.npu?.demo && get().sources.bench?.demo));
    resetTools();
  }

  /** After a result is shown (display controller's `shown`). @param {RunResult | null} result */
  function resultShownUi(result) {
    if (result) {
      setupMicroSteps(result);
      window.__probelens.timings.displayMs = disp.timings.displayMs;
      considerOffer();
    }
    hooks.shown();
    if (result) applyPendingHash();
  }

  // ---------------------------------------------------------------- inputs
  for (const side of SIDES) {
    const dir = input(`${side}-dir`);
    dir.addEventListener('change', () => {
      const list = dir.files;
      if (!list || !list.length) return;
      const first = list[0].webkitRelativePath || list[0].name;
      const label = first.includes('/') ? first.slice(0, first.indexOf('/')) : 'files';
      ld.setSource(side, { label, root: label === 'files' ? '' : label, files: filesFromInput(list) });
      dir.value = '';
    });
    for (const zone of [$(`${side}-card`), $(`${side}-pane`)]) installDrop(zone, side);
    $(`${side}-clear`).addEventListener('click', () => {
      if (!get().sources[side]) return;
      if (!ld.confirmDiscard('Clear')) return;
      ld.clearSource(side);
      ld.load([side]);
    });
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
            ld.setError('mapping', 'drop a .yaml layer mapping here');
            return;
          }
          ld.setSource(target, { label: rootName || (files.length === 1 ? files[0].path : 'dropped files'), root: rootName, files });
        },
        (err) => ld.setError(target, `could not read the drop: ${err instanceof Error ? err.message : String(err)}`),
      );
    });
  }
  installDrop($('mapping-card'), 'mapping');

  // Dropping outside the targets must not navigate away.
  window.addEventListener('dragover', (e) => e.preventDefault());
  window.addEventListener('drop', (e) => e.preventDefault());

  // ---------------------------------------------------------------- mapping & options
  const mappingSelect = select$('mapping-select');
  function renderMappingSelect() {
    const keep = mappingSelect.value;
    mappingSelect.replaceChildren();
    const none = document.createElement('option');
    none.value = '';
    none.textContent = t('no YAML (built-in rules)');
    mappingSelect.append(none);
    for (const m of get().mappings) {
      const o = document.createElement('option');
      o.value = m.key;
      o.textContent = m.name;
      mappingSelect.append(o);
    }
    mappingSelect.value = get().mappings.some((m) => m.key === keep) ? keep : '';
  }
  function currentMapping() {
    return get().mappings.find((m) => m.key === mappingSelect.value) ?? null;
  }
  /** @param {MappingChoice} choice */
  function addMapping(choice) {
    store.set((s) => ({ mappings: [...s.mappings.filter((m) => m.key !== choice.key), choice] }));
    renderMappingSelect();
    mappingSelect.value = choice.key;
  }
  /** @param {Blob & {name?: string}} file */
  async function setMappingFile(file) {
    ld.setError('mapping');
    if (!isYaml(file.name ?? '')) {
      ld.setError('mapping', `${file.name}: not a .yaml file`);
      return;
    }
    const text = await readText(file);
    addMapping({ key: 'file', name: `file: ${file.name}`, text });
    input('opt-lm').checked = true;
    ld.rerun();
  }
  $('mapping-file').addEventListener('change', () => {
    const el = input('mapping-file');
    const f = el.files?.[0];
    if (f) setMappingFile(f);
    el.value = '';
  });
  mappingSelect.addEventListener('change', async () => {
    ld.setError('mapping');
    const key = mappingSelect.value;
    const choice = currentMapping();
    if (choice && key.startsWith('tpl:') && !choice.text) {
      try {
        choice.text = await host.getTemplate(choice.name.replace(/^template: /, ''));
      } catch (e) {
        ld.setError('mapping', `could not read the template: ${e instanceof Error ? e.message : String(e)}`);
        return;
      }
    }
    if (key) input('opt-lm').checked = true;
    ld.rerun();
  });
  for (const id of ['opt-lm', 'opt-fm', 'opt-oc', 'step-select', 'rank-select', 'opt-rank-size', 'opt-tp', 'opt-pp', 'opt-vpp', 'opt-order']) {
    $(id).addEventListener('change', () => ld.rerun());
  }
  /** @type {string[]} the bundled templates */
  let templateNames = [];
  host.listTemplates().then(
    (names) => {
      templateNames = names;
      store.set((s) => ({ mappings: [...s.mappings, ...names.map((name) => ({ key: `tpl:${name}`, name: `template: ${name}`, text: '' }))] }));
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
    store.set((s) => ({ mappings: s.mappings.filter((m) => m.key !== 'demo') }));
    renderMappingSelect();
    if (wasChosen) {
      mappingSelect.value = '';
      input('opt-lm').checked = false;
    }
  }

  // ---------------------------------------------------------------- template offer (controllers/frameworks.js)
  /**
   * After a compare of the user's folders without a mapping: when the module names say which stacks
   * the pair comes from (MindSpeed-LLM / MindSpeed-MM vs HF) and a bundled template fits, offer it in
   * one click (controllers/frameworks.js); what it would match is counted in the background.
   */
  function considerOffer() {
    const s = get();
    const r = s.result;
    const users = s.mode === 'dump' && !s.applied.npu?.demo && !s.applied.bench?.demo;
    offers.consider({
      names: r?.bench && users ? { npu: r.npu.names, bench: r.bench.names } : null,
      unmapped: !(input('opt-lm').checked && currentMapping()) && !input('opt-fm').checked,
      matchedNow: s.models.npu?.matchedCount ?? 0,
      templates: templateNames,
      runOptions: s.runOpts,
    });
  }
  function renderOffer() {
    const o = get().offer;
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
    if (ld.confirmDiscard('Demo')) ld.loadDemo();
  });

  // ---------------------------------------------------------------- layout (controllers/layout.js, layoutview.js)
  installLayout({ store, lay, panesEl, views, minimaps });

  /** After a load: fold the inputs (unless a message on them needs reading). */
  function foldInputs() {
    renderCompact(get());
    const msg = ['npu', 'bench', 'mapping', 'vis', 'parallel'].some((w) => !$(`${w}-error`).hidden);
    if (!msg) lay.toggle('loadOpen', false);
  }

  // ---------------------------------------------------------------- msprobe output files
  $('vis-file').addEventListener('change', () => {
    const el = input('vis-file');
    const f = el.files?.[0];
    if (f && ld.confirmDiscard('Opening a .vis.db')) ld.openVis(f);
    el.value = '';
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
    if (f && ld.confirmDiscard('Opening a .vis.db')) ld.openVis(f);
  });

  // ---------------------------------------------------------------- micro steps
  /** @param {RunResult} result */
  function setupMicroSteps(result) {
    const el = select$('micro-select');
    const n = result.microSteps ?? 1;
    el.replaceChildren();
    $('micro-wrap').hidden = !(n > 1);
    if (!(n > 1)) return;
    const all = document.createElement('option');
    all.value = '-1';
    all.textContent = t('all');
    el.append(all);
    for (let k = 0; k < n; k++) {
      const o = document.createElement('option');
      o.value = String(k);
      o.textContent = String(k);
      el.append(o);
    }
    el.value = '-1';
  }
  $('micro-select').addEventListener('change', () => sel.setMicroStep(Number(select$('micro-select').value)));

  // ---------------------------------------------------------------- search and filters (controllers/tools.js)
  const searchSide = select$('search-side');
  const searchInput = input('search-input');
  const searchRegex = input('search-regex');
  /** @typedef {{label: (i: number) => string, color: (i: number) => string}} ListSourceFns */
  /** @param {Side} side @returns {ListSourceFns} */
  const listFns = (side) => ({
    label: (i) => get().models[side]?.g.names[i] ?? '',
    color: (i) => {
      const { models, classes } = get();
      const m = models[side];
      const b = m && classes ? classes.bins[m.cls[i]] : null;
      return b ? b.color : '';
    },
  });
  const countText = (/** @type {number} */ n, /** @type {number} */ pos) =>
    pos >= 0 ? t('{pos} of {n}', { pos: pos + 1, n }) : t(n === 1 ? '{n} node' : '{n} nodes', { n });
  /** Reveals, centres and selects a node chosen in a list. @param {Side} side @param {number} i */
  function pickFromList(side, i) {
    if (side === 'bench' && !get().result?.bench) return;
    sel.select(side, i, 'api');
  }
  const searchList = new NodeList($('search-box'), 'search', {
    label: (i) => listFns(/** @type {Side} */ (searchSide.value)).label(i),
    color: (i) => listFns(/** @type {Side} */ (searchSide.value)).color(i),
    onPick: (i) => pickFromList(/** @type {Side} */ (searchSide.value), i),
  }, countText);
  let searchTimer = 0;
  function runSearch() {
    const { hits, error } = tools.search(/** @type {Side} */ (searchSide.value), searchInput.value, searchRegex.checked);
    const msg = $('search-msg');
    msg.textContent = error ?? '';
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

  const filterSide = select$('filter-side');
  const filterKind = select$('filter-kind');
  const filterList = new NodeList($('filter-box'), 'filter', {
    label: (i) => listFns(/** @type {Side} */ (filterSide.value)).label(i),
    color: (i) => listFns(/** @type {Side} */ (filterSide.value)).color(i),
    onPick: (i) => pickFromList(/** @type {Side} */ (filterSide.value), i),
  }, countText);

  /** Fills the filter choices from the result's legend, each with its count on the chosen side. */
  function renderFilterKinds() {
    const keep = filterKind.value;
    filterKind.replaceChildren();
    const none = document.createElement('option');
    none.value = '';
    none.textContent = t('— choose a filter —');
    filterKind.append(none);
    const kinds = tools.filterKinds(/** @type {Side} */ (filterSide.value));
    for (const k of kinds) {
      const o = document.createElement('option');
      o.value = k.value;
      o.textContent = `${k.label} (${k.count})`;
      filterKind.append(o);
    }
    filterKind.value = kinds.some((k) => k.value === keep) ? keep : '';
  }

  function runFilter() {
    renderFilterKinds();
    const pos = filterList.pos;
    filterList.setItems(tools.filter(/** @type {Side} */ (filterSide.value), filterKind.value));
    if (pos >= 0 && pos < filterList.items.length) {
      filterList.pos = pos;
      filterList.updateCount();
      filterList.render();
    }
  }
  for (const el of [filterKind, filterSide]) {
    el.addEventListener('change', () => {
      filterList.pos = -1;
      runFilter();
    });
  }

  /** Clears the tools' state for a new result (the hand-made pairs: see `mc.resultShown`). */
  function resetTools() {
    tools.resultShown();
    runSearch();
    filterList.pos = -1;
    runFilter();
  }

  // ---------------------------------------------------------------- diagnosis (controllers/diagnose.js, diagnoseview.js)
  const diagnosis = installDiagnosis({
    store,
    dc,
    disp,
    generation: () => client.generation,
    select: (side, i) => sel.select(side, i, 'api'),
    reveal: (i) => {
      sel.revealNode('bench', i);
      views[graphToPane('bench')].peer = i;
      outlines[graphToPane('bench')].setSelection(-1, i);
    },
    paint: (side, paint) => {
      views[graphToPane(side)].setPaint(paint);
      outlines[graphToPane(side)].setPaint(paint);
    },
    optionValues: (id) => Array.from(select$(id).options, (o) => Number(o.value)),
    open: async (step, rank) => {
      select$('step-select').value = String(step);
      select$('rank-select').value = String(rank);
      await ld.rerun();
    },
  });

  // ---------------------------------------------------------------- manual match (controllers/manual.js, matchview.js)
  const { pairsList, doMatch, undoRedo } = installManualMatch({ store, mc, tools, sel, views, outlines, color: (i) => listFns('npu').color(i), download });

  // The shown result's columns changed in place (a match operation): counts, colours, lists, details.
  store.subscribe(['resultVersion'], () => {
    const { result: r, classes: c, models } = get();
    if (!r || !c) return;
    for (const side of SIDES) {
      const m = models[side];
      if (!m) continue;
      m.recount();
      outlines[side].el.dataset.matchedCount = String(m.matchedCount);
      outlines[side].render();
      views[side].invalidate();
    }
    renderLegend(r, c, true);
    renderSummary(get(), r, c, true);
    runFilter();
    // The diagnosis was made before this change (manual matches take part in it): make it again.
    if (get().diagnosis.result) dc.resultShown(get().diagnosis.key, true);
    const selection = get().selection;
    // The counterpart may have changed: select again (keeps the view and the picks) and reload the details.
    if (selection) sel.select(selection.side, selection.index, 'refresh');
    hooks.changed();
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
  store.subscribe(['exportMsg'], ({ exportMsg: m }) => {
    $('export-msg').textContent = m.text;
    $('export-msg').classList.toggle('err', m.err);
  });
  installGraphExports(views, download, (text, err = false) => tools.say(text, err));
  $('csv-node').addEventListener('click', () => {
    if (!details.table.length) return tools.say(t('Select a node with tensors first.'), true);
    const name = details.root.dataset.node || 'node';
    download(new Blob([toCsv(details.table)], { type: 'text/csv' }), `${name.replace(/[^\w.-]+/g, '_')}.csv`);
  });
  $('csv-all').addEventListener('click', async () => {
    const csv = await tools.compareCsv();
    if (csv !== null) download(new Blob([csv], { type: 'text/csv' }), 'probelens_compare.csv');
  });

  // ---------------------------------------------------------------- mapping editor, suggestions, export
  /**
   * Re-runs the shown step/rank/options with `text` as the layer mapping (the editor's choice in the
   * mapping card, -lm on), then re-applies the hand-made pairs by node name where both nodes exist.
   * @param {string} text @param {string} name file name for the core's messages
   * @returns {Promise<import('./mappingpanel.js').MappingRun | null>} null when the run failed or was superseded
   */
  async function runMapping(text, name) {
    const r0 = get().result;
    if (!r0 || get().mode !== 'dump') return null;
    const before = matchCounts(get());
    addMapping({ key: 'editor', name: `editor: ${name}`, text });
    input('opt-lm').checked = true;
    const t0 = performance.now();
    // The re-run re-applies the hand-made pairs of this step and rank by name (display → mc.resultShown).
    await ld.rerun();
    const runMs = performance.now() - t0;
    const r = get().result;
    if (!r || r === r0 || currentMapping()?.key !== 'editor') return null;
    const re = await disp.reapply;
    if (get().result !== r) return null;
    return { before, after: matchCounts(get()), runMs, ...re };
  }

  const mappingPanel = new MappingPanel({
    client,
    hooks,
    result: () => (get().mode === 'dump' && get().sessionGen === client.generation ? get().result : null),
    busy: () => get().running || get().matching,
    canMatch: () => mc.canMatch(),
    whyNot: () => get().matchBlocked ?? (get().matchMsg.text || t('Manual matching needs a compare result (two sides).')),
    fuzzy: () => input('opt-fm').checked,
    manualPairs: () => mc.pairsByName(),
    mappingChoice: () => {
      const c = currentMapping();
      return c ? { key: c.key, name: c.name.replace(/^[a-z]+: /, ''), text: c.text } : null;
    },
    runMapping,
    userOps: (ops, label) => mc.userOps(ops, label),
    counts: () => matchCounts(get()),
    showPair: (npu, bench) => {
      sel.select('npu', npu, 'api');
      mc.setPicks({ npu, bench });
      sel.revealNode('bench', bench);
    },
    download,
    listTemplates: () => host.listTemplates(),
    getTemplate: (name) => host.getTemplate(name),
  });
  $('mapping-toggle').addEventListener('click', () => mappingPanel.toggle());

  // ---------------------------------------------------------------- language, help
  const langBtn = $('lang-btn');
  function relabel() {
    const s = get();
    translateDom(document);
    langBtn.textContent = getLang() === 'zh' ? 'English' : '中文';
    document.title = t('probelens — msprobe NPU vs Bench graph compare');
    if (s.result) {
      const compare = s.result.graphType === 'compare' && !!s.result.bench;
      renderTitles(get());
      if (s.classes) {
        renderLegend(s.result, s.classes, compare);
        renderSummary(s, s.result, s.classes, compare);
      }
    } else if (!s.running) $('summary').textContent = t('No data loaded.');
    if (s.mode === 'dump') for (const side of SIDES) showSource(get(), side);
    renderMappingSelect();
    if (listed.layout) updateSelectors(listed.layout, listed.merge);
    const micro = select$('micro-select').querySelector('option[value="-1"]');
    if (micro) micro.textContent = t('all');
    searchList.updateCount();
    filterList.updateCount();
    pairsList.updateCount();
    renderFilterKinds();
    details.rerender();
    mappingPanel.relabel();
    diagnosis.relabel();
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
    const s = get().selection;
    return s ? graphToPane(s.side) : 'npu';
  }

  document.addEventListener('keydown', (e) => {
    const tgt = /** @type {HTMLElement} */ (e.target);
    const typing =
      (tgt instanceof HTMLInputElement && !['checkbox', 'radio', 'button', 'file'].includes(tgt.type)) ||
      tgt instanceof HTMLTextAreaElement || tgt instanceof HTMLSelectElement || tgt.isContentEditable;
    if (e.key === 'Escape') {
      if (!helpPop.hidden) toggleHelp(false);
      else if (diagnosis.closeIfOpen()) return;
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
        if (!get().layout.sidebarOpen) lay.toggle('sidebarOpen', true);
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

  // ---------------------------------------------------------------- URL hash (controllers/hash.js)
  const hash = createHashController(store, {
    lang: getLang,
    chosen: () => ({
      step: $('step-wrap').hidden ? undefined : select$('step-select').value,
      rank: $('rank-wrap').hidden ? undefined : select$('rank-select').value,
    }),
    choose(key, want) {
      const el = select$(`${key}-select`);
      if ($(`${key}-wrap`).hidden || el.value === String(want) || !el.querySelector(`option[value="${want}"]`)) return false;
      el.value = String(want);
      return true;
    },
    rerun: () => ld.rerun(),
    replace: (h) => {
      if (location.hash !== h) history.replaceState(null, '', h);
    },
    setMicroStep: (k) => sel.setMicroStep(k),
    refresh: (side) => {
      outlines[graphToPane(side)].refresh();
      views[graphToPane(side)].invalidate();
    },
    select: (side, i) => sel.select(side, i, 'api'),
    nameIndex: () => tools.nameIndex(),
  });
  const writeHash = () => hash.write();
  const applyPendingHash = () => hash.apply();

  window.addEventListener('hashchange', () => {
    if (location.hash === hash.last) return;
    const h = parseHash(location.hash);
    if (!h) return;
    if (h.lang === 'en' || h.lang === 'zh') {
      setLang(h.lang, false);
      relabel();
    }
    hash.setPending(h);
    hash.apply();
  });

  // ---------------------------------------------------------------- test & debug hook
  window.__probelens = {
    lastResult: null,
    get errors() {
      return ld.log.errors;
    },
    timings: { displayMs: 0 },
    /** Loads for which the shown result (a build) freed its graph (see the worker's `adoptSide`). */
    get suspends() {
      return ld.log.suspends;
    },
    get state() {
      return get();
    },
    get diagnosis() {
      return get().diagnosis;
    },
    views,
    outlines,
    minimaps,
    select: (/** @type {Side} */ side, /** @type {number} */ i) => sel.select(side, i, 'api'),
    toggle: (/** @type {Side} */ side, /** @type {number} */ i, /** @type {boolean | undefined} */ open) => sel.toggle(side, i, open),
    setMicroStep: (/** @type {number} */ k) => sel.setMicroStep(k),
    loadDemo: () => ld.loadDemo(),
    mappingPanel,
  };

  const fromUrl = parseHash(location.hash);
  hash.setPending(fromUrl);
  const hashLang = fromUrl?.lang;
  setLang(hashLang === 'en' || hashLang === 'zh' ? hashLang : detectLang(), false);
  relabel();
  disp.clear();
  store.set({ phase: 'empty' });
  document.body.dataset.state = 'empty';
  ld.loadDemo();
}
