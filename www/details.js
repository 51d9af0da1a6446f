// @ts-check
// Node details panel: per-tensor NPU vs Bench table (values exactly as the core gives them) and stacks.
import { t, msprobeText } from './i18n.js';

/** @typedef {import('./protocol.js').NodeDetail} NodeDetail */

/** Column order: identity first, statistics, then whatever else the core has, verdict last. */
const FIRST = ['type', 'dtype', 'shape', 'value', 'Max', 'Min', 'Mean', 'Norm', 'md5'];
const LAST = ['Result', 'Err_message'];
/** Fields that say nothing to a reader of the table. */
const HIDDEN = new Set(['data_name', 'isBench', 'isMatched']);
/** Fields whose NPU and Bench values are compared cell by cell (the rest are the core's diffs). */
const COMPARED = new Set(['type', 'dtype', 'shape', 'value', 'Max', 'Min', 'Mean', 'Norm', 'md5', 'requires_grad']);

/**
 * Do an NPU and a Bench value differ? Numbers compare by value (NaN equals NaN), anything else as text;
 * a value on one side only differs.
 * @param {string | undefined} a @param {string | undefined} b
 */
export function differs(a, b) {
  if (a === b) return false;
  if (a === undefined || b === undefined) return true;
  const x = Number(a);
  const y = Number(b);
  if (a.trim() !== '' && b.trim() !== '' && !Number.isNaN(x) && !Number.isNaN(y)) return x !== y;
  if (/^nan$/i.test(a.trim()) && /^nan$/i.test(b.trim())) return false;
  return a.replace(/\s+/g, '') !== b.replace(/\s+/g, '');
}

/**
 * @param {string} tag
 * @param {string} [cls]
 * @param {string} [text]
 */
function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * Copies text; works on plain http and file:// where navigator.clipboard is missing.
 * @param {string} text
 */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the textarea fallback
  }
  const ta = document.createElement('textarea');
  ta.value = text;
  ta.setAttribute('readonly', '');
  ta.style.position = 'fixed';
  ta.style.left = '-9999px';
  ta.style.top = '0';
  document.body.append(ta);
  ta.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  ta.remove();
  return ok;
}

/** @param {NodeDetail | null} d @returns {Map<string, [string, string][]>} */
function tensorsOf(d) {
  const m = new Map();
  if (!d) return m;
  for (const [k, fields] of [...(d.inputData ?? []), ...(d.outputData ?? [])]) m.set(k, fields);
  return m;
}

export class DetailsPanel {
  /** @param {HTMLElement} root */
  constructor(root) {
    this.root = root;
    this.tabs = /** @type {HTMLElement} */ (root.querySelector('[role=tablist]'));
    this.compareEl = /** @type {HTMLElement} */ (root.querySelector('#details-compare'));
    this.stackEl = /** @type {HTMLElement} */ (root.querySelector('#details-stack'));
    this.titleEl = /** @type {HTMLElement} */ (root.querySelector('#details-title'));
    for (const tab of Array.from(this.tabs.querySelectorAll('[role=tab]'))) {
      tab.addEventListener('click', () => this.showTab(/** @type {HTMLElement} */ (tab)));
      tab.addEventListener('keydown', (e) => {
        const ke = /** @type {KeyboardEvent} */ (e);
        if (ke.key !== 'ArrowRight' && ke.key !== 'ArrowLeft') return;
        const all = Array.from(this.tabs.querySelectorAll('[role=tab]'));
        const next = /** @type {HTMLElement} */ (all[(all.indexOf(tab) + 1) % all.length]);
        next.focus();
        this.showTab(next);
      });
    }
    /** the shown table as text rows (header first), for the CSV export */
    /** @type {string[][]} */
    this.table = [];
    /** @type {{pair: {npu: NodeDetail | null, bench: NodeDetail | null}, primary: import('./protocol.js').Side, toolTip: Record<string, string> | null, buildLabel: string | null} | {message: string} | null} */
    this.last = null;
    new ResizeObserver(() => this.pinOffsets()).observe(this.compareEl);
    this.clear('Select a node to see its tensors.');
  }

