// @ts-check
// Accessible, virtualised outline of one pane (role=tree): only the rows in view exist in the DOM.
import { fitText, fontOf } from './elide.js';
import { swatchBackground } from './colors.js';

const ROW_H = 22;
const OVERSCAN = 8;

export class Outline {
  /**
   * @param {HTMLElement} el the scroll container; becomes role=tree
   * @param {import('./protocol.js').Side} side
   * @param {{onSelect: (i: number, e?: MouseEvent) => void, onToggle: (i: number, open?: boolean) => void}} handlers
   */
  constructor(el, side, handlers) {
    this.el = el;
    this.side = side;
    this.handlers = handlers;
    /** @type {import('./tree.js').TreeModel | null} */
    this.model = null;
    /** @type {import('./colors.js').Bin[]} */
    this.bins = [];
    /** @type {import('./colors.js').Bin[]} the result's legend classes (the colours of the model's `cls`) */
    this.baseBins = [];
    /** @type {Uint8Array | null} the class per node shown instead of the model's `cls` (the divergence overlay) */
    this.paintCls = null;
    this.compare = false;
    this.selected = -1;
    this.peer = -1;
    /** the node picked for a manual match */
    this.pick = -1;
    /** @type {Int32Array} */
    this.rows = new Int32Array(0);
    el.setAttribute('role', 'tree');
    el.tabIndex = 0;
    this.spacer = document.createElement('div');
    this.spacer.className = 'outline-spacer';
    el.append(this.spacer);
    /** @type {HTMLElement[]} */
    this.pool = [];
    /** CSS font of the labels (read once) */
    this.font = '';
    el.addEventListener('scroll', () => this.render(), { passive: true });
    el.addEventListener('keydown', (e) => this.onKey(e));
    el.addEventListener('click', (e) => {
      const row = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest('[role=treeitem]'));
      if (!row) return;
      const i = Number(row.dataset.nodeIndex);
      if (/** @type {HTMLElement} */ (e.target).classList.contains('twisty')) this.handlers.onToggle(i);
      else this.handlers.onSelect(i, e);
    });
    el.addEventListener('dblclick', (e) => {
      const row = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest('[role=treeitem]'));
      if (!row || /** @type {HTMLElement} */ (e.target).classList.contains('twisty')) return;
      this.handlers.onToggle(Number(row.dataset.nodeIndex));
    });
    new ResizeObserver(() => this.render()).observe(el);
  }

  /**
   * @param {import('./tree.js').TreeModel | null} model
   * @param {import('./colors.js').Bin[]} bins
   * @param {boolean} compare
   */
  setModel(model, bins, compare) {
    this.model = model;
    this.bins = bins;
    this.baseBins = bins;
    this.paintCls = null;
    this.compare = compare;
    this.selected = -1;
    this.peer = -1;
    this.pick = -1;
    this.el.dataset.nodeCount = String(model ? model.n : 0);
    this.el.dataset.matchedCount = String(model && compare ? model.matchedCount : 0);
    this.el.removeAttribute('aria-activedescendant');
    this.el.scrollTop = 0;
    this.refresh();
  }

  /** Re-reads the visible rows (after expand/collapse) and re-renders. */
  /**
   * Shows the nodes' swatches by other classes than the model's (the divergence overlay), or back by
   * the model's own (null).
   * @param {{bins: readonly import('./colors.js').Bin[], cls: Uint8Array} | null} paint
   */
  setPaint(paint) {
    this.bins = paint ? [...paint.bins] : this.baseBins;
    this.paintCls = paint ? paint.cls : null;
    this.render();
  }

  refresh() {
    this.rows = this.model ? this.model.rows() : new Int32Array(0);
    this.spacer.style.height = `${this.rows.length * ROW_H}px`;
    this.el.dataset.rowCount = String(this.rows.length);
    this.render();
  }

  /** Row position of node i (-1 if not visible). @param {number} i */
  rowOf(i) {
    const rows = this.rows;
    // rows are increasing node indexes (pre-order), so binary search.
    let lo = 0;
    let hi = rows.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (rows[mid] === i) return mid;
      if (rows[mid] < i) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** Scrolls so that node i's row is visible. @param {number} i */
  scrollTo(i) {
    const r = this.rowOf(i);
    if (r < 0) return;
    const top = r * ROW_H;
    // The box's height can be fractional (clientHeight rounds it): a row placed at the bottom edge by
    // clientHeight alone can be cut by a fraction of a pixel, and clicking it scrolls again. Keep 2 px.
    const h = Math.floor(this.el.getBoundingClientRect().height) - 2;
    if (top < this.el.scrollTop) this.el.scrollTop = top;
    else if (top + ROW_H > this.el.scrollTop + h) this.el.scrollTop = top + ROW_H - h;
    this.render();
  }

  render() {
    const m = this.model;
    const rows = this.rows;
    const h = this.el.clientHeight || 400;
    // Room for a label: the row less its indent, twisty, swatch, gaps and right padding (.orow).
    const rowW = this.el.clientWidth - 12 - 4 - 12 - 4 - 6;
    const first = Math.max(0, Math.floor(this.el.scrollTop / ROW_H) - OVERSCAN);
    const last = Math.min(rows.length, Math.ceil((this.el.scrollTop + h) / ROW_H) + OVERSCAN);
    const need = m ? last - first : 0;
    while (this.pool.length < need) {
      const row = document.createElement('div');
      row.setAttribute('role', 'treeitem');
      row.className = 'orow';
      const tw = document.createElement('span');
      tw.className = 'twisty';
      tw.setAttribute('aria-hidden', 'true');
      const sw = document.createElement('span');
      sw.className = 'swatch';
      sw.setAttribute('aria-hidden', 'true');
      const lab = document.createElement('span');
      lab.className = 'olabel';
      const badge = document.createElement('span');
      badge.className = 'obadge';
      row.append(tw, sw, lab, badge);
      this.el.append(row);
      this.pool.push(row);
    }
    for (let k = 0; k < this.pool.length; k++) {
      const row = this.pool[k];
      if (!m || k >= need) {
        row.hidden = true;
        row.removeAttribute('id');
        continue;
      }
      const r = first + k;
      const i = rows[r];
      row.hidden = false;
      row.id = `${this.side}-node-${i}`;
      row.style.transform = `translateY(${r * ROW_H}px)`;
      row.dataset.nodeIndex = String(i);
      const ck = this.paintCls ? this.paintCls[i] : m.cls[i];
      const bin = this.bins[ck];
      row.dataset.precision = bin ? bin.cls : 'none';
      row.dataset.matched = this.compare && m.g.matched[i] >= 0 ? 'true' : 'false';
      row.setAttribute('aria-level', String(m.depth[i] + 1));
      const p = m.g.parent[i];
      row.setAttribute('aria-setsize', String(p >= 0 ? m.childCount(p) : 1));
      row.setAttribute('aria-posinset', String(m.sibIndex[i] + 1));
      const expandable = m.hasChildren(i);
      if (expandable) row.setAttribute('aria-expanded', m.expanded[i] ? 'true' : 'false');
      else row.removeAttribute('aria-expanded');
      const isSel = i === this.selected || i === this.peer;
      row.setAttribute('aria-selected', isSel ? 'true' : 'false');
      row.classList.toggle('peer', i === this.peer && i !== this.selected);
      row.classList.toggle('pick', i === this.pick);
      row.style.paddingLeft = `${4 + m.depth[i] * 14}px`;
      const [tw, sw, lab, badge] = /** @type {HTMLElement[]} */ (Array.from(row.children));
      tw.textContent = expandable ? (m.expanded[i] ? '▾' : '▸') : '';
      sw.style.background = swatchBackground(this.bins, ck);
      // Deep rows have little room: labels are elided in the middle (the title has the full name).
      if (!this.font) this.font = fontOf(lab);
      const ovW = m.g.overflow[i] ? 4 + 6 + 6 * m.g.overflow[i].length : 0;
      lab.textContent = fitText(m.label(i), rowW - (4 + m.depth[i] * 14) - ovW, this.font);
      row.title = m.g.names[i];
      const ov = m.g.overflow[i];
      badge.textContent = ov ? ov : '';
      badge.hidden = !ov;
    }
    if (this.selected >= 0 && this.rowOf(this.selected) >= first && this.rowOf(this.selected) < last) {
      this.el.setAttribute('aria-activedescendant', `${this.side}-node-${this.selected}`);
    } else this.el.removeAttribute('aria-activedescendant');
  }

  /** @param {number} sel @param {number} peer */
  setSelection(sel, peer) {
    this.selected = sel;
    this.peer = peer;
    this.render();
  }

  /** @param {KeyboardEvent} e */
  onKey(e) {
    const m = this.model;
    if (!m || !m.n) return;
    const cur = this.selected >= 0 && this.rowOf(this.selected) >= 0 ? this.selected : -1;
    const r = cur >= 0 ? this.rowOf(cur) : -1;
    /** @param {number} i */
    const go = (i) => {
      e.preventDefault();
      this.handlers.onSelect(i);
      this.scrollTo(i);
    };
    switch (e.key) {
      case 'ArrowDown':
        return go(this.rows[Math.min(this.rows.length - 1, r + 1)]);
      case 'ArrowUp':
        return go(this.rows[Math.max(0, r - 1)]);
      case 'Home':
        return go(this.rows[0]);
      case 'End':
        return go(this.rows[this.rows.length - 1]);
      case 'PageDown':
        return go(this.rows[Math.min(this.rows.length - 1, r + Math.floor(this.el.clientHeight / ROW_H))]);
      case 'PageUp':
        return go(this.rows[Math.max(0, r - Math.floor(this.el.clientHeight / ROW_H))]);
      case 'ArrowRight':
        if (cur < 0) return go(this.rows[0]);
        e.preventDefault();
        if (m.hasChildren(cur) && !m.expanded[cur]) this.handlers.onToggle(cur, true);
        else if (m.hasChildren(cur)) go(m.childList[m.childStart[cur]]);
        return;
      case 'ArrowLeft':
        if (cur < 0) return go(this.rows[0]);
        e.preventDefault();
        if (m.hasChildren(cur) && m.expanded[cur] && cur !== 0) this.handlers.onToggle(cur, false);
        else if (m.g.parent[cur] >= 0) go(m.g.parent[cur]);
        return;
      case 'Enter':
        if (cur < 0) return go(this.rows[0]);
        e.preventDefault();
        if (m.hasChildren(cur)) this.handlers.onToggle(cur);
        return;
      case ' ':
        if (cur < 0) return go(this.rows[0]);
        e.preventDefault();
        this.handlers.onSelect(cur);
        return;
      default:
    }
  }
}
