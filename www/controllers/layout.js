// @ts-check
// The page's layout: which parts are open (load bar, tools sidebar, details drawer, outlines,
// minimaps) and their sizes, remembered in localStorage. No DOM: it takes the store and a Storage
// (`localStorage` in the page, a Map-backed stand-in in unit tests); the page's view applies the
// state as CSS variables and attributes.

/**
 * @typedef {object} LayoutState
 * @property {boolean} loadOpen   the load cards and options shown in full (else the compact bar)
 * @property {boolean} sidebarOpen
 * @property {number} sidebarW    px
 * @property {boolean} detailsOpen
 * @property {number} detailsH    px
 * @property {boolean} outlineOpen
 * @property {number} outlineW    px
 * @property {number} split       % of the panes' width for the NPU pane
 * @property {boolean} minimapOpen
 */

export const LAYOUT_KEY = 'probelens.layout.v1';

/** @type {LayoutState} */
export const LAYOUT_DEFAULTS = Object.freeze({
  loadOpen: true,
  sidebarOpen: true,
  sidebarW: 260,
  detailsOpen: true,
  detailsH: 190,
  outlineOpen: true,
  outlineW: 170,
  split: 50,
  minimapOpen: true,
});

/** Bounds of the sizes. */
export const LIMITS = Object.freeze({
  sidebarW: [180, 480],
  detailsH: [80, 900],
  outlineW: [90, 420],
  split: [15, 85],
});

/** @param {number} v @param {readonly number[]} r */
const clamp = (v, r) => Math.min(r[1], Math.max(r[0], v));

/**
 * The defaults for a window: the outlines (a second way to the same nodes) start hidden below
 * 1800 px, where the two canvases need the width; the details drawer starts at about a fifth of the
 * height.
 * @param {number} width @param {number} height the window's inner size
 * @returns {LayoutState}
 */
export function defaultsFor(width, height) {
  return { ...LAYOUT_DEFAULTS, outlineOpen: width >= 1800, detailsH: Math.round(Math.min(220, Math.max(140, height * 0.2))) };
}

/**
 * Reads the remembered layout (unknown or broken values fall back to the defaults).
 * @param {Pick<Storage, 'getItem'> | null} storage
 * @param {LayoutState} [defaults]
 * @returns {LayoutState}
 */
export function readLayout(storage, defaults = LAYOUT_DEFAULTS) {
  /** @type {LayoutState} */
  const out = { ...defaults };
  let saved = null;
  try {
    saved = JSON.parse(storage?.getItem(LAYOUT_KEY) ?? 'null');
  } catch {
    saved = null;
  }
  if (!saved || typeof saved !== 'object') return out;
  for (const k of /** @type {(keyof LayoutState)[]} */ (Object.keys(LAYOUT_DEFAULTS))) {
    const v = saved[k];
    if (typeof v !== typeof LAYOUT_DEFAULTS[k] || (typeof v === 'number' && !Number.isFinite(v)) || k === 'loadOpen') continue;
    /** @type {any} */ (out)[k] = k in LIMITS ? clamp(v, LIMITS[/** @type {keyof typeof LIMITS} */ (k)]) : v;
  }
  return out;
}

/**
 * @param {import('../store.js').StateOf<{layout: LayoutState}>} store the page's store (any state with `layout`)
 * @param {Pick<Storage, 'getItem' | 'setItem'> | null} storage
 */
export function createLayoutController(store, storage) {
  const save = () => {
    try {
      storage?.setItem(LAYOUT_KEY, JSON.stringify(store.get().layout));
    } catch {
      // Storage full or disabled (a file:// page in some browsers): the layout is just not remembered.
    }
  };
  /** @param {Partial<LayoutState>} patch */
  function set(patch) {
    /** @type {any} */
    const next = { ...store.get().layout };
    for (const [k, v] of Object.entries(patch)) next[k] = typeof v === 'number' && k in LIMITS ? clamp(v, LIMITS[/** @type {keyof typeof LIMITS} */ (k)]) : v;
    store.set({ layout: next });
    save();
  }
  /** @param {'loadOpen' | 'sidebarOpen' | 'detailsOpen' | 'outlineOpen' | 'minimapOpen'} k @param {boolean} [on] */
  function toggle(k, on) {
    set({ [k]: on ?? !store.get().layout[k] });
  }
  /** Back to the defaults (and forget the remembered ones). @param {LayoutState} [defaults] */
  function reset(defaults = LAYOUT_DEFAULTS) {
    store.set({ layout: { ...defaults } });
    save();
  }
  return { set, toggle, reset };
}