  /** Shows the last content again (after a language change). */
  rerender() {
    const l = this.last;
    if (!l) return;
    if ('message' in l) this.clear(l.message);
    else this.show(l.pair, l.primary, l.toolTip, l.buildLabel);
  }

  /** @param {HTMLElement} tab */
  showTab(tab) {
    for (const t of Array.from(this.tabs.querySelectorAll('[role=tab]'))) {
      const on = t === tab;
      t.setAttribute('aria-selected', on ? 'true' : 'false');
      t.setAttribute('tabindex', on ? '0' : '-1');
      const panel = document.getElementById(/** @type {string} */ (t.getAttribute('aria-controls')));
      if (panel) panel.hidden = !on;
    }
  }

  /** @param {string} message */
  clear(message) {
    this.last = { message };
    this.table = [];
    this.titleEl.textContent = '';
    this.compareEl.replaceChildren(h('p', 'muted', t(message)));
    this.stackEl.replaceChildren();
    this.root.dataset.node = '';
  }

  /**
   * @param {{npu: NodeDetail | null, bench: NodeDetail | null}} pair
   * @param {import('./protocol.js').Side} primary the side the user selected on
   * @param {Record<string, string> | null} toolTip metric explanations
   * @param {string | null} [buildLabel] for a build graph (one side only): that side's name
   */
  show(pair, primary, toolTip, buildLabel = null) {
    this.last = { pair, primary, toolTip, buildLabel };
    const { npu, bench } = pair;
    const main = primary === 'npu' ? npu : bench;
    this.root.dataset.node = main?.name ?? '';
    this.titleEl.replaceChildren();
    /** @type {[string, NodeDetail | null][]} */
    const sides = buildLabel ? [[buildLabel, main]] : [['NPU', npu], ['Bench', bench]];
    for (const [label, d] of sides) {
      const t0 = h('span', 'dname');
      t0.append(h('b', '', `${t(label)}: `), document.createTextNode(d?.name ?? t('(no counterpart)')));
      this.titleEl.append(t0);
    }
    const pi = npu?.precisionIndex ?? main?.precisionIndex;
    if (pi !== null && pi !== undefined) this.titleEl.append(h('span', 'dmeta', t('precision index {p}', { p: pi })));
    if (main?.overflowLevel) this.titleEl.append(h('span', 'dmeta ov', t('overflow {level}', { level: main.overflowLevel })));
    this.renderTable(npu, bench, main, toolTip, !!buildLabel);
    this.renderStacks(sides);
  }

