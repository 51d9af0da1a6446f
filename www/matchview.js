// @ts-check
// The manual-match tool's view (the logic is controllers/manual.js): the picks framed in the panes,
// Match / Unmatch / Undo / Redo with what Match will do, the hand-made pairs' list, and saving or
// loading them (`.vis.config`, the updated `.vis.db`).
import { $ } from './dom.js';
import { t } from './i18n.js';
import { SIDES } from './protocol.js';
import { NodeList } from './listview.js';
import { readText } from './loader.js';

/** @typedef {import('./protocol.js').Side} Side */

/**
 * Wires the manual-match tool to the store.
 * @param {object} o
 * @param {import('./store.js').Store<import('./controllers/manual.js').ManualState & import('./controllers/display.js').DisplayState & import('./controllers/load.js').LoadState>} o.store
 * @param {ReturnType<typeof import('./controllers/manual.js').createManualController>} o.mc
 * @param {ReturnType<typeof import('./controllers/tools.js').createToolsController>} o.tools
 * @param {ReturnType<typeof import('./controllers/selection.js').createSelectionController>} o.sel
 * @param {Record<Side, import('./graphview.js').GraphView>} o.views
 * @param {Record<Side, import('./outline.js').Outline>} o.outlines
 * @param {(i: number) => string} o.color  an NPU node's colour in lists
 * @param {(blob: Blob, name: string) => void} o.download
 */
export function installManualMatch({ store, mc, tools, sel, views, outlines, color, download }) {
  const get = store.get;
  /** @param {string} id */
  const input = (id) => /** @type {HTMLInputElement} */ ($(id));
  /** @param {string} id */
  const select$ = (id) => /** @type {HTMLSelectElement} */ ($(id));
  const pairsList = new NodeList($('pairs-box'), 'pairs', {
    label: (i) => `${get().result?.npu.names[i] ?? ''} ⇄ ${get().result?.bench?.names[get().manual.get(i) ?? -1] ?? ''}`,
    color: (i) => color(i),
    onPick: (i) => sel.select('npu', i, 'api'),
  }, (n, pos) => (pos >= 0 ? t('{pos} of {n}', { pos: pos + 1, n }) : t(n === 1 ? '{n} manual pair' : '{n} manual pairs', { n })));

  function renderPicks() {
    const { pick, result: r } = get();
    for (const side of SIDES) {
      const i = pick[side];
      const g = side === 'npu' ? r?.npu : r?.bench;
      const el = $(`pick-${side}`);
      el.textContent = g && i >= 0 ? g.names[i] : '—';
      el.title = el.textContent;
      if (r?.bench) {
        views[side].pick = i;
        outlines[side].pick = i;
        views[side].invalidate();
        outlines[side].render();
      }
    }
  }

  function renderMatchButtons() {
    const ok = mc.canMatch();
    const s = get();
    const r = s.result;
    const plan = mc.preview(input('match-recursive').checked);
    /** @param {string} id @param {boolean} off */
    const disable = (id, off) => {
      /** @type {HTMLButtonElement} */ ($(id)).disabled = off;
    };
    disable('match-btn', !ok || !plan.ok || s.matching);
    $('match-btn').title = plan.text;
    const blocked = s.matchBlocked;
    $('match-hint').hidden = !!blocked;
    const pv = $('match-preview');
    pv.textContent = r?.bench ? plan.text : '';
    pv.classList.toggle('blocked', !plan.ok);
    const g = s.selection && r ? (s.selection.side === 'npu' ? r.npu : r.bench) : null;
    disable('unmatch-btn', !ok || !s.selection || !g || g.matched[s.selection.index] < 0);
    disable('undo-btn', !ok || !s.history.undo.length);
    disable('redo-btn', !ok || !s.history.redo.length);
    disable('match-save', !ok || !s.manual.size);
    $('match-save-db').hidden = !(s.mode === 'vis' && s.vis?.kind === 'db');
    disable('match-save-db', !ok || !s.history.undo.length);
    disable('match-load', !ok);
    for (const id of ['unmatch-btn', 'undo-btn', 'redo-btn', 'match-save']) $(id).title = blocked ?? $(id).dataset.tip ?? '';
    const tool = $('match-tool');
    tool.dataset.manual = String(s.manual.size);
    tool.dataset.undo = String(s.history.undo.length);
    tool.dataset.redo = String(s.history.redo.length);
  }
  for (const id of ['unmatch-btn', 'undo-btn', 'redo-btn', 'match-save']) $(id).dataset.tip = $(id).title;

  store.subscribe(['pick', 'result'], renderPicks);
  store.subscribe(['pick', 'manual', 'history', 'matching', 'selection', 'result', 'matchBlocked', 'resultVersion'], renderMatchButtons);
  store.subscribe(['manual', 'result'], () => pairsList.setItems(tools.pairItems()));
  store.subscribe(['matchMsg'], (st) => {
    const el = $('match-msg');
    el.textContent = st.matchMsg.text;
    el.classList.toggle('err', st.matchMsg.err);
  });
  $('match-recursive').addEventListener('change', renderMatchButtons);

  async function doMatch() {
    const { npu } = get().pick;
    if (get().matching) return;
    const entry = await mc.match(input('match-recursive').checked);
    if (entry) sel.select('npu', npu, 'refresh');
  }

  async function doUnmatch() {
    const s = get().selection;
    if (!s) return;
    if (/** @type {HTMLButtonElement} */ ($('unmatch-btn')).disabled) {
      const blocked = get().matchBlocked;
      if (blocked) mc.say(blocked, true);
      return;
    }
    await mc.unmatch(s.side, s.index);
  }

  /** @param {boolean} redo */
  const undoRedo = (redo) => mc.undoRedo(redo);

  function saveManual() {
    if (!get().result?.bench || !get().manual.size) return;
    const step = select$('step-select').value || '0';
    const rank = select$('rank-select').value || '0';
    download(new Blob([mc.configText()], { type: 'application/json' }), `probelens_${step}_${rank}.vis.config`);
    mc.say(t('Saved {n} manual pair(s).', { n: get().manual.size }));
  }

  /** Re-applies a .vis.config file `{npu node: bench node}` by names. @param {File} file */
  async function loadManual(file) {
    const got = tools.parseConfig(await readText(file), file.name);
    if ('error' in got) mc.say(got.error, true);
    else await mc.loadConfig(got.pairs, file.name);
  }

  /** The opened .vis.db with the manual matches made on it, downloaded (the file itself is not changed). */
  async function saveVisDb() {
    try {
      const got = await tools.visDb();
      if (!got) return;
      download(new Blob([got.bytes], { type: 'application/vnd.sqlite3' }), got.name);
      mc.say(t('Saved {file} with {n} manual pair(s).', { file: got.name, n: get().manual.size }));
    } catch (e) {
      mc.say(e instanceof Error ? e.message : String(e), true);
    }
  }
  $('match-save-db').addEventListener('click', () => saveVisDb());
  $('match-btn').addEventListener('click', () => doMatch());
  $('unmatch-btn').addEventListener('click', () => doUnmatch());
  $('undo-btn').addEventListener('click', () => undoRedo(false));
  $('redo-btn').addEventListener('click', () => undoRedo(true));
  $('match-save').addEventListener('click', () => saveManual());
  $('match-load').addEventListener('change', () => {
    const el = input('match-load');
    const f = el.files?.[0];
    if (f) loadManual(f);
    el.value = '';
  });

  return { pairsList, doMatch, undoRedo };
}
