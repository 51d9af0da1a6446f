// @ts-check
// Canvas 2D view of one pane: nested boxes, culling, level of detail, pan/zoom/fit, hit testing.
import { L } from './tree.js';
import { OVERFLOW_COLORS, darker, isHatched, hatchPattern } from './colors.js';

const SELECT_COLOR = '#1f3fcf';
const PEER_COLOR = '#e07b00';
const PICK_COLOR = '#0a8f3c';

export class GraphView {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {{onSelect: (i: number, e?: MouseEvent) => void, onToggle: (i: number) => void}} handlers
   */
  constructor(canvas, handlers) {
    this.canvas = canvas;
    this.ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext('2d', { alpha: false }));
    this.handlers = handlers;
    /** @type {import('./tree.js').TreeModel | null} */
    this.model = null;
    /** @type {import('./colors.js').Bin[]} */
    this.bins = [];
    /** @type {string[]} */
    this.strokes = [];
    this.scale = 1;
    this.tx = 20;
    this.ty = 20;
    this.selected = -1;
    this.peer = -1;
    /** the node picked for a manual match on this side */
    this.pick = -1;
    /** last pointer position over the canvas (CSS px), for zooming with the keyboard */
    this.pointer = { x: -1, y: -1, inside: false };
    /** called after every frame (the minimap draws its viewport then) */
    /** @type {(() => void) | null} */
    this.afterDraw = null;
    this.dirty = false;
    this.fontPx = /** @type {number} */ (L.fontPx);
    this.curFill = '';
    this.curStroke = '';
    this.cssW = 0;
    this.cssH = 0;
    this.dpr = 1;
    /** the corner the minimap covers (CSS px from the top right; null: none): fit leaves it clear */
    /** @type {{w: number, h: number} | null} */
    this.reserve = null;
    /** statistics of the last frame (for tests and the perf check) */
    this.stats = { drawn: 0, ms: 0 };
    /** @type {boolean[]} */
    this.hatched = [];
    /** @type {CanvasPattern | null} */
    this.hatch = null;
    /** @type {import('./colors.js').Bin[]} the result's legend classes (the colours of the model's `cls`) */
    this.baseBins = [];
    /** @type {Uint8Array | null} the class per node drawn instead of the model's `cls` (the divergence overlay) */
    this.paintCls = null;
    this.installInput();
    new ResizeObserver(() => this.resize()).observe(canvas);
  }

  /** @param {import('./tree.js').TreeModel | null} model @param {import('./colors.js').Bin[]} bins */
  setModel(model, bins) {
    this.model = model;
    this.baseBins = bins;
    this.setPaint(null);
    this.selected = -1;
    this.peer = -1;
    this.pick = -1;
    this.fit();
  }

  /**
   * Colours the nodes by other classes than the model's (the divergence overlay), or back by the
   * model's own (null).
   * @param {{bins: readonly import('./colors.js').Bin[], cls: Uint8Array} | null} paint
   */
  setPaint(paint) {
    const bins = paint ? [...paint.bins] : this.baseBins;
    this.paintCls = paint ? paint.cls : null;
    this.bins = bins;
    this.strokes = bins.map((b) => darker(b.color));
    /** classes drawn hatched ("no precision index" in a compare, white like msprobe's "pass") */
    this.hatched = bins.map((_, k) => isHatched(bins, k));
    this.invalidate();
  }

  /** The class node i is drawn with. @param {number} i */
  classOf(i) {
    return (this.paintCls ?? this.model?.cls)?.[i] ?? -1;
  }

  /** The fill colour node i is drawn with (tests read it back). @param {number} i */
  colorOf(i) {
    return this.bins[this.classOf(i)]?.color ?? '#ffffff';
  }

  /** Moves the view by (dx, dy) CSS px. @param {number} dx @param {number} dy */
  panBy(dx, dy) {
    this.tx += dx;
    this.ty += dy;
    this.invalidate();
  }

  /** Centres the view on the world point (x, y). @param {number} x @param {number} y */
  centreOn(x, y) {
    this.tx = this.cssW / 2 - x * this.scale;
    this.ty = this.cssH / 2 - y * this.scale;
    this.invalidate();
  }

  /** Zooms by k about the pointer when it is over the canvas, else about the centre. @param {number} k */
  zoomKey(k) {
    const p = this.pointer;
    if (p.inside) this.zoomAt(k, p.x, p.y);
    else this.zoomAt(k, this.cssW / 2, this.cssH / 2);
  }

  resize() {
    const r = this.canvas.getBoundingClientRect();
    this.dpr = window.devicePixelRatio || 1;
    this.cssW = Math.max(1, r.width);
    this.cssH = Math.max(1, r.height);
    this.canvas.width = Math.round(this.cssW * this.dpr);
    this.canvas.height = Math.round(this.cssH * this.dpr);
    this.draw();
  }

  invalidate() {
    if (this.dirty) return;
    this.dirty = true;
    requestAnimationFrame(() => {
      this.dirty = false;
      this.draw();
    });
  }

  /** Reads the canvas size now (a pane that was just shown or resized has not been observed yet). */
  measure() {
    const r = this.canvas.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) {
      this.cssW = r.width;
      this.cssH = r.height;
    }
  }

  /** Zooms so the whole (visible) graph fits the pane. */
  fit() {
    const m = this.model;
    this.measure();
    if (!m || !m.n) return this.invalidate();
    m.layout(0);
    const W = this.cssW || this.canvas.clientWidth || 400;
    const H = this.cssH || this.canvas.clientHeight || 300;
    const gw = m.w[0];
    const gh = m.h[0];
    const fitIn = (/** @type {number} */ w, /** @type {number} */ h) => Math.max(1e-4, Math.min((w - 24) / gw, (h - 24) / gh, 1.5));
    let s = fitIn(W, H);
    let x0 = 0;
    let y0 = 0;
    let w = W;
    let h = H;
    const r = this.reserve;
    if (r) {
      // The graph must stay clear of the minimap's corner: fit it beside the minimap or below it,
      // whichever leaves it larger (unless it is clear anyway when centred).
      const tx = (W - gw * s) / 2;
      const ty = Math.max(12, (H - gh * s) / 2);
      const overlaps = tx + gw * s > W - r.w && ty < r.h;
      if (overlaps) {
        const beside = fitIn(W - r.w, H);
        const below = fitIn(W, H - r.h);
        if (beside >= below) {
          s = beside;
          w = W - r.w;
        } else {
          s = below;
          y0 = r.h;
          h = H - r.h;
        }
      }
    }
    this.scale = s;
    this.tx = x0 + (w - gw * s) / 2;
    this.ty = y0 + Math.max(12, (h - gh * s) / 2);
    this.invalidate();
  }

  /**
   * Pans (and zooms in if it is too small to read) so that node i is in view.
   * @param {number} i
   */
  showNode(i) {
    const m = this.model;
    if (!m || i < 0) return;
    this.measure();
    m.layout(0);
    const { x, y } = m.absPos(i);
    if (m.h[i] * this.scale < 14) this.scale = Math.min(1.2, Math.max(this.scale, 14 / L.rowH));
    const margin = 24;
    // A box wider than the pane: zoom out so that it fits (not below a readable size).
    const room = this.cssW - 2 * margin;
    if (m.w[i] * this.scale > room && room > 0) this.scale = Math.max(Math.min(this.scale, room / m.w[i]), 0.35);
    const sx = x * this.scale + this.tx;
    const sy = y * this.scale + this.ty;
    const sw = m.w[i] * this.scale;
    const sh = Math.min(m.h[i], L.rowH * 3) * this.scale;
    if (sx < margin || sx + sw > this.cssW - margin || sy < margin || sy + sh > this.cssH - margin) {
      // Centre the node (its whole width; its head when it is taller than a few rows).
      this.tx = this.cssW / 2 - (x + m.w[i] / 2) * this.scale;
      this.ty = this.cssH / 2 - (y + Math.min(m.h[i], L.rowH * 2) / 2) * this.scale;
    }
    this.invalidate();
  }

  /** Zoom by factor k about the screen point (px, py). @param {number} k @param {number} px @param {number} py */
  zoomAt(k, px, py) {
    const s = Math.min(8, Math.max(1e-4, this.scale * k));
    const f = s / this.scale;
    this.tx = px - (px - this.tx) * f;
    this.ty = py - (py - this.ty) * f;
    this.scale = s;
    this.invalidate();
  }

  installInput() {
    const c = this.canvas;
    /** @type {{x: number, y: number, tx: number, ty: number, moved: boolean, id: number} | null} */
    let drag = null;
    c.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.tx, ty: this.ty, moved: false, id: e.pointerId };
      c.setPointerCapture(e.pointerId);
    });
    const track = (/** @type {PointerEvent} */ e) => {
      const r = c.getBoundingClientRect();
      this.pointer = { x: e.clientX - r.left, y: e.clientY - r.top, inside: true };
    };
    c.addEventListener('pointerenter', track);
    c.addEventListener('pointerleave', () => (this.pointer.inside = false));
    c.addEventListener('pointermove', (e) => {
      track(e);
      if (!drag || drag.id !== e.pointerId) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (!drag.moved && Math.hypot(dx, dy) < 4) return;
      drag.moved = true;
      c.classList.add('panning');
      this.tx = drag.tx + dx;
      this.ty = drag.ty + dy;
      this.invalidate();
    });
    const end = (/** @type {PointerEvent} */ e) => {
      if (!drag || drag.id !== e.pointerId) return;
      const wasClick = !drag.moved;
      drag = null;
      c.classList.remove('panning');
      if (wasClick && e.type === 'pointerup') {
        const hit = this.hitTest(e);
        if (hit >= 0) this.handlers.onSelect(hit, e);
      }
    };
    c.addEventListener('pointerup', end);
    c.addEventListener('pointercancel', end);
    c.addEventListener('dblclick', (e) => {
      const hit = this.hitTest(e);
      if (hit >= 0) this.handlers.onToggle(hit);
    });
    c.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        const r = c.getBoundingClientRect();
        const dy = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
        if (e.ctrlKey || !e.shiftKey) this.zoomAt(Math.exp(-dy * 0.0015), e.clientX - r.left, e.clientY - r.top);
        else {
          this.tx -= e.deltaX || dy;
          this.invalidate();
        }
      },
      { passive: false },
    );
  }

  /** @param {MouseEvent} e @returns {number} */
  hitTest(e) {
    const r = this.canvas.getBoundingClientRect();
    return this.nodeAt((e.clientX - r.left - this.tx) / this.scale, (e.clientY - r.top - this.ty) / this.scale);
  }

  /**
   * Deepest visible node whose box contains the world point (x, y), or -1.
   * @param {number} x @param {number} y
   */
  nodeAt(x, y) {
    const m = this.model;
    if (!m || !m.n) return -1;
    m.layout(0);
    if (x < 0 || y < 0 || x > m.w[0] || y > m.h[0]) return -1;
    let i = 0;
    let ox = 0;
    let oy = 0;
    for (;;) {
      if (!m.isOpen(i)) return i;
      const lx = x - ox;
      const ly = y - oy;
      const a = m.childStart[i];
      const b = m.childStart[i + 1];
      let k = firstBelow(m, a, b, ly);
      let found = -1;
      for (; k < b; k++) {
        const ch = m.childList[k];
        if (m.ry[ch] > ly) break;
        if (lx >= m.rx[ch] && lx <= m.rx[ch] + m.w[ch] && ly >= m.ry[ch] && ly <= m.ry[ch] + m.h[ch]) {
          found = ch;
          break;
        }
      }
      if (found < 0) return i;
      ox += m.rx[found];
      oy += m.ry[found];
      i = found;
    }
  }

  draw() {
    const t0 = performance.now();
    const ctx = this.ctx;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = '#f4f5f7';
    ctx.fillRect(0, 0, this.cssW, this.cssH);
    const m = this.model;
    this.stats.drawn = 0;
    if (!m || !m.n) {
      this.stats.ms = performance.now() - t0;
      if (this.afterDraw) this.afterDraw();
      return;
    }
    m.layout(0);
    ctx.textBaseline = 'middle';
    this.curFill = '';
    this.curStroke = '';
    // One font per frame, its size quantised to 0.25 px so glyph caches are reused while zooming.
    this.fontPx = Math.round(L.fontPx * this.scale * 4) / 4;
    ctx.font = `${this.fontPx}px system-ui, sans-serif`;
    this.drawNode(m, 0, 0, 0);
    // Selection outlines on top.
    for (const [idx, color, dash, grow] of /** @type {[number, string, number[], number][]} */ ([
      [this.pick, PICK_COLOR, [3, 2], 5],
      [this.peer, PEER_COLOR, [5, 3], 2],
      [this.selected, SELECT_COLOR, [], 2],
    ])) {
      if (idx < 0 || idx >= m.n || !m.isVisible(idx)) continue;
      const { x, y } = m.absPos(idx);
      ctx.save();
      ctx.setLineDash(dash);
      ctx.lineWidth = 2.5;
      ctx.strokeStyle = color;
      const sx = x * this.scale + this.tx;
      const sy = y * this.scale + this.ty;
      ctx.strokeRect(sx - grow, sy - grow, m.w[idx] * this.scale + 2 * grow, m.h[idx] * this.scale + 2 * grow);
      ctx.restore();
    }
    this.stats.ms = performance.now() - t0;
    if (this.afterDraw) this.afterDraw();
  }

  /**
   * Draws a whole laid-out tree (not just the pane's viewport) onto ctx at `scale` CSS px per world
   * unit, with a margin of `pad` world units, without the selection outlines: the PNG export.
   * The pane's own state is restored afterwards (nothing is drawn on the pane in between).
   * @param {CanvasRenderingContext2D} ctx
   * @param {import('./tree.js').TreeModel} model
   * @param {number} scale
   * @param {number} pad
   */
  renderTo(ctx, model, scale, pad) {
    const keep = {
      ctx: this.ctx, model: this.model, scale: this.scale, tx: this.tx, ty: this.ty, cssW: this.cssW, cssH: this.cssH,
      dpr: this.dpr, selected: this.selected, peer: this.peer, pick: this.pick, afterDraw: this.afterDraw,
      hatch: this.hatch, stats: { ...this.stats },
    };
    model.layout(0);
    try {
      Object.assign(this, {
        ctx, model, scale: 1, tx: pad, ty: pad, cssW: model.w[0] + 2 * pad, cssH: model.h[0] + 2 * pad,
        dpr: scale, selected: -1, peer: -1, pick: -1, afterDraw: null, hatch: null,
      });
      this.draw();
    } finally {
      Object.assign(this, keep);
      this.curFill = '';
      this.curStroke = '';
    }
  }

  /** Sets the fill colour only when it changes (parsing colour strings is a large part of a frame). @param {string} c */
  fillStyle(c) {
    if (c !== this.curFill) {
      this.ctx.fillStyle = c;
      this.curFill = c;
    }
  }

  /** Fills with the hatch of "no precision index" on colour c. @param {string} c */
  fillHatch(c) {
    if (!this.hatch) this.hatch = hatchPattern(this.ctx, c);
    this.ctx.fillStyle = this.hatch;
    this.curFill = '';
  }

  /** @param {string} c */
  strokeStyle(c) {
    if (c !== this.curStroke) {
      this.ctx.strokeStyle = c;
      this.curStroke = c;
    }
  }

  /**
   * @param {import('./tree.js').TreeModel} m
   * @param {number} i
   * @param {number} ax absolute world x of i
   * @param {number} ay absolute world y of i
   */
  drawNode(m, i, ax, ay) {
    const s = this.scale;
    const sx = ax * s + this.tx;
    const sy = ay * s + this.ty;
    const sw = m.w[i] * s;
    const sh = m.h[i] * s;
    if (sx > this.cssW || sy > this.cssH || sx + sw < 0 || sy + sh < 0) return; // culled
    const ctx = this.ctx;
    this.stats.drawn++;
    const k = this.paintCls ? this.paintCls[i] : m.cls[i];
    const bin = this.bins[k];
    const fill = bin ? bin.color : '#ffffff';
    const stroke = this.strokes[k] ?? '#666666';
    const open = m.isOpen(i);
    const nodeType = m.g.nodeType[i];
    // Level of detail: a box smaller than ~2 px is a dot.
    if (sw < 2 || sh < 2) {
      this.fillStyle(stroke);
      ctx.fillRect(sx, sy, Math.max(sw, 1), Math.max(sh, 1));
      return;
    }
    const hh = Math.min(L.rowH * s, sh);
    const hatched = this.hatched[k];
    if (open) {
      this.fillStyle(m.depth[i] % 2 ? '#ffffff' : '#fbfbfc');
      ctx.fillRect(sx, sy, sw, sh);
      if (hatched) this.fillHatch(fill);
      else this.fillStyle(fill);
      ctx.fillRect(sx, sy, sw, hh);
    } else {
      if (hatched) this.fillHatch(fill);
      else this.fillStyle(fill);
      if (!m.hasChildren(i) && sh > 6) roundRect(ctx, sx, sy, sw, sh, Math.min(sh / 2, 8 * s));
      else ctx.fillRect(sx, sy, sw, sh);
    }
    if (sw > 4) {
      ctx.lineWidth = 1;
      this.strokeStyle(stroke);
      if (nodeType === 9 || nodeType === 8) ctx.setLineDash(nodeType === 9 ? [6, 2] : [2, 2]);
      if (!open && !m.hasChildren(i) && sh > 6) {
        roundRect(ctx, sx + 0.5, sy + 0.5, sw - 1, sh - 1, Math.min(sh / 2, 8 * s), true);
      } else ctx.strokeRect(sx + 0.5, sy + 0.5, sw - 1, sh - 1);
      ctx.setLineDash([]);
    }
    // Overflow marker: a coloured frame and a band on the left edge.
    const ov = m.g.overflow[i];
    if (ov) {
      const c = OVERFLOW_COLORS[ov] ?? '#8888ff';
      this.fillStyle(c);
      ctx.fillRect(sx, sy, Math.max(3, 6 * s), hh);
      if (sw > 6 && sh > 6) {
        this.strokeStyle(c);
        ctx.lineWidth = Math.max(1.5, 2 * s);
        ctx.strokeRect(sx + 1, sy + 1, sw - 2, sh - 2);
      }
    }
    // Label (skipped when too small to read). The label was truncated to the box at layout time;
    // fillText's maxWidth absorbs font hinting differences, so no clipping is needed.
    if (this.fontPx >= 5 && hh >= 7) {
      const text = m.drawnLabel[i] ?? m.label(i);
      const plus = m.hasChildren(i) ? 12 * s : 0;
      const natural = sx + L.textPad * s;
      // The header label of an open box that starts left of the view sticks to the left edge (clipped).
      const tx = open && natural < 4 ? Math.min(4, sx + sw - 40) : natural;
      const maxW = sx + sw - tx - plus - 3 * s;
      this.fillStyle('#1d1f24');
      if (tx === natural) {
        if (maxW > 4) ctx.fillText(text, tx, sy + hh / 2, maxW);
      } else if (maxW > 4) {
        ctx.save();
        ctx.beginPath();
        ctx.rect(tx, sy, maxW, hh);
        ctx.clip();
        ctx.fillText(text, tx, sy + hh / 2);
        ctx.restore();
        this.curFill = '';
        this.curStroke = '';
      }
      if (plus) {
        this.fillStyle('#555');
        ctx.fillText(open ? '−' : '+', sx + sw - 11 * s, sy + hh / 2);
      }
    }
    if (!open) return;
    // Children, culled by rows: children are ordered by ry, skip those above the view.
    const a = m.childStart[i];
    const b = m.childStart[i + 1];
    const viewTop = (0 - this.ty) / s - ay;
    const viewBottom = (this.cssH - this.ty) / s - ay;
    for (let k = firstBelow(m, a, b, viewTop); k < b; k++) {
      const ch = m.childList[k];
      if (m.ry[ch] > viewBottom) break;
      this.drawNode(m, ch, ax + m.rx[ch], ay + m.ry[ch]);
    }
  }
}

/**
 * Index k in [a, b) of the first child whose box may reach below y (children sorted by row).
 * @param {import('./tree.js').TreeModel} m @param {number} a @param {number} b @param {number} y
 */
function firstBelow(m, a, b, y) {
  let lo = a;
  let hi = b;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const ch = m.childList[mid];
    if (m.ry[ch] + m.h[ch] < y) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} x @param {number} y @param {number} w @param {number} h @param {number} r
 * @param {boolean} [stroke]
 */
function roundRect(ctx, x, y, w, h, r, stroke = false) {
  ctx.beginPath();
  ctx.roundRect(x, y, w, h, Math.max(0, Math.min(r, w / 2, h / 2)));
  if (stroke) ctx.stroke();
  else ctx.fill();
}
