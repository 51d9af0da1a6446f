// @ts-check
// Per-pane minimap: the whole laid-out graph at a tiny scale (cached until the layout or the colours
// change) with the pane's viewport on top; click or drag in it to move the view.

const MINI_W = 168;
const MINI_H = 118;

export class Minimap {
  /**
   * @param {HTMLElement} wrap the canvas wrapper of the pane (position: relative)
   * @param {import('./graphview.js').GraphView} view
   */
  constructor(wrap, view) {
    this.view = view;
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'minimap';
    this.canvas.setAttribute('aria-hidden', 'true');
    this.canvas.dataset.side = wrap.closest('[data-side]')?.getAttribute('data-side') ?? '';
    wrap.append(this.canvas);
    this.ctx = /** @type {CanvasRenderingContext2D} */ (this.canvas.getContext('2d'));
    /** offscreen copy of the graph drawing */
    this.content = document.createElement('canvas');
    this.cctx = /** @type {CanvasRenderingContext2D} */ (this.content.getContext('2d'));
    this.version = -1;
    /** @type {unknown} */
    this.model = null;
    this.enabled = true;
    /** world → minimap: scale and offset */
    this.k = 1;
    this.ox = 0;
    this.oy = 0;
    const dpr = window.devicePixelRatio || 1;
    for (const c of [this.canvas, this.content]) {
      c.width = Math.round(MINI_W * dpr);
      c.height = Math.round(MINI_H * dpr);
    }
    this.canvas.style.width = `${MINI_W}px`;
    this.canvas.style.height = `${MINI_H}px`;
    this.dpr = dpr;
    this.installInput();
    view.afterDraw = () => this.draw();
  }

  /** @param {boolean} on */
  setEnabled(on) {
    this.enabled = on;
    this.draw();
  }

  installInput() {
    const c = this.canvas;
    /** @param {PointerEvent} e */
    const go = (e) => {
      const r = c.getBoundingClientRect();
      const wx = (e.clientX - r.left - c.clientLeft - this.ox) / this.k;
      const wy = (e.clientY - r.top - c.clientTop - this.oy) / this.k;
      this.view.centreOn(wx, wy);
    };
    let down = false;
    c.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      e.stopPropagation();
      down = true;
      c.setPointerCapture(e.pointerId);
      go(e);
    });
    c.addEventListener('pointermove', (e) => {
      if (down) go(e);
    });
    const up = () => (down = false);
    c.addEventListener('pointerup', up);
    c.addEventListener('pointercancel', up);
    c.addEventListener('wheel', (e) => e.stopPropagation(), { passive: true });
  }

  /** Redraws the cached graph picture when the model changed, then the viewport. */
  draw() {
    const m = this.view.model;
    const show = this.enabled && !!m && m.n > 0;
    this.canvas.hidden = !show;
    if (!show || !m) return;
    if (this.model !== m || this.version !== m.version) this.render(m);
    const ctx = this.ctx;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.clearRect(0, 0, MINI_W, MINI_H);
    ctx.drawImage(this.content, 0, 0, MINI_W, MINI_H);
    // The pane's viewport in world units, then in minimap pixels.
    const v = this.view;
    const x0 = (0 - v.tx) / v.scale;
    const y0 = (0 - v.ty) / v.scale;
    const x1 = (v.cssW - v.tx) / v.scale;
    const y1 = (v.cssH - v.ty) / v.scale;
    ctx.strokeStyle = '#1f3fcf';
    ctx.lineWidth = 1.5;
    ctx.fillStyle = 'rgba(31, 63, 207, 0.08)';
    const rx = this.ox + x0 * this.k;
    const ry = this.oy + y0 * this.k;
    const rw = Math.max(3, (x1 - x0) * this.k);
    const rh = Math.max(3, (y1 - y0) * this.k);
    ctx.fillRect(rx, ry, rw, rh);
    ctx.strokeRect(rx, ry, rw, rh);
    this.canvas.dataset.viewport = [rx, ry, rw, rh].map((n) => n.toFixed(1)).join(',');
  }

  /** @param {import('./tree.js').TreeModel} m */
  render(m) {
    this.model = m;
    this.version = m.version;
    m.layout(0);
    const pad = 4;
    this.k = Math.min((MINI_W - 2 * pad) / Math.max(1, m.w[0]), (MINI_H - 2 * pad) / Math.max(1, m.h[0]));
    this.ox = (MINI_W - m.w[0] * this.k) / 2;
    this.oy = pad;
    const ctx = this.cctx;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = '#eef0f4';
    ctx.fillRect(0, 0, MINI_W, MINI_H);
    const bins = this.view.bins;
    /** @type {[number, number, number][]} */
    const stack = [[0, this.ox, this.oy]];
    while (stack.length) {
      const [i, x, y] = /** @type {[number, number, number]} */ (stack.pop());
      const w = m.w[i] * this.k;
      const h = m.h[i] * this.k;
      const bin = bins[this.view.classOf(i)];
      ctx.fillStyle = bin ? bin.color : '#ffffff';
      if (m.isOpen(i) && w > 3 && h > 3) {
        ctx.fillRect(x, y, w, Math.min(h, Math.max(1, 20 * this.k)));
        ctx.strokeStyle = '#9aa3b5';
        ctx.lineWidth = 0.5;
        ctx.strokeRect(x, y, w, h);
        for (let c = m.childStart[i]; c < m.childStart[i + 1]; c++) {
          const ch = m.childList[c];
          stack.push([ch, x + m.rx[ch] * this.k, y + m.ry[ch] * this.k]);
        }
      } else {
        ctx.fillRect(x, y, Math.max(w, 1), Math.max(h, 1));
      }
    }
  }
}
