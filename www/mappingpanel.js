// @ts-check
// The mapping panel (issue #8): a layer-mapping editor validated by the core as you type (syntax
// errors at their line) whose valid edits re-run the shown comparison, match suggestions for grey
// NPU nodes (accept one or all above a score, as undoable manual matches), and the export of the
// hand-made pairs as layer-mapping rules merged into the editor's yaml. All core work goes through
// the worker (protocol.js: checkMapping, suggest, exportMapping, match with op 'accept'); app.js
// provides the page state through PanelApi. Names and messages are rendered as text only.
import { t } from './i18n.js';

/** Line height of the editor in px (style.css .mp-editor). */
const MP_LINE_H = 16;
/** Top padding of the textarea in px (style.css). */
const MP_PAD = 4;
/** Validation waits this long after the last keystroke. */
const MP_DEBOUNCE_MS = 300;
/** Suggestions are listed from this score on (rows below the accept-all score are dimmed). */
const MP_LIST_FLOOR = 0.3;
/** Suggestion rows rendered per "Show more". */
const MP_PAGE = 200;

/** @typedef {import('./protocol.js').Suggestion} Suggestion */
/** @typedef {import('./protocol.js').MappingExport} MappingExport */
/** @typedef {{matchedNpu: number, matchedBench: number, unmatchedNpu: number, unmatchedBench: number}} MatchCounts */
/**
 * What a re-run from the editor did (app.js runMapping).
 * @typedef {{before: MatchCounts, after: MatchCounts, runMs: number, reapplied: number, already: number, missing: number}} MappingRun
 */
/**
 * What the page gives the panel (app.js).
 * @typedef {object} PanelApi
 * @property {import('./client.js').CoreClient} client
 * @property {{shown: () => void, changed: () => void}} hooks  set by the panel, called by app.js
 * @property {() => import('./protocol.js').RunResult | null} result  the shown result of dump folders, if any
 * @property {() => boolean} busy  a run or a match is in progress
 * @property {() => boolean} canMatch
 * @property {() => string} whyNot  why matching cannot work on the shown result (or what the last attempt said)
 * @property {() => boolean} fuzzy  fuzzy match (-fm) is on, which makes msprobe ignore the layer mapping
 * @property {() => [string, string][]} manualPairs  hand-made pairs (NPU name, Bench name)
 * @property {() => {key: string, name: string, text: string} | null} mappingChoice  the mapping card's choice
 * @property {(text: string, name: string) => Promise<MappingRun | null>} runMapping
 * @property {(ops: import('./protocol.js').MatchOp[], label: string) => Promise<object | null>} userOps  a manual-match step (undoable)
 * @property {() => MatchCounts} counts
 * @property {(npu: number, bench: number) => void} showPair  selects the NPU node, picks and reveals the Bench one
 * @property {(blob: Blob, name: string) => void} download
 * @property {() => Promise<string[]>} listTemplates
 * @property {(name: string) => Promise<string>} getTemplate
 */

/** @param {string} id */
function mpEl(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error(`missing #${id}`);
  return e;
}

/** A translatable message: key, parameters, error flag. @typedef {{key: string, params?: Record<string, string | number>, err?: boolean}} MpMsg */
/** Where a message goes: editor status, suggestion actions, suggestion count, export. @typedef {'status' | 'sug' | 'count' | 'exp'} MpWhere */

