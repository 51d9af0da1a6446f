// @ts-check
// Image exports of a pane's graph: the whole tree as laid out (the expanded part, or every node
// expanded), as PNG at a chosen scale or as SVG, not just the pane's viewport.
import { TreeModel, L } from './tree.js';
import { OVERFLOW_COLORS, darker, isHatched, HATCH_COLOR } from './colors.js';
import { t } from './i18n.js';

/** Margin around the exported graph, in world units (CSS px at 1×). */
const EXPORT_PAD = 12;
/** Chromium's limits for a canvas: a side of at most 32767 px, and we keep the area under this. */
const MAX_SIDE = 32767;
const MAX_AREA = 120e6;

/**
 * The model to export: the pane's own (its expanded part) or a copy with every node expanded.
 * @param {TreeModel} m
 * @param {'expanded' | 'all'} scope
 */
export function exportModel(m, scope) {
  if (scope !== 'all') return m;
  const copy = new TreeModel(m.g, m.cls);
  copy.setMicroStep(m.micro);
  copy.setAll(true);
  return copy;
}

/**
 * The scale actually used for a PNG: the chosen one, reduced so the image stays within the
 * browser's canvas limits.
 * @param {number} w world width @param {number} h world height @param {number} scale
 */
export function pngScale(w, h, scale) {
  const W = w + 2 * EXPORT_PAD;
  const H = h + 2 * EXPORT_PAD;
  let s = Math.min(scale, MAX_SIDE / W, MAX_SIDE / H, Math.sqrt(MAX_AREA / (W * H)));
  s = Math.floor(s * 100) / 100;
  return Math.max(0.01, s);
}

/**
 * Renders a pane's graph as PNG.
 * @param {import('./graphview.js').GraphView} view
 * @param {TreeModel} m model to draw (laid out here)
 * @param {number} scale wanted scale (device px per CSS px)
 * @returns {Promise<{blob: Blob, width: number, height: number, scale: number}>}
 */
export async function graphPng(view, m, scale) {
  m.layout(0);
  const s = pngScale(m.w[0], m.h[0], scale);
  const canvas = document.createElement('canvas');
  canvas.width = Math.ceil((m.w[0] + 2 * EXPORT_PAD) * s);
  canvas.height = Math.ceil((m.h[0] + 2 * EXPORT_PAD) * s);
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext('2d', { alpha: false }));
  view.renderTo(ctx, m, s, EXPORT_PAD);
  const blob = await new Promise((resolve) => canvas.toBlob(resolve, 'image/png'));
  canvas.width = 0;
  canvas.height = 0;
  if (!blob) throw new Error(t('The browser could not encode the image.'));
  return { blob, width: Math.ceil((m.w[0] + 2 * EXPORT_PAD) * s), height: Math.ceil((m.h[0] + 2 * EXPORT_PAD) * s), scale: s };
}

