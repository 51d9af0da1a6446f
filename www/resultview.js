// @ts-check
// The result's view: the panes' titles, the legend, the summary line, the diagnostics list, the
// notes on the input cards and the folded load bar's line, drawn from the page's state.
import { $ } from './dom.js';
import { t } from './i18n.js';
import { OVERFLOW_COLORS, binTitle, swatchBackground } from './colors.js';
import { legendItems, summaryOf } from './controllers/display.js';

/** @typedef {import('./protocol.js').Side} Side */
/** @typedef {import('./protocol.js').RunResult} RunResult */
/** @typedef {import('./controllers/load.js').Source} Source */
/**
 * The part of the page's state these views read.
 * @typedef {import('./controllers/load.js').LoadState & import('./controllers/display.js').DisplayState} PageView
 */

/** @param {number} n */
export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A side card's source line. @param {PageView} s @param {Side} side @param {string} [note] */
export function showSource(s, side, note) {
  const src = s.sources[side];
  $(`${side}-src`).textContent = src
    ? `${src.label} — ${t(src.files.length === 1 ? '{n} file' : '{n} files', { n: src.files.length })}, ` +
      `${fmtBytes(src.files.reduce((s, f) => s + f.size, 0))}${note ? ` (${t(note)})` : ''}${src.demo ? ` · ${t('the bundled demo')}` : ''}`
    : t('drop a dump folder here');
  $(`${side}-card`).classList.toggle('is-demo', !!src?.demo);
}

/** The panes' titles. @param {PageView} s */
export function renderTitles(s) {
  const { result: r, buildSide } = s;
  const single = !!r && !r.bench;
  $('npu-title').textContent = single
    ? t('{side} — build graph', { side: t(buildSide === 'npu' ? 'Debug / NPU' : 'Bench') })
    : t('Debug / NPU');
  $('bench-title').textContent = t('Bench');
}

/**
 * The legend: each class with its count, then the overflow levels.
 * @param {RunResult} result
 * @param {import('./colors.js').Classes} classes
 * @param {boolean} compare
 */
export function renderLegend(result, classes, compare) {
  const ul = $('legend');
  ul.replaceChildren();
  const items = legendItems(result, classes, compare);
  /** @param {string} cls @param {string} bg @param {string} text @param {string} title */
  const li = (cls, bg, text, title) => {
    const el = document.createElement('li');
    const sw = document.createElement('span');
    sw.className = cls;
    sw.style.background = bg;
    const tx = document.createElement('span');
    tx.textContent = text;
    el.title = title;
    el.append(sw, tx);
    ul.append(el);
    return el;
  };
  for (const b of items.bins) {
    const el = li('sw', swatchBackground(classes.bins, b.k), `${compare ? t(b.label) : t('nodes')} ${b.count}`, binTitle(classes.bins[b.k]));
    el.dataset.precision = b.cls;
    el.dataset.count = String(b.count);
  }
  for (const o of items.overflow) {
    const n = result.bench ? `${o.npu} / ${o.bench}` : String(o.npu);
    const title = result.bench
      ? t('overflow {level}: {n} NPU nodes, {b} Bench nodes', { level: o.level, n: o.npu, b: o.bench })
      : t('overflow {level}', { level: o.level });
    const el = li('sw ov', OVERFLOW_COLORS[o.level] ?? '#888', `${t('overflow {level}', { level: o.level })} ${n}`, title);
    el.dataset.overflow = o.level;
    el.dataset.count = String(o.npu);
  }
}

/**
 * The summary line (and its numbers as data attributes).
 * @param {PageView} st
 * @param {RunResult} result
 * @param {import('./colors.js').Classes} classes
 * @param {boolean} compare
 */