  /**
   * @param {NodeDetail | null} npu
   * @param {NodeDetail | null} bench
   * @param {NodeDetail | null} main
   * @param {Record<string, string> | null} toolTip
   * @param {boolean} single a build graph: one row per tensor, no Side column
   */
  renderTable(npu, bench, main, toolTip, single) {
    const nt = tensorsOf(npu);
    const bt = tensorsOf(bench);
    /** @type {{section: string, npu: string | null, bench: string | null}[]} */
    let rows = main?.rows ?? [];
    if (!rows.length) {
      // No pairing from the core (e.g. a build graph): list this node's tensors alone.
      const own = main === bench ? bt : nt;
      rows = [...own.keys()].map((k) => ({
        section: sectionOf(k),
        npu: main === bench ? null : k,
        bench: main === bench ? k : null,
      }));
    }
    if (!rows.length) {
      this.table = [];
      this.compareEl.replaceChildren(h('p', 'muted', t('This node has no tensor data.')));
      return;
    }
    // Columns: union of the fields of every shown tensor.
    /** @type {string[]} */
    const seen = [];
    const add = (/** @type {string} */ f) => {
      if (!HIDDEN.has(f) && !seen.includes(f)) seen.push(f);
    };
    for (const r of rows) {
      for (const [f] of (r.npu && nt.get(r.npu)) || []) add(f);
      for (const [f] of (r.bench && bt.get(r.bench)) || []) add(f);
    }
    const cols = [
      ...FIRST.filter((f) => seen.includes(f)),
      ...seen.filter((f) => !FIRST.includes(f) && !LAST.includes(f)),
      ...LAST.filter((f) => seen.includes(f)),
    ];
    const table = h('table', 'dtable');
    const thead = h('thead');
    const hr = h('tr');
    hr.append(h('th', '', t('Tensor')));
    if (!single) hr.append(h('th', '', t('Side')));
    this.table = [['Tensor', ...(single ? [] : ['Side']), ...cols]];
    for (const c of cols) {
      const th = h('th', '', c);
      th.setAttribute('scope', 'col');
      if (toolTip && toolTip[c]) th.title = msprobeText(toolTip[c]);
      hr.append(th);
    }
    thead.append(hr);
    table.append(thead);
    // One tbody per pair of tensors (msprobe pairs NPU and Bench tensors by position: the NPU row
    // and the Bench row compared with it stay together, framed as one group); cells whose NPU and
    // Bench values differ are marked; Result and Err_message stay pinned to the right edge.
    let section = '';
    let pairNo = 0;
    for (const r of rows) {
      if (r.section !== section) {
        section = r.section;
        pairNo = 0;
        const sb = h('tbody', 'dsection-body');
        const sr = h('tr', 'dsection');
        const td = /** @type {HTMLTableCellElement} */ (h('td', '', t(section)));
        td.colSpan = cols.length + (single ? 1 : 2);
        sr.append(td);
        sb.append(sr);
        table.append(sb);
      }
      pairNo++;
      const nf = new Map(r.npu ? nt.get(r.npu) ?? [] : []);
      const bf = new Map(r.bench ? bt.get(r.bench) ?? [] : []);
      const both = !single && !!r.npu && !!r.bench;
      const body = h('tbody', `dpair ${pairNo % 2 ? 'odd' : 'even'}`);
      body.dataset.section = r.section;
      body.dataset.pair = String(pairNo);
      if (both && shortKey(r.npu ?? '') !== shortKey(r.bench ?? '')) body.classList.add('renamed');
      for (const [sideName, key, fields] of /** @type {[string, string | null, Map<string, string>][]} */ ([
        ['NPU', r.npu, nf],
        ['Bench', r.bench, bf],
      ])) {
        // No row for a side that has no tensor here and no counterpart node at all.
        if (!key && (single || !(sideName === 'NPU' ? npu : bench))) continue;
        const tr = h('tr', sideName === 'NPU' ? 'drow-npu' : 'drow-bench');
        tr.dataset.section = r.section;
        tr.dataset.side = sideName.toLowerCase();
        const nameTd = h('td', 'dkey', key ? shortKey(key) : '—');
        if (key) nameTd.title = key;
        tr.append(nameTd);
        if (!single) tr.append(h('td', 'dside', t(sideName)));
        this.table.push([key ?? '', ...(single ? [] : [sideName]), ...cols.map((c) => fields.get(c) ?? '')]);
        for (const c of cols) {
          const v = fields.get(c);
          const td = h('td', '', v ?? '');
          td.dataset.field = c;
          if (v && v.length > 24) td.title = v;
          if (c === 'Result' && v) td.classList.add(`res-${v.toLowerCase().replace(/[^a-z]/g, '')}`);
          if (LAST.includes(c)) td.classList.add(`dpin-${c === 'Result' ? 'result' : 'msg'}`);
          if (both && COMPARED.has(c) && differs(nf.get(c), bf.get(c))) {
            td.classList.add('ddiff');
            td.title = `${t('NPU')}: ${nf.get(c) ?? '—'}\n${t('Bench')}: ${bf.get(c) ?? '—'}`;
          }
          tr.append(td);
        }
        body.append(tr);
      }
      if (body.childElementCount) table.append(body);
    }
    for (const th of Array.from(hr.children)) {
      const c = /** @type {HTMLElement} */ (th).textContent ?? '';
      if (LAST.includes(c) && th !== hr.firstElementChild) th.classList.add(`dpin-${c === 'Result' ? 'result' : 'msg'}`);
    }
    const wrap = h('div', 'dtable-wrap');
    wrap.append(table);
    this.compareEl.replaceChildren(wrap);
    this.pinOffsets();
  }

