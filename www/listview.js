// @ts-check
// A virtualised list of nodes (search hits, filter results, manual pairs) with a count and
// previous/next buttons: only the rows in view exist in the DOM.
import { fitText, fontOf } from './elide.js';

const LIST_ROW_H = 20;
const LIST_OVERSCAN = 6;

/**
 * @typedef {object} ListSource
 * @property {(i: number) => string} label   text of item i (an entry of `items`)
 * @property {(i: number) => string} [title]
 * @property {(i: number) => string} [color] swatch colour
 * @property {(i: number, pos: number) => void} onPick
 */

export class NodeList {
  /**
   * @param {HTMLElement} box container; receives the count line and the scrolling list
   * @param {string} id id prefix for the elements (tests use `${id}-list`, `${id}-count`, ...)
   * @param {ListSource} src
   * @param {(n: number, pos: number) => string} countText
   */
  constructor(box, id, src, countText) {
    this.src = src;
    this.countText = countText;
    /** @type {Int32Array} */
    this.items = new Int32Array(0);
    this.pos = -1;
    const bar = document.createElement('div');
    bar.className = 'list-bar';
    this.count = document.createElement('span');
    this.count.className = 'list-count';
    this.count.id = `${id}-count`;
    this.count.setAttribute('aria-live', 'polite');
    this.prevBtn = document.createElement('button');
    this.nextBtn = document.createElement('button');
    for (const [b, text, key, step] of /** @type {[HTMLButtonElement, string, string, number][]} */ ([
      [this.prevBtn, '↑', 'prev', -1],
      [this.nextBtn, '↓', 'next', 1],
    ])) {
      b.type = 'button';
      b.className = 'btn small';
      b.textContent = text;
      b.id = `${id}-${key}`;
      b.addEventListener('click', () => this.step(step));
    }
    bar.append(this.count, this.prevBtn, this.nextBtn);
    this.el = document.createElement('div');
    this.el.className = 'nlist';
    this.el.id = `${id}-list`;
    this.el.setAttribute('role', 'listbox');
    this.el.tabIndex = 0;
    this.spacer = document.createElement('div');
    this.spacer.className = 'outline-spacer';
    this.el.append(this.spacer);
    box.append(bar, this.el);
    /** @type {HTMLElement[]} */
    this.pool = [];
    /** CSS font of the labels (read once) */
    this.font = '';
    this.el.addEventListener('scroll', () => this.render(), { passive: true });
    this.el.addEventListener('click', (e) => {
      const row = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest('[role=option]'));
      if (row) this.choose(Number(row.dataset.pos));
    });
    this.el.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        e.stopPropagation();
        this.step(e.key === 'ArrowDown' ? 1 : -1);
      } else if (e.key === 'Enter' && this.pos >= 0) {
        e.preventDefault();
        e.stopPropagation();
        this.choose(this.pos);
      }
    });
    new ResizeObserver(() => this.render()).observe(this.el);
    this.setItems(new Int32Array(0));
  }

  /**
   * Shows a new list. The same items again (a search re-run on Enter, a refresh) keep the current
   * entry and the scroll position, so "next" steps on from it instead of starting over.
   * @param {Int32Array} items
   */
  setItems(items) {
    if (sameItems(this.items, items)) {
      this.items = items;
      this.updateCount();
      this.render();
      return;
    }
    this.items = items;
    this.pos = -1;
    this.spacer.style.height = `${items.length * LIST_ROW_H}px`;
    this.el.dataset.count = String(items.length);
    this.el.scrollTop = 0;
    this.updateCount();
    this.render();
  }

  updateCount() {
    this.count.textContent = this.countText(this.items.length, this.pos);
    this.count.dataset.count = String(this.items.length);
    this.prevBtn.disabled = !this.items.length;
    this.nextBtn.disabled = !this.items.length;
  }

  /** Moves the current entry by d (wrapping) and picks it. @param {number} d */
  step(d) {
    const n = this.items.length;
    if (!n) return;
    const p = this.pos < 0 ? (d > 0 ? 0 : n - 1) : (this.pos + d + n) % n;
    this.choose(p);
  }

  /** @param {number} p */
  choose(p) {
    if (p < 0 || p >= this.items.length) return;
    this.pos = p;
    this.scrollTo(p);
    this.updateCount();
    this.render();
    this.src.onPick(this.items[p], p);
  }

  /** @param {number} p */
  scrollTo(p) {
    const top = p * LIST_ROW_H;
    const h = this.el.clientHeight;
    if (top < this.el.scrollTop) this.el.scrollTop = top;
    else if (top + LIST_ROW_H > this.el.scrollTop + h) this.el.scrollTop = top + LIST_ROW_H - h;
  }

  render() {
    const items = this.items;
    const h = this.el.clientHeight || 200;
    // Room for a label: the row less its padding and the swatch (see .nrow in style.css).
    const rowW = this.el.clientWidth - 10;
    const first = Math.max(0, Math.floor(this.el.scrollTop / LIST_ROW_H) - LIST_OVERSCAN);
    const last = Math.min(items.length, Math.ceil((this.el.scrollTop + h) / LIST_ROW_H) + LIST_OVERSCAN);
    const need = last - first;
    while (this.pool.length < need) {
      const row = document.createElement('div');
      row.setAttribute('role', 'option');
      row.className = 'nrow';
      const sw = document.createElement('span');
      sw.className = 'swatch';
      sw.setAttribute('aria-hidden', 'true');
      const lab = document.createElement('span');
      lab.className = 'olabel';
      row.append(sw, lab);
      this.el.append(row);
      this.pool.push(row);
    }
    for (let k = 0; k < this.pool.length; k++) {
      const row = this.pool[k];
      if (k >= need) {
        row.hidden = true;
        continue;
      }
      const p = first + k;
      const i = items[p];
      row.hidden = false;
      row.style.transform = `translateY(${p * LIST_ROW_H}px)`;
      row.dataset.pos = String(p);
      row.dataset.nodeIndex = String(i);
      row.setAttribute('aria-selected', p === this.pos ? 'true' : 'false');
      const [sw, lab] = /** @type {HTMLElement[]} */ (Array.from(row.children));
      const c = this.src.color ? this.src.color(i) : '';
      sw.hidden = !c;
      sw.style.background = c;
      // Long names are elided in the middle (they differ at the end); the title has the full name.
      const text = this.src.label(i);
      if (!this.font) this.font = fontOf(lab);
      lab.textContent = fitText(text, rowW - (c ? 16 : 0), this.font);
      row.title = this.src.title ? this.src.title(i) : text;
    }
  }
}

/** @param {Int32Array} a @param {Int32Array} b */
function sameItems(a, b) {
  if (a.length !== b.length || !a.length) return false;
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return false;
  return true;
}
