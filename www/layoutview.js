// @ts-check
// The layout's view (the logic is controllers/layout.js): the folded load bar, the details drawer,
// the sidebar, the outlines and the minimaps shown or hidden, and the drag handles that resize them.
import { $ } from './dom.js';
import { t } from './i18n.js';
import { SIDES } from './protocol.js';

/** @typedef {import('./protocol.js').Side} Side */

/**
 * Applies the store's `layout` slice to the page and wires the controls that change it.
 * @param {object} o
 * @param {import('./store.js').Store<{layout: import('./controllers/layout.js').LayoutState}>} o.store
 * @param {ReturnType<typeof import('./controllers/layout.js').createLayoutController>} o.lay
 * @param {HTMLElement} o.panesEl
 * @param {Record<Side, import('./graphview.js').GraphView>} o.views
 * @param {Record<Side, import('./minimap.js').Minimap>} o.minimaps
 */
export function installLayout({ store, lay, panesEl, views, minimaps }) {
  // The graphs are the page: the load bar folds to one line once something is shown, the details
  // are a drawer, the sidebar and the outlines can be hidden or resized; sizes are remembered.
  const MINI = { w: 168 + 16, h: 118 + 16 };
  /** @param {import('./controllers/layout.js').LayoutState} l */
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
    b.addEventListener('click', () => lay.toggle('minimapOpen'));
    /** @type {HTMLElement} */ ($(`${side}-canvas`).parentElement).append(b);
    miniButtons[side] = b;
  }
  store.subscribe(['layout'], (st, prev) => {
    applyLayout(st.layout);
    // Fit again when the minimap's corner changed.
    if (st.layout.minimapOpen !== prev.layout.minimapOpen) for (const side of SIDES) views[side].fit();
  });
  applyLayout(store.get().layout);

  $('load-toggle').addEventListener('click', () => lay.toggle('loadOpen'));
  $('load-compact').addEventListener('click', () => lay.toggle('loadOpen', true));
  $('details-toggle').addEventListener('click', () => lay.toggle('detailsOpen'));
  $('sidebar-toggle').addEventListener('click', () => lay.toggle('sidebarOpen'));
  $('opt-minimap').addEventListener('change', () => lay.toggle('minimapOpen', /** @type {HTMLInputElement} */ ($('opt-minimap')).checked));

  /**
   * A drag handle: pointer drags and arrow keys change one size.
   * @param {HTMLElement} handle @param {(ev: PointerEvent) => number} at the size for a pointer position
   * @param {'sidebarW' | 'detailsH' | 'split' | 'outlineW'} key @param {[string, string, number]} keys decrease key, increase key, step
   */
  function dragSize(handle, at, key, keys) {
    handle.addEventListener('pointerdown', (e) => {
      handle.setPointerCapture(e.pointerId);
      const move = (/** @type {PointerEvent} */ ev) => lay.set({ [key]: at(ev) });
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
      lay.set({ [key]: store.get().layout[key] + (e.key === keys[0] ? -keys[2] : keys[2]) });
    });
  }
  dragSize($('splitter'), (ev) => {
    const r = panesEl.getBoundingClientRect();
    return ((ev.clientX - r.left) / r.width) * 100;
  }, 'split', ['ArrowLeft', 'ArrowRight', 3]);
  dragSize($('hsplit'), (ev) => Math.min(window.innerHeight - 200, window.innerHeight - ev.clientY), 'detailsH', ['ArrowDown', 'ArrowUp', 30]);
  dragSize($('sidebar-resize'), (ev) => ev.clientX - $('sidebar').getBoundingClientRect().left, 'sidebarW', ['ArrowLeft', 'ArrowRight', 20]);
  $('hsplit').addEventListener('dblclick', () => lay.toggle('detailsOpen'));
  for (const h of /** @type {HTMLElement[]} */ (Array.from(document.querySelectorAll('.oresize')))) {
    const outline = $(`${h.dataset.side}-outline`);
    dragSize(h, (ev) => ev.clientX - outline.getBoundingClientRect().left, 'outlineW', ['ArrowLeft', 'ArrowRight', 20]);
  }
}
