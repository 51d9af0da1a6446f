// @ts-check
// Selection and expansion: selecting a node (it becomes its side's match pick, its ancestors open, its
// counterpart is revealed in the other pane), the details of the selected node (the worker's
// `nodePair`), expanding and collapsing with *sync expand*, revealing a node, the micro step shown.
// No DOM and no worker code: it takes the store, the client (anything with `request` and
// `generation`) and a small `SelectionUi` that app.js implements over the panes.
import { paneOfGraph } from './display.js';

/** @typedef {import('../protocol.js').Side} Side */
/** @typedef {import('../tree.js').TreeModel} TreeModel */

/**
 * The part of the page's state this controller reads and writes.
 * @typedef {object} SelectionState
 * @property {import('../protocol.js').RunResult | null} result
 * @property {Record<Side, TreeModel | null>} models
 * @property {{side: Side, index: number} | null} selection
 * @property {Side} buildSide
 * @property {number} sessionGen
 * @property {import('./display.js').Details} details
 */

/**
 * What selecting and expanding ask of the panes (app.js implements it over the DOM).
 * @typedef {object} SelectionUi
 * @property {(pane: Side) => void} refresh  the pane's model changed (expansion): redraw it and its outline
 * @property {(pane: Side, i: number, from: string) => void} showSelected  marks i selected in its pane (scrolled to, centred unless clicked there)
 * @property {(pane: Side, peer: number) => void} showPeer  marks the counterpart in the other pane and centres it (-1: none)
 * @property {(pane: Side, i: number) => void} reveal  scrolls the outline to i and centres it, without selecting it
 * @property {(pane: Side) => void} fit
 * @property {(k: number, changed: boolean) => void} microShown  the micro-step selector shows k; `changed`: the panes changed
 * @property {() => boolean} sync  *sync expand* is on
 * @property {() => void} viewChanged  the view changed (the URL's hash follows)
 */

/** Side on the other pane. @param {Side} s @returns {Side} */
const otherSide = (s) => (s === 'npu' ? 'bench' : 'npu');

/**
 * @param {import('../store.js').StateOf<SelectionState>} store
 * @param {{request: (req: any) => Promise<any>, generation: number}} client
 * @param {object} deps
 * @param {SelectionUi} deps.ui
 * @param {{pickNode: (side: Side, i: number, how: 'click' | 'ctrl' | 'keyboard') => void}} deps.manual  the manual-match controller
 */
