// @ts-check
// The diagnosis tool's view (the logic is controllers/diagnose.js): the verdict, the ranked suspects
// (a click reveals the pair on both sides), the divergence overlay with its legend, and the step ×
// layer and rank × layer heatmaps (a click on a cell shows that step or rank and its layer).
import { $ } from './dom.js';
import { t } from './i18n.js';
import { SIDES } from './protocol.js';
import { fitText, fontOf } from './elide.js';
import { DIV_BINS, divergenceClasses, classCounts, suspectItems, heatmapMatrix, layerNode, divClass } from './controllers/diagnose.js';
import { shownStepRank, diagnoseBlocked } from './controllers/display.js';

/** @typedef {import('./protocol.js').Side} Side */

/**
 * Wires the diagnosis tool's elements to the store's `diagnosis` slice.
 * @param {object} o
 * @param {import('./store.js').Store<{diagnosis: import('./controllers/diagnose.js').DiagnosisState, mergedRanks: number[] | null} & import('./controllers/display.js').DisplayState>} o.store
 * @param {ReturnType<typeof import('./controllers/diagnose.js').createDiagnoseController>} o.dc
 * @param {{heatmapsOfShown: () => void}} o.disp  the display controller
 * @param {() => number} o.generation  the worker's generation
 * @param {(side: Side, i: number) => void} o.select  selects a node
 * @param {(i: number) => void} o.reveal  reveals a Bench node as the counterpart shown
 * @param {(side: Side, paint: {bins: typeof DIV_BINS, cls: Uint8Array} | null) => void} o.paint  colours a graph's pane and outline (null: the result's classes)
 * @param {(id: string) => number[]} o.optionValues  the values of a selector's options
 * @param {(step: number, rank: number) => Promise<void>} o.open  shows another step and rank
 */
export function installDiagnosis({ store, dc, disp, generation, select, reveal, paint, optionValues, open }) {
  const divMsg = $('diverge-msg');
  const divList = $('diverge-list');
  const divWhy = $('diverge-why');
  const divOverlay = /** @type {HTMLInputElement} */ ($('diverge-overlay'));
  const heatPop = $('heatmap-pop');

  const get = store.get;
  /** The step and rank of the shown result (the labels of its diagnosis). */
  const stepRank = () => shownStepRank(get());
  /** Why the diagnosis cannot run on the shown result, or ''. */
  const blocked = () => diagnoseBlocked(get(), generation(), (k) => t(k));

  /** Diagnoses the shown result and shows its top suspect. */
  async function runDiagnosis() {
    const why = blocked();
    if (why) {
      store.set((st) => ({ diagnosis: { ...st.diagnosis, error: why, result: null, divergence: null, overlay: false } }));
      return;
    }
    const { step, rank } = stepRank();
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
    const r = get().result;
    if (!s || !r) return;
    if (s.npuIndex !== null && s.npuIndex >= 0) select('npu', s.npuIndex);
    const b = s.benchIndex;
    if (b !== null && b >= 0 && r.bench && (s.npuIndex === null || r.npu.matched[s.npuIndex] !== b)) reveal(b);
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
    const r = get().result;
    const on = st.overlay && !!st.divergence && !!r && st.divergence.length === r.npu.names.length;
    const legend = $('div-legend');
    legend.replaceChildren();
    legend.hidden = !on;
    if (!on || !r || !st.divergence) {
      for (const side of SIDES) paint(side, null);
      return;
    }
    const cls = divergenceClasses(st.divergence, r.bench ? r.bench.matched : null);
    for (const side of SIDES) {
      const c = side === 'npu' ? cls.npu : cls.bench;
      paint(side, c ? { bins: DIV_BINS, cls: c } : null);
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

  async function runHeatmaps() {
    const why = blocked();
    if (why) {
      store.set((st) => ({ diagnosis: { ...st.diagnosis, error: why } }));
      return;
    }
    const { step, rank } = stepRank();
    const steps = optionValues('step-select');
    const ranks = get().mergedRanks ? [] : optionValues('rank-select');
    /** @type {{axis: 'step' | 'rank', keys: number[], at: number}[]} */
    const specs = [{ axis: 'step', keys: steps.length ? steps : [step], at: rank }];
    if (ranks.length > 1) specs.push({ axis: 'rank', keys: ranks, at: step });
    disp.heatmapsOfShown();
    heatPop.hidden = false;
    const opts = /** @type {import('./protocol.js').RunOptions} */ (get().runOpts);
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
    const { step, rank } = stepRank();
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
    const want = { step: axis === 'step' ? key : at, rank: axis === 'rank' ? key : at };
    const { step, rank } = stepRank();
    if (want.step !== step || want.rank !== rank) await open(want.step, want.rank);
    const r = get().result;
    if (!r) return;
    const i = layerNode(r.npu.names, layer);
    if (i >= 0) select('npu', i);
  }

  return {
    relabel: relabelDiagnosis,
    /** Hides the heatmaps when shown (Esc); whether they were. */
    closeIfOpen() {
      if (heatPop.hidden) return false;
      closeHeatmaps();
      return true;
    },
  };
}
