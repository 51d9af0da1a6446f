// @ts-check
// The view state carried in the URL hash (`#lang=…&step=…&rank=…&micro=…&sel=side:name&on=…&ob=…`):
// parsing and writing it, as pure functions of strings and plain values (no DOM, no `location`).

/** @typedef {import('../protocol.js').Side} Side */

/**
 * @typedef {{lang?: string, step?: number, rank?: number, micro?: number, sel?: {side: Side, name: string}, open: Partial<Record<Side, string[] | '*'>>, switched?: boolean}} HashState
 */

/** Hash keys of the expanded nodes per side. */
const OPEN_KEYS = /** @type {[string, Side][]} */ ([['on', 'npu'], ['ob', 'bench']]);

/** More expanded names than this are not written (the URL would get too long). */
export const MAX_OPEN = 400;

/**
 * @param {string} hash `location.hash`, with or without its `#`
 * @returns {HashState | null}
 */
export function parseHash(hash) {
  const h = hash.replace(/^#/, '');
  if (!h) return null;
  const p = new URLSearchParams(h);
  const num = (/** @type {string} */ k) => (p.has(k) && Number.isInteger(Number(p.get(k))) ? Number(p.get(k)) : undefined);
  /** @type {HashState} */
  const st = { lang: p.get('lang') ?? undefined, step: num('step'), rank: num('rank'), micro: num('micro'), open: {} };
  const sel = p.get('sel');
  if (sel && /^(npu|bench):/.test(sel)) {
    const k = sel.indexOf(':');
    st.sel = { side: /** @type {Side} */ (sel.slice(0, k)), name: sel.slice(k + 1) };
  }
  for (const [key, side] of OPEN_KEYS) {
    const v = p.get(key);
    if (v === '*') st.open[side] = '*';
    else if (v) st.open[side] = v.split(',').filter(Boolean);
  }
  return st;
}

/**
 * The hash of a view: `open[side]` lists the expanded nodes' names, `all[side]` says whether every
 * node with children is expanded (written `*`).
 * @param {{lang: string, step?: string, rank?: string, micro?: number, sel?: {side: Side, name: string} | null,
 *   open?: Partial<Record<Side, string[]>>, all?: Partial<Record<Side, boolean>>}} v
 */
export function buildHash(v) {
  const p = new URLSearchParams();
  p.set('lang', v.lang);
  if (v.step !== undefined) p.set('step', v.step);
  if (v.rank !== undefined) p.set('rank', v.rank);
  if (v.micro !== undefined && v.micro >= 0) p.set('micro', String(v.micro));
  if (v.sel) p.set('sel', `${v.sel.side}:${v.sel.name}`);
  for (const [key, side] of OPEN_KEYS) {
    const open = v.open?.[side] ?? [];
    if (v.all?.[side] && open.length) p.set(key, '*');
    else if (open.length && open.length <= MAX_OPEN) p.set(key, open.join(','));
  }
  return `#${p.toString()}`;
}