/** @param {string} s */
function xml(s) {
  return s.replace(/[<>&"]/g, (c) => (c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '&' ? '&amp;' : '&quot;'));
}

/** @param {number} v */
const num = (v) => String(Math.round(v * 100) / 100);

/**
 * The graph as SVG: the same boxes, colours, hatch, overflow marks and labels as the pane draws,
 * every visible node of `m` (the whole extent), with each node's full name as its tooltip.
 * @param {TreeModel} m
 * @param {import('./colors.js').Bin[]} bins
 * @returns {string}
 */
export function graphSvg(m, bins) {
  m.layout(0);
  const W = m.w[0] + 2 * EXPORT_PAD;
  const H = m.h[0] + 2 * EXPORT_PAD;
  const out = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${num(W)}" height="${num(H)}" viewBox="0 0 ${num(W)} ${num(H)}" font-family="system-ui, sans-serif" font-size="${L.fontPx}">`,
    `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#FFFFFF"/><path d="M0 6L6 0M-1 1L1 -1M5 7L7 5" stroke="${HATCH_COLOR}" stroke-width="1"/></pattern></defs>`,
    `<rect width="100%" height="100%" fill="#f4f5f7"/>`,
  ];
  const strokes = bins.map((b) => darker(b.color));
  const hatched = bins.map((_, k) => isHatched(bins, k));
  // Pre-order walk of the visible tree with absolute positions.
  /** @type {[number, number, number][]} */
  const stack = [[0, EXPORT_PAD, EXPORT_PAD]];
  while (stack.length) {
    const [i, x, y] = /** @type {[number, number, number]} */ (stack.pop());
    const w = m.w[i];
    const h = m.h[i];
    const k = m.cls[i];
    const fill = hatched[k] ? 'url(#hatch)' : bins[k]?.color ?? '#ffffff';
    const stroke = strokes[k] ?? '#666666';
    const open = m.isOpen(i);
    const leaf = !m.hasChildren(i);
    const nodeType = m.g.nodeType[i];
    const dash = nodeType === 9 ? ' stroke-dasharray="6 2"' : nodeType === 8 ? ' stroke-dasharray="2 2"' : '';
    out.push(`<g><title>${xml(m.g.names[i])}</title>`);
    if (open) {
      out.push(`<rect x="${num(x)}" y="${num(y)}" width="${num(w)}" height="${num(h)}" fill="${m.depth[i] % 2 ? '#ffffff' : '#fbfbfc'}"/>`);
      out.push(`<rect x="${num(x)}" y="${num(y)}" width="${num(w)}" height="${num(Math.min(L.rowH, h))}" fill="${fill}"/>`);
      out.push(`<rect x="${num(x + 0.5)}" y="${num(y + 0.5)}" width="${num(w - 1)}" height="${num(h - 1)}" fill="none" stroke="${stroke}"${dash}/>`);
    } else {
      const r = leaf ? Math.min(h / 2, 8) : 0;
      out.push(`<rect x="${num(x + 0.5)}" y="${num(y + 0.5)}" width="${num(w - 1)}" height="${num(h - 1)}" rx="${num(r)}" fill="${fill}" stroke="${stroke}"${dash}/>`);
    }
    const ov = m.g.overflow[i];
    if (ov) {
      const c = OVERFLOW_COLORS[ov] ?? '#8888ff';
      out.push(`<rect x="${num(x)}" y="${num(y)}" width="6" height="${num(Math.min(L.rowH, h))}" fill="${c}"/>`);
      out.push(`<rect x="${num(x + 1)}" y="${num(y + 1)}" width="${num(w - 2)}" height="${num(h - 2)}" fill="none" stroke="${c}" stroke-width="2"/>`);
    }
    const label = m.drawnLabel[i] ?? m.label(i);
    const ty = y + Math.min(L.rowH, h) / 2;
    out.push(`<text x="${num(x + L.textPad)}" y="${num(ty)}" dominant-baseline="central" fill="#1d1f24">${xml(label)}</text>`);
    if (!leaf) out.push(`<text x="${num(x + w - 11)}" y="${num(ty)}" dominant-baseline="central" fill="#555">${open ? '−' : '+'}</text>`);
    out.push('</g>');
    if (open) {
      const a = m.childStart[i];
      const b = m.childStart[i + 1];
      for (let c = b - 1; c >= a; c--) {
        const ch = m.childList[c];
        stack.push([ch, x + m.rx[ch], y + m.ry[ch]]);
      }
    }
  }
  out.push('</svg>');
  return out.join('\n');
}

/**
 * Wires the export tool's graph buttons: PNG and SVG of either pane, with the scale and scope chosen
 * next to them (`#export-scale`, `#export-scope`).
 * @param {Record<'npu' | 'bench', import('./graphview.js').GraphView>} views
 * @param {(blob: Blob, name: string) => void} download
 * @param {(text: string, err?: boolean) => void} msg
 */
export function installGraphExports(views, download, msg) {
  const scaleEl = /** @type {HTMLSelectElement | null} */ (document.getElementById('export-scale'));
  const scopeEl = /** @type {HTMLSelectElement | null} */ (document.getElementById('export-scope'));
  for (const side of /** @type {const} */ (['npu', 'bench'])) {
    const pick = () => {
      const v = views[side];
      if (!v.model || !v.model.n) {
        msg(t('Nothing to export.'), true);
        return null;
      }
      return { v, m: exportModel(v.model, scopeEl?.value === 'all' ? 'all' : 'expanded') };
    };
    document.getElementById(`png-${side}`)?.addEventListener('click', async () => {
      const p = pick();
      if (!p) return;
      const want = Number(scaleEl?.value ?? 2) || 1;
      try {
        const r = await graphPng(p.v, p.m, want);
        download(r.blob, `probelens_${side}.png`);
        const text = t('PNG {w}×{h} px at {s}×', { w: r.width, h: r.height, s: r.scale });
        msg(r.scale < want ? `${text} ${t('(reduced from {s}× to stay within the browser\'s canvas limits)', { s: want })}` : text);
        const box = document.getElementById('export-msg');
        if (box) Object.assign(box.dataset, { width: String(r.width), height: String(r.height), scale: String(r.scale) });
      } catch (e) {
        msg(e instanceof Error ? e.message : String(e), true);
      }
    });
    document.getElementById(`svg-${side}`)?.addEventListener('click', () => {
      const p = pick();
      if (!p) return;
      const svg = graphSvg(p.m, p.v.bins);
      download(new Blob([svg], { type: 'image/svg+xml' }), `probelens_${side}.svg`);
      msg(t('SVG of {n} boxes', { n: (svg.match(/<g>/g) ?? []).length }));
    });
  }
}