export function renderSummary(st, result, classes, compare) {
  const el = $('summary');
  const { mode, vis, models } = st;
  const s = summaryOf(result, classes, models);
  const file = mode === 'vis' && vis ? ` · ${vis.name}` : '';
  el.dataset.npuNodes = String(s.n);
  if (!compare || !result.bench) {
    el.dataset.benchNodes = '0';
    el.textContent = t('{n} nodes (build graph)', { n: s.n }) + file;
    return;
  }
  Object.assign(el.dataset, {
    benchNodes: String(s.nb), matchedNpu: String(s.mN), matchedBench: String(s.mB),
    errors: String(s.errors), warnings: String(s.warnings),
  });
  el.textContent =
    t('NPU {n} nodes · Bench {nb} nodes · matched {m} · unmatched {un} NPU / {ub} Bench · errors {e} · warnings {w}', {
      n: s.n, nb: s.nb, m: s.mN, un: s.n - s.mN, ub: s.nb - s.mB, e: s.errors, w: s.warnings,
    }) + (result.task ? ` · ${t('task {task}', { task: result.task })}` : '') + file;
}

/** The shown result's warnings and notes, below the details. @param {RunResult} result */
export function renderDiagnostics(result) {
  const ul = $('diagnostics');
  ul.replaceChildren();
  for (const d of result.diagnostics ?? []) {
    const li = document.createElement('li');
    li.className = d.severity;
    li.textContent = `${d.severity}: ${d.file ? `${d.file}: ` : ''}${d.message}`;
    ul.append(li);
  }
}

/**
 * The warnings and notes of the shown result also go next to what they concern: a side's card when
 * they name a file of its folder (`<root>/...`), the mapping card when they are about the layer
 * mapping. Not for a side whose newly chosen folder is not shown (its card has the load's error).
 * @param {PageView} s
 */
export function renderCardWarnings(s) {
  /** @type {Record<'npu' | 'bench' | 'mapping', string[]>} */
  const notes = { npu: [], bench: [], mapping: [] };
  const roots = { npu: s.applied.npu?.root ?? '', bench: s.applied.bench?.root ?? '' };
  for (const d of s.mode === 'dump' ? s.result?.diagnostics ?? [] : []) {
    const text = `${d.file ? `${d.file}: ` : ''}${d.message}`;
    const of = (/** @type {Side} */ side) => !!roots[side] && text.startsWith(`${roots[side]}/`);
    const where = roots.npu !== roots.bench && of('npu') ? 'npu'
      : roots.npu !== roots.bench && of('bench') ? 'bench'
        : /^the layer mapping\b/.test(text) ? 'mapping' : null;
    if (where) notes[where].push(`${d.severity}: ${text}`);
  }
  for (const where of /** @type {const} */ (['npu', 'bench', 'mapping'])) {
    const shown = where === 'mapping' || s.sources[where] === s.applied[where];
    const el = $(`${where}-warn`);
    el.textContent = shown ? notes[where].join('\n') : '';
    el.hidden = !el.textContent;
  }
  renderCompact(s);
}

/** The folded load bar's line: what is loaded, marked when it is the demo. @param {PageView} s */
export function renderCompact(s) {
  const el = $('load-compact');
  el.replaceChildren();
  /** @param {string} label @param {Source | null} src */
  const part = (label, src) => {
    const sp = document.createElement('span');
    sp.textContent = `${t(label)}: ${src ? src.label : '—'}`;
    el.append(sp);
    if (src?.demo) {
      const tag = document.createElement('span');
      tag.className = 'demo-tag';
      tag.textContent = t('demo');
      el.append(tag);
    }
  };
  if (s.mode === 'vis' && s.vis) {
    el.textContent = `${t('msprobe output')}: ${s.vis.name}`;
    return;
  }
  part('NPU', s.applied.npu);
  el.append(' ⇄ ');
  part('Bench', s.applied.bench);
  // Notes on the cards (warnings naming a side's file or the mapping) are folded away with them: say so.
  const notes = ['npu', 'bench', 'mapping'].filter((w) => !$(`${w}-warn`).hidden).length;
  if (notes) {
    const w = document.createElement('span');
    w.className = 'compact-warn';
    w.textContent = ` · ⚠ ${t('notes on the inputs: open them')}`;
    el.append(w);
  }
}