export class MappingPanel {
  /** @param {PanelApi} api */
  constructor(api) {
    this.api = api;
    this.root = mpEl('mapping-panel');
    this.ta = /** @type {HTMLTextAreaElement} */ (mpEl('mp-text'));
    this.gutter = mpEl('mp-gutter');
    this.band = mpEl('mp-band');
    this.editor = mpEl('mp-editor');
    this.tpl = /** @type {HTMLSelectElement} */ (mpEl('mp-template'));
    this.score = /** @type {HTMLInputElement} */ (mpEl('mp-score'));
    this.list = mpEl('mp-sug');
    this.more = /** @type {HTMLButtonElement} */ (mpEl('mp-more'));
    /** file name of the mapping in the core's messages and the download */
    this.name = 'layer_mapping.yaml';
    /** the mapping choice the editor was last seeded from: key and text */
    this.seeded = { key: /** @type {string | null} */ (null), text: '' };
    /** the text the shown result was run with (a valid edit that differs re-runs) */
    this.ran = '';
    this.checkSeq = 0;
    this.timer = 0;
    /** @type {{line: number, column: number | null} | null} */
    this.error = null;
    /** @type {string | null} text waiting for a re-run */
    this.wanted = null;
    /** @type {Promise<void> | null} */
    this.runLoop = null;
    /** @type {Suggestion[]} */
    this.suggestions = [];
    this.shownRows = MP_PAGE;
    this.sugStale = true;
    this.sugTimer = 0;
    this.sugSeq = 0;
    /** @type {Record<MpWhere, MpMsg | null>} */
    this.msgs = { status: null, sug: null, count: null, exp: null };
    /** @type {MappingRun | null} */
    this.lastRun = null;
    /** @type {{report: MappingExport, pairs: number} | null} */
    this.lastExport = null;
    this.lines = 0;
    /** @type {number | undefined} the core's default score for accept all (known after the first suggest) */
    this.defaultMinScore = undefined;
    /** @type {string[]} */
    this.templates = [];
    api.hooks.shown = () => this.onShown();
    api.hooks.changed = () => this.staleSuggestions();

    this.ta.addEventListener('input', () => {
      this.renderGutter();
      this.schedule();
    });
    this.ta.addEventListener('scroll', () => this.syncScroll());
    this.ta.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.validate();
      } else if (e.key === 'Escape') {
        this.ta.blur();
      }
    });
    mpEl('mp-close').addEventListener('click', () => this.toggle(false));
    mpEl('mp-download').addEventListener('click', () => this.downloadYaml());
    mpEl('mp-accept-all').addEventListener('click', () => this.acceptAll());
    mpEl('mp-refresh').addEventListener('click', () => this.refreshSuggestions());
    mpEl('mp-export').addEventListener('click', () => this.exportMapping());
    this.more.addEventListener('click', () => {
      this.shownRows += MP_PAGE;
      this.renderSuggestions();
    });
    this.score.addEventListener('change', () => this.renderSuggestions());
    this.tpl.addEventListener('change', () => this.useTemplate());
    this.list.addEventListener('click', (e) => this.onListClick(e));
    api.listTemplates().then((names) => this.renderTemplates(names), () => this.renderTemplates([]));
    this.renderGutter();
  }

  // ------------------------------------------------------------ panel
  /** Shows or hides the panel. @param {boolean} [show] */
  toggle(show) {
    const open = show ?? this.root.hidden;
    this.root.hidden = !open;
    const btn = mpEl('mapping-toggle');
    btn.setAttribute('aria-expanded', open ? 'true' : 'false');
    btn.classList.toggle('on', open);
    if (open) {
      if (this.sugStale) this.refreshSuggestions();
      this.ta.focus();
    } else {
      btn.focus();
    }
  }

  /** A new result is shown (or the display was cleared). */
  onShown() {
    // Seed the editor from the mapping card's choice when that choice changed (a file, a template, the
    // demo, none, or back to the editor's own text). A re-run from the editor sets `seeded` first, so
    // text typed meanwhile (even invalid) is kept.
    const choice = this.api.mappingChoice();
    const key = choice?.key ?? '';
    const text = choice?.text ?? '';
    if (key !== this.seeded.key || text !== this.seeded.text) {
      this.seeded = { key, text };
      if (choice && key !== 'editor') this.name = choice.name || 'layer_mapping.yaml';
      this.setText(text, false);
    }
    this.lastRun = null;
    this.renderDiff();
    this.setMsg('sug', null);
    this.suggestions = [];
    this.renderSuggestions();
    this.staleSuggestions();
  }

  // ------------------------------------------------------------ editor
  /**
   * Replaces the editor's text.
   * @param {string} text @param {boolean} run re-run when valid and different from the shown result's mapping
   */
  setText(text, run) {
    this.ta.value = text;
    if (!run) this.ran = text;
    this.renderGutter();
    this.validate();
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.validate(), MP_DEBOUNCE_MS);
  }

  renderGutter() {
    const n = this.ta.value.split('\n').length;
    if (n !== this.lines) {
      const frag = document.createDocumentFragment();
      for (let k = this.lines; k < n; k++) {
        const d = document.createElement('div');
        d.className = 'ln';
        d.dataset.line = String(k + 1);
        d.textContent = String(k + 1);
        frag.append(d);
      }
      while (this.gutter.childElementCount > n) this.gutter.lastElementChild?.remove();
      this.gutter.append(frag);
      this.lines = n;
    }
    for (const el of Array.from(this.gutter.querySelectorAll('.ln.err'))) el.classList.remove('err');
    if (this.error) {
      const ln = this.gutter.children[this.error.line - 1];
      if (ln) {
        ln.classList.add('err');
        ln.setAttribute('title', this.msgText(this.msgs.status));
      }
    }
    this.syncScroll();
  }

  syncScroll() {
    this.gutter.scrollTop = this.ta.scrollTop;
    if (this.error) {
      this.band.hidden = false;
      this.band.style.top = `${MP_PAD + (this.error.line - 1) * MP_LINE_H - this.ta.scrollTop}px`;
    } else {
      this.band.hidden = true;
    }
  }

  /** Checks the text with the core; a valid text that differs from the shown result's re-runs. */
  async validate() {
    clearTimeout(this.timer);
    const text = this.ta.value;
    const seq = ++this.checkSeq;
    // Only blank lines and comments: the bare -lm (the core reads it as an empty mapping).
    const blank = text.split('\n').every((l) => !l.trim() || l.trim().startsWith('#'));
    /** @type {import('./protocol.js').MappingCheck} */
    let res;
    try {
      res = blank
        ? { ok: true, keys: 0, rules: 0, scoped: false, invalid: null }
        : await this.api.client.request({ type: 'checkMapping', name: this.name, text });
    } catch (e) {
      if (seq === this.checkSeq) this.setMsg('status', { key: '{msg}', params: { msg: e instanceof Error ? e.message : String(e) }, err: true });
      return;
    }
    if (seq !== this.checkSeq) return;
    if (!res.ok) {
      this.error = res.line ? { line: res.line, column: res.column } : null;
      this.editor.classList.add('invalid');
      this.ta.setAttribute('aria-invalid', 'true');
      this.editor.dataset.errorLine = res.line ? String(res.line) : '';
      this.setMsg('status', res.line
        ? { key: 'Syntax error at line {line}, column {column}: {detail}', params: { line: res.line, column: res.column ?? '?', detail: res.detail }, err: true }
        : { key: 'Syntax error: {detail}', params: { detail: res.detail }, err: true });
      this.renderGutter();
      return;
    }
    this.error = null;
    this.editor.classList.remove('invalid');
    this.ta.setAttribute('aria-invalid', 'false');
    this.editor.dataset.errorLine = '';
    /** @type {MpMsg} */
    const msg = blank
      ? { key: 'Empty mapping (bare -lm: the algorithm without rules).' }
      : res.invalid
        ? { key: 'Valid YAML, but msprobe cannot use it ({why}): the mapping is empty.', params: { why: res.invalid }, err: true }
        : { key: res.scoped ? 'Valid: {keys} keys, {rules} rules (with scoped keys).' : 'Valid: {keys} keys, {rules} rules.', params: { keys: res.keys, rules: res.rules } };
    this.setMsg('status', msg);
    this.renderGutter();
    if (text !== this.ran) this.queueRun(text);
  }

  /** Re-runs with the newest valid text, one run at a time. @param {string} text */
  queueRun(text) {
    this.wanted = text;
    if (this.runLoop) return;
    this.runLoop = (async () => {
      try {
        while (this.wanted !== null) {
          const w = this.wanted;
          this.wanted = null;
          while (this.api.busy()) await new Promise((r) => setTimeout(r, 50));
          if (!this.api.result()) {
            this.setMsg('status', { key: 'Load two dump folders to apply the mapping.' });
            break;
          }
          this.root.dataset.running = 'true';
          this.seeded = { key: 'editor', text: w };
          const run = await this.api.runMapping(w, this.name);
          this.ran = w;
          if (run) {
            this.lastRun = run;
            this.renderDiff();
          }
        }
      } finally {
        this.runLoop = null;
        this.root.dataset.running = 'false';
        this.root.dataset.runs = String(Number(this.root.dataset.runs ?? 0) + 1);
      }
    })();
  }

  renderDiff() {
    const box = mpEl('mp-diff');
    box.replaceChildren();
    const r = this.lastRun;
    for (const k of ['matchedNpu', 'matchedBench', 'unmatchedNpu', 'unmatchedBench', 'runMs', 'reapplied']) delete box.dataset[k];
    if (!r) return;
    const table = document.createElement('table');
    /** @type {[keyof MatchCounts, string][]} */
    const rows = [
      ['matchedNpu', 'matched NPU nodes'],
      ['matchedBench', 'matched Bench nodes'],
      ['unmatchedNpu', 'unmatched NPU nodes'],
      ['unmatchedBench', 'unmatched Bench nodes'],
    ];
    for (const [k, label] of rows) {
      const a = r.before[k];
      const b = r.after[k];
      const d = b - a;
      const tr = document.createElement('tr');
      tr.dataset.key = k;
      const td1 = document.createElement('td');
      td1.textContent = t(label);
      const td2 = document.createElement('td');
      td2.textContent = `${a} → ${b}`;
      const td3 = document.createElement('td');
      td3.textContent = `(${d > 0 ? '+' : d < 0 ? '−' : '±'}${Math.abs(d)})`;
      const good = k.startsWith('matched') ? d > 0 : d < 0;
      if (d) td3.className = good ? 'up' : 'down';
      tr.append(td1, td2, td3);
      table.append(tr);
      box.dataset[k] = `${a},${b}`;
    }
    const note = document.createElement('p');
    note.className = 'tool-msg';
    note.textContent = t('Re-run in {ms} ms; {k} manual pair(s) re-applied, {a} now matched by the mapping itself, {m} not found.', {
      ms: Math.round(r.runMs), k: r.reapplied, a: r.already, m: r.missing,
    });
    box.dataset.runMs = String(Math.round(r.runMs));
    box.dataset.reapplied = String(r.reapplied);
    box.append(table, note);
    if (this.api.fuzzy()) {
      const warn = document.createElement('p');
      warn.className = 'tool-msg err';
      warn.textContent = t('Fuzzy match (-fm) is on: like msprobe, it ignores the layer mapping.');
      box.append(warn);
    }
  }

  /** @param {string[]} names */
  renderTemplates(names) {
    this.templates = names;
    this.tpl.replaceChildren();
    const none = document.createElement('option');
    none.value = '';
    none.textContent = t('— load a template —');
    this.tpl.append(none);
    for (const n of names) {
      const o = document.createElement('option');
      o.value = n;
      o.textContent = n;
      this.tpl.append(o);
    }
  }

  async useTemplate() {
    const name = this.tpl.value;
    if (!name) return;
    try {
      const text = await this.api.getTemplate(name);
      this.name = name;
      this.setText(text, true);
    } catch (e) {
      this.setMsg('status', { key: 'Could not read the template: {msg}', params: { msg: e instanceof Error ? e.message : String(e) }, err: true });
    }
    this.tpl.value = '';
  }

  downloadYaml() {
    this.api.download(new Blob([this.ta.value], { type: 'application/yaml' }), 'layer_mapping.yaml');
  }

  // ------------------------------------------------------------ suggestions
  staleSuggestions() {
    this.sugStale = true;
    if (this.root.hidden) return;
    clearTimeout(this.sugTimer);
    this.sugTimer = window.setTimeout(() => this.refreshSuggestions(), 120);
  }

  async refreshSuggestions() {
    clearTimeout(this.sugTimer);
    const r = this.api.result();
    const seq = ++this.sugSeq;
    if (!r || !r.bench || r.graphType !== 'compare') {
      this.suggestions = [];
      this.sugStale = false;
      this.setMsg('count', { key: 'Suggestions need a compare result of two dump folders.' });
      this.renderSuggestions();
      return;
    }
    try {
      /** @type {import('./protocol.js').Suggestions} */
      const res = await this.api.client.request({ type: 'suggest', minScore: MP_LIST_FLOOR });
      if (seq !== this.sugSeq || this.api.result() !== r) return;
      if (this.defaultMinScore === undefined) {
        this.defaultMinScore = res.defaultMinScore;
        this.score.value = String(res.defaultMinScore);
        this.score.defaultValue = String(res.defaultMinScore);
      }
      this.suggestions = res.list;
      this.sugStale = false;
      this.shownRows = MP_PAGE;
      const nodes = new Set(res.list.map((s) => s.npu)).size;
      this.setMsg('count', { key: '{n} suggestion(s) for {k} grey NPU node(s).', params: { n: res.list.length, k: nodes } });
      this.renderSuggestions();
    } catch (e) {
      if (seq !== this.sugSeq) return;
      this.setMsg('count', { key: '{msg}', params: { msg: e instanceof Error ? e.message : String(e) }, err: true });
    }
  }

  minScore() {
    const v = Number(this.score.value);
    return Number.isFinite(v) ? Math.min(1, Math.max(0, v)) : (this.defaultMinScore ?? 0.65);
  }

  renderSuggestions() {
    const r = this.api.result();
    this.list.replaceChildren();
    this.list.dataset.count = String(this.suggestions.length);
    const min = this.minScore();
    this.list.dataset.above = String(this.suggestions.filter((s) => s.score >= min).length);
    // A disabled button says why where it is.
    for (const id of ['mp-accept-all', 'mp-export']) {
      /** @type {HTMLButtonElement} */ (mpEl(id)).disabled = !this.api.canMatch();
      mpEl(id).title = this.api.canMatch() ? '' : this.api.whyNot();
    }
    if (!r || !r.bench) {
      this.more.hidden = true;
      return;
    }
    const g = r.npu;
    const b = r.bench;
    const frag = document.createDocumentFragment();
    const n = Math.min(this.suggestions.length, this.shownRows);
    for (let k = 0; k < n; k++) {
      const s = this.suggestions[k];
      const alt = k > 0 && this.suggestions[k - 1].npu === s.npu;
      const li = document.createElement('li');
      li.dataset.k = String(k);
      li.dataset.npu = String(s.npu);
      li.dataset.bench = String(s.bench);
      li.dataset.score = String(s.score);
      if (alt) li.className = 'alt';
      if (s.score < min) li.classList.add('low');
      const sc = document.createElement('span');
      sc.className = 'mp-score';
      sc.textContent = s.score.toFixed(2);
      const show = document.createElement('button');
      show.type = 'button';
      show.className = 'mp-show';
      show.dataset.act = 'show';
      const names = document.createElement('span');
      names.className = 'mp-names';
      names.textContent = alt ? `↳ ${b.names[s.bench] ?? ''}` : `${g.names[s.npu] ?? ''} → ${b.names[s.bench] ?? ''}`;
      const reason = document.createElement('span');
      reason.className = 'mp-reason';
      reason.textContent = s.reason;
      show.append(names, reason);
      show.title = t('Show both nodes');
      const acc = document.createElement('button');
      acc.type = 'button';
      acc.className = 'btn small';
      acc.dataset.act = 'accept';
      acc.textContent = t('Accept');
      acc.disabled = !this.api.canMatch();
      li.append(sc, show, acc);
      frag.append(li);
    }
    this.list.append(frag);
    this.more.hidden = this.suggestions.length <= n;
  }

  /** @param {MouseEvent} e */
  async onListClick(e) {
    const btn = /** @type {HTMLElement | null} */ (/** @type {HTMLElement} */ (e.target).closest('button[data-act]'));
    const li = /** @type {HTMLElement | null} */ (btn?.closest('li[data-k]') ?? null);
    if (!btn || !li) return;
    const s = this.suggestions[Number(li.dataset.k)];
    if (!s) return;
    if (btn.dataset.act === 'show') {
      this.api.showPair(s.npu, s.bench);
      return;
    }
    const r = this.api.result();
    const entry = await this.api.userOps([{ op: 'match', npu: s.npu, bench: s.bench, recursive: false }], 'accept suggestion');
    if (entry && r?.bench) {
      this.setMsg('sug', { key: 'Accepted {npu} → {bench}.', params: { npu: r.npu.names[s.npu], bench: r.bench.names[s.bench] } });
      this.api.showPair(s.npu, s.bench);
    } else if (!entry) {
      this.setMsg('sug', { key: 'Could not accept the suggestion: {why}', params: { why: this.api.whyNot() }, err: true });
    }
  }

  async acceptAll() {
    const min = this.minScore();
    const before = this.api.counts();
    const entry = await this.api.userOps([{ op: 'accept', minScore: min }], 'accept suggestions');
    if (!entry) {
      this.setMsg('sug', { key: 'Could not accept the suggestions: {why}', params: { why: this.api.whyNot() }, err: true });
      return;
    }
    const after = this.api.counts();
    this.setMsg('sug', {
      key: 'Accepted every suggestion with score ≥ {s}: matched NPU nodes {a} → {b}.',
      params: { s: min, a: before.matchedNpu, b: after.matchedNpu },
    });
  }

  // ------------------------------------------------------------ export
  async exportMapping() {
    const pairs = this.api.manualPairs();
    if (!this.api.result()) {
      this.setMsg('exp', { key: 'Exporting a mapping needs a compare result of two dump folders.', err: true });
      return;
    }
    if (!pairs.length) {
      this.setMsg('exp', { key: 'No manual matches or accepted suggestions to export.', err: true });
      return;
    }
    try {
      this.setMsg('exp', { key: 'Exporting {n} pair(s)…', params: { n: pairs.length } });
      /** @type {MappingExport} */
      const report = await this.api.client.request({ type: 'exportMapping', yaml: this.ta.value, pairs });
      this.lastExport = { report, pairs: pairs.length };
      this.renderReport();
      this.setMsg('exp', { key: 'Merged into the editor; Download saves it as layer_mapping.yaml.' });
      this.setText(report.yaml, true);
    } catch (e) {
      this.setMsg('exp', { key: '{msg}', params: { msg: e instanceof Error ? e.message : String(e) }, err: true });
    }
  }

  renderReport() {
    const box = mpEl('mp-report');
    box.replaceChildren();
    const x = this.lastExport;
    if (!x) return;
    const { report, pairs } = x;
    box.dataset.added = String(report.added.length);
    box.dataset.reproduced = String(report.reproduced.length);
    box.dataset.missed = String(report.missed.length);
    box.dataset.pairs = String(pairs);
    const h = (/** @type {string} */ text) => {
      const e = document.createElement('h3');
      e.textContent = text;
      return e;
    };
    const ul = (/** @type {string[]} */ items, /** @type {string} */ cls) => {
      const u = document.createElement('ul');
      u.className = cls;
      for (const it of items) {
        const li = document.createElement('li');
        li.textContent = it;
        u.append(li);
      }
      return u;
    };
    box.append(
      h(t('{n} rule(s) added', { n: report.added.length })),
      ul(report.added.map((r) => `${r.key}: ${r.src}: ${r.dst}`), 'mp-added'),
      h(t('{r} of {n} pair(s) reproduced by the merged mapping', { r: report.reproduced.length, n: pairs })),
    );
    if (report.missed.length) {
      box.append(
        h(t('{m} not reproduced:', { m: report.missed.length })),
        ul(report.missed.map(([n, b, why]) => `${n} ⇄ ${b}: ${why}`), 'mp-missed'),
      );
    }
  }

  // ------------------------------------------------------------ messages & language
  /** @param {MpMsg | null} m */
  msgText(m) {
    return m ? t(m.key, m.params) : '';
  }

  /** @param {MpWhere} where @param {MpMsg | null} m */
  setMsg(where, m) {
    this.msgs[where] = m;
    const el = mpEl({ status: 'mp-status', sug: 'mp-sug-msg', count: 'mp-sug-count', exp: 'mp-exp-msg' }[where]);
    el.textContent = this.msgText(m);
    el.classList.toggle('err', !!m?.err);
  }

  /** Re-renders the dynamic texts after a language switch. */
  relabel() {
    for (const w of /** @type {const} */ (['status', 'sug', 'count', 'exp'])) this.setMsg(w, this.msgs[w]);
    const first = this.tpl.querySelector('option[value=""]');
    if (first) first.textContent = t('— load a template —');
    this.renderDiff();
    this.renderReport();
    this.renderSuggestions();
    this.renderGutter();
  }
}