export function createSelectionController(store, client, { ui, manual }) {
  const get = store.get;
  /** Details requests made (a newer one makes an older one's answer stale). */
  let detailSeq = 0;

  /**
   * Selects node i of a graph.
   * @param {Side} side graph side of the node
   * @param {number} i
   * @param {'canvas' | 'outline' | 'api' | 'refresh'} from `refresh`: the same node again after a change (picks stay)
   * @param {{ctrlKey?: boolean, metaKey?: boolean}} [e] the click (Ctrl/Cmd: only pick the node for a manual match)
   */
  function select(side, i, from, e) {
    const s = get();
    const m = s.models[side];
    if (!m || i < 0 || i >= m.n) return;
    if (e && (e.ctrlKey || e.metaKey) && s.result?.bench) {
      manual.pickNode(side, i, 'ctrl');
      return;
    }
    if (!m.inStep(i)) setMicroStep(-1);
    // The selected node becomes the match pick of its side (a matched node brings its counterpart,
    // unless the other side holds a grey pick); moving in the outline with the keyboard picks nothing.
    if (from !== 'refresh') manual.pickNode(side, i, from === 'outline' && !e ? 'keyboard' : 'click');
    store.set({ selection: { side, index: i } });
    const r = get().result;
    if (m.reveal(i)) ui.refresh(paneOfGraph(r, side));
    ui.showSelected(paneOfGraph(r, side), i, from);
    const other = otherSide(side);
    const om = get().models[other];
    if (om && r?.bench) {
      const peer = m.g.matched[i];
      const opane = paneOfGraph(r, other);
      if (peer >= 0 && peer < om.n) {
        if (om.reveal(peer)) ui.refresh(opane);
        ui.showPeer(opane, peer);
      } else ui.showPeer(opane, -1);
    }
    loadDetails(side, i);
    ui.viewChanged();
  }

  /** Reads the details of a node (and its counterpart) from the worker. @param {Side} side @param {number} i */
  async function loadDetails(side, i) {
    const seq = ++detailSeq;
    try {
      if (get().sessionGen !== client.generation) {
        store.set({ details: { text: 'Details are unavailable: the core was restarted. Reload the folders.' } });
        return;
      }
      const pair = await client.request({ type: 'nodePair', side, index: i });
      if (seq !== detailSeq) return;
      const s = get();
      const build = !s.result?.bench;
      store.set({ details: { pair, side, toolTip: s.result?.toolTip ?? null, build: build ? (s.buildSide === 'npu' ? 'NPU' : 'Bench') : null } });
    } catch (e) {
      if (seq !== detailSeq || (e instanceof Error && /** @type {any} */ (e).cancelled)) return;
      store.set({ details: { text: `Could not read the node: ${e instanceof Error ? e.message : String(e)}` } });
    }
  }

  /** The details of the selection again (the session changed). */
  function reloadDetails() {
    const sel = get().selection;
    if (sel) loadDetails(sel.side, sel.index);
  }

  /**
   * Expands/collapses a node; with sync on, the matched node of the other pane follows.
   * @param {Side} side @param {number} i @param {boolean} [open]
   */
  function toggle(side, i, open) {
    const s = get();
    const m = s.models[side];
    if (!m || !m.hasChildren(i)) return;
    const want = open ?? !m.expanded[i];
    if (!want && i === 0) return; // the root stays open
    if (!m.setExpanded(i, want)) return;
    ui.refresh(paneOfGraph(s.result, side));
    ui.viewChanged();
    const other = otherSide(side);
    const om = s.models[other];
    if (!ui.sync() || !om || !s.result?.bench) return;
    let peer = m.g.matched[i];
    if (peer < 0 && want) {
      // Unmatched: open the counterpart of the nearest matched ancestor instead.
      for (let a = m.g.parent[i]; a >= 0 && peer < 0; a = m.g.parent[a]) peer = m.g.matched[a];
    }
    if (peer < 0 || peer >= om.n) return;
    let changed = false;
    if (want) changed = om.reveal(peer) || changed;
    if (peer !== 0 || want) changed = om.setExpanded(peer, want) || changed;
    if (changed) ui.refresh(paneOfGraph(s.result, other));
  }

  /**
   * *Expand all* / *Collapse* of a pane; with sync expand the other pane follows (as a node's expand does).
   * @param {Side} pane @param {boolean} open
   */
  function expandAll(pane, open) {
    const s = get();
    const gs = s.result && !s.result.bench ? 'npu' : pane;
    const m = s.models[gs];
    if (!m) return;
    m.setAll(open);
    ui.refresh(paneOfGraph(s.result, gs));
    ui.fit(pane);
    const om = s.models[otherSide(gs)];
    if (om && s.result?.bench && ui.sync()) {
      om.setAll(open);
      ui.refresh(paneOfGraph(s.result, otherSide(gs)));
      ui.fit(paneOfGraph(s.result, otherSide(gs)));
    }
    ui.viewChanged();
  }

  /** Reveals a node in its pane without selecting it. @param {Side} side @param {number} i */
  function revealNode(side, i) {
    const s = get();
    const m = s.models[side];
    if (!m || i < 0 || i >= m.n) return;
    if (!m.inStep(i)) setMicroStep(-1);
    const pane = paneOfGraph(s.result, side);
    if (m.reveal(i)) ui.refresh(pane);
    ui.reveal(pane, i);
  }

  /** Shows only the root children of micro step k (-1: all) in both panes. @param {number} k */
  function setMicroStep(k) {
    const s = get();
    let changed = false;
    for (const side of /** @type {Side[]} */ (['npu', 'bench'])) {
      const m = s.models[side];
      if (m && m.setMicroStep(k)) {
        changed = true;
        ui.refresh(paneOfGraph(s.result, side));
        ui.fit(paneOfGraph(s.result, side));
      }
    }
    ui.microShown(k, changed);
    if (changed) ui.viewChanged();
    return changed;
  }

  return { select, loadDetails, reloadDetails, toggle, expandAll, revealNode, setMicroStep };
}