  /**
   * Result is pinned left of Err_message, which is pinned to the right edge: its offset is the
   * message column's width (measured once the table is laid out, again when the panel is resized).
   */
  pinOffsets() {
    const table = /** @type {HTMLElement | null} */ (this.compareEl.querySelector('.dtable'));
    if (!table) return;
    const msg = /** @type {HTMLElement | null} */ (table.querySelector('th.dpin-msg'));
    const w = msg ? msg.getBoundingClientRect().width : 0;
    table.style.setProperty('--dpin-msg-w', `${w}px`);
    table.classList.toggle('dpin', !!table.querySelector('th.dpin-result, th.dpin-msg'));
  }

  /** @param {[string, NodeDetail | null][]} sides */
  renderStacks(sides) {
    const grid = h('div', 'stacks');
    for (const [label, d] of sides) {
      const col = h('div', 'stack-col');
      const head = h('div', 'stack-head');
      const title = h('span', '', `${t(label)}: ${d ? d.name : t('(no counterpart)')}`);
      const btn = /** @type {HTMLButtonElement} */ (h('button', 'btn small', t('Copy')));
      btn.type = 'button';
      btn.dataset.copy = label.toLowerCase();
      const text = d ? (d.stack ?? []).join('\n') : '';
      btn.disabled = !text;
      btn.addEventListener('click', async () => {
        const ok = await copyText(text);
        btn.textContent = ok ? t('Copied') : t('Copy failed');
        btn.dataset.state = ok ? 'copied' : 'failed';
        setTimeout(() => {
          btn.textContent = t('Copy');
          delete btn.dataset.state;
        }, 1500);
      });
      head.append(title, btn);
      const pre = h('pre', 'stack-text');
      pre.dataset.side = label.toLowerCase();
      const frames = d?.stack ?? [];
      if (!frames.length) pre.textContent = t('(no stack)');
      else {
        // The user's frames first, then the library's (site-packages, torch, the standard library),
        // dimmed; each keeps its place in the stored stack (#k). Copy gives the stored order.
        const order = stackOrder(frames);
        const nUser = order.filter((k) => !isLibraryFrame(frames[k])).length;
        order.forEach((k, pos) => {
          const lib = isLibraryFrame(frames[k]);
          if (pos === nUser && nUser > 0) pre.append(h('span', 'frame-sep', `${t('library frames')}\n`));
          const f = h('span', lib ? 'frame lib' : 'frame user');
          f.dataset.index = String(k);
          f.append(h('span', 'frame-no', `#${k + 1} `), document.createTextNode(`${frames[k]}\n`));
          pre.append(f);
        });
        pre.dataset.userFrames = String(nUser);
      }
      col.append(head, pre);
      grid.append(col);
    }
    this.stackEl.replaceChildren(grid);
  }
}

/** @param {string} key */
function sectionOf(key) {
  if (/\.parameters_grad\b/.test(key)) return 'parameters_grad';
  if (/\.parameters\./.test(key)) return 'parameters';
  if (/\.output\b/.test(key)) return 'output';
  return 'input';
}

/** The tensor key without the node name: `Module.x.Linear.forward.0.input.0` → `input.0`. @param {string} key */
function shortKey(key) {
  const m = /\.(input|output|parameters_grad|parameters)(\.|$)/.exec(key);
  return m ? key.slice(m.index + 1) : key;
}

/**
 * Is a stack frame (`File <path>, line N, in f, ...`) library code: a package under site-packages or
 * dist-packages (torch, transformers, megatron installed as a package, ...), the Python standard
 * library, or torch itself wherever it lives?
 * @param {string} frame
 */
export function isLibraryFrame(frame) {
  const m = /^\s*File\s+"?([^",]+)"?,/.exec(frame);
  const file = (m ? m[1] : frame).replace(/\\/g, '/');
  return /\/(site|dist)-packages\//.test(file) || /\/lib\/python\d+(\.\d+)?\/(?!site-packages)/.test(file)
    || /(^|\/)torch(_npu)?\//.test(file) || file.startsWith('<');
}

/**
 * The display order of a stack: the user's frames, then the library's, each in stored order.
 * @param {string[]} frames
 * @returns {number[]} indexes into frames
 */
export function stackOrder(frames) {
  const idx = frames.map((_, k) => k);
  return [...idx.filter((k) => !isLibraryFrame(frames[k])), ...idx.filter((k) => isLibraryFrame(frames[k]))];
}
