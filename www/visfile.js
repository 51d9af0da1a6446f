// @ts-check
// Worker side: msprobe's own outputs, read-only, converted to the shapes the core returns
// (RunResult with GraphDto columns in pre-order, NodeDetail): the `.vis.db` (SQLite, msprobe ≥ 8.2 and
// probelens) through sql.js, and the legacy `.vis` JSON of msprobe ≤ 8.1. Either may be gzipped.

/** @typedef {import('./protocol.js').GraphDto} GraphDto */
/** @typedef {import('./protocol.js').NodeDetail} NodeDetail */

/**
 * One node of a file, before ordering.
 * @typedef {object} VisNode
 * @property {string} name
 * @property {number} type
 * @property {string[]} children
 * @property {number | null} precision
 * @property {string | null} overflow
 * @property {number} micro
 * @property {string[]} link  matched_node_link
 * @property {number} order  node_order (db) or insertion order (json), to order children not in sub_nodes
 * @property {string} up
 */

/** @param {Uint8Array} u8 */
export async function gunzipIfNeeded(u8) {
  if (u8.length < 2 || u8[0] !== 0x1f || u8[1] !== 0x8b) return u8;
  const stream = new Blob([/** @type {Uint8Array<ArrayBuffer>} */ (u8)]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** @param {Uint8Array} u8 @returns {'sqlite' | 'json' | 'unknown'} */
export function sniffVis(u8) {
  const magic = 'SQLite format 3\u0000';
  let sqlite = u8.length >= 16;
  for (let k = 0; sqlite && k < 16; k++) if (u8[k] !== magic.charCodeAt(k)) sqlite = false;
  if (sqlite) return 'sqlite';
  for (let k = 0; k < Math.min(u8.length, 64); k++) {
    const c = u8[k];
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0xef || c === 0xbb || c === 0xbf) continue;
    return c === 0x7b ? 'json' : 'unknown';
  }
  return 'unknown';
}

/** A precision index as text, like the core's `precisionIndex` (integers without a fraction, as the db stores them). @param {number | null} p */
function precisionText(p) {
  if (p === null || p === undefined || !Number.isFinite(p)) return null;
  return String(p);
}

/** @param {unknown} v */
function str(v) {
  if (v === null || v === undefined) return 'null';
  return typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
}

/** @param {unknown} text @param {any} fallback */
function parseJson(text, fallback) {
  if (typeof text !== 'string') return text ?? fallback;
  if (!text) return fallback;
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}

/** @param {unknown} io @returns {[string, [string, string][]][]} */
function entriesOf(io) {
  const obj = parseJson(io, {});
  if (!obj || typeof obj !== 'object') return [];
  return Object.entries(obj).map(([k, f]) => [
    k,
    f && typeof f === 'object' ? Object.entries(f).map(([a, b]) => /** @type {[string, string]} */ ([a, str(b)])) : [['value', str(f)]],
  ]);
}

const VIS_SECTIONS = ['input', 'parameters', 'output', 'parameters_grad'];

/** @param {string} key */
function visSection(key) {
  if (/\.parameters_grad(\.|$)/.test(key)) return 'parameters_grad';
  if (/\.parameters\./.test(key)) return 'parameters';
  if (/\.output(\.|$)/.test(key)) return 'output';
  return 'input';
}

/**
 * Pairs the tensors of a node and its counterpart section by section, in order (as the core does).
 * @param {NodeDetail} npu @param {NodeDetail} bench
 */
function pairRows(npu, bench) {
  /** @param {NodeDetail} d */
  const keys = (d) => {
    /** @type {Record<string, string[]>} */
    const by = {};
    for (const s of VIS_SECTIONS) by[s] = [];
    for (const [k] of [...d.inputData, ...d.outputData]) by[visSection(k)].push(k);
    return by;
  };
  const a = keys(npu);
  const b = keys(bench);
  /** @type {{section: string, npu: string | null, bench: string | null}[]} */
  const rows = [];
  for (const s of VIS_SECTIONS) {
    for (let i = 0; i < Math.max(a[s].length, b[s].length); i++) rows.push({ section: s, npu: a[s][i] ?? null, bench: b[s][i] ?? null });
  }
  return rows;
}

/**
 * Orders the nodes of one graph in pre-order from the root and builds the GraphDto columns
 * (`matched` is filled later, once both sides are known).
 * @param {Map<string, VisNode>} nodes
 * @param {string} root
 * @returns {{dto: GraphDto, index: Map<string, number>, unreachable: number}}
 */
function orderGraph(nodes, root) {
  /** @type {Map<string, string[]>} children by up_node, for nodes their parent's sub_nodes does not list */
  const byUp = new Map();
  for (const n of nodes.values()) {
    if (!n.up) continue;
    const l = byUp.get(n.up) ?? [];
    l.push(n.name);
    byUp.set(n.up, l);
  }
  /** @type {GraphDto} */
  const dto = { names: [], parent: [], nodeType: [], precision: [], overflow: [], matched: [], microStep: [], subtreeEnd: [] };
  const index = new Map();
  if (!nodes.has(root)) return { dto, index, unreachable: nodes.size };
  /** @type {[string, number][]} [name, parent index] */
  const stack = [[root, -1]];
  /** @type {number[]} */
  const open = [];
  while (stack.length) {
    const [name, parent] = /** @type {[string, number]} */ (stack.pop());
    if (index.has(name)) continue; // a malformed file must not loop
    const n = /** @type {VisNode} */ (nodes.get(name));
    const i = dto.names.length;
    index.set(name, i);
    dto.names.push(name);
    dto.parent.push(parent);
    dto.nodeType.push(n.type);
    dto.precision.push(n.precision);
    dto.overflow.push(n.overflow);
    dto.matched.push(-1);
    dto.microStep.push(n.micro);
    dto.subtreeEnd.push(0);
    open.push(i);
    const listed = n.children.filter((c) => nodes.has(c) && nodes.get(c)?.up === name);
    const seen = new Set(listed);
    const extra = (byUp.get(name) ?? []).filter((c) => !seen.has(c));
    extra.sort((x, y) => (nodes.get(x)?.order ?? 0) - (nodes.get(y)?.order ?? 0));
    const kids = [...listed, ...extra];
    for (let k = kids.length - 1; k >= 0; k--) stack.push([kids[k], i]);
  }
  // Subtree ends: backwards, a node's subtree ends where its last descendant's does.
  const end = dto.subtreeEnd;
  for (let i = dto.names.length - 1; i >= 0; i--) {
    end[i] = Math.max(end[i], i + 1);
    const p = dto.parent[i];
    if (p >= 0) end[p] = Math.max(end[p], end[i]);
  }
  return { dto, index, unreachable: nodes.size - dto.names.length };
}

/**
 * Links the two sides by the last entry of each node's matched_node_link.
 * @param {GraphDto} g @param {Map<string, VisNode>} nodes @param {Map<string, number>} otherIndex
 */
function linkSide(g, nodes, otherIndex) {
  for (let i = 0; i < g.names.length; i++) {
    const link = /** @type {VisNode} */ (nodes.get(g.names[i])).link;
    const m = link.length ? otherIndex.get(link[link.length - 1]) : undefined;
    g.matched[i] = m ?? -1;
  }
}

/**
 * @typedef {object} VisMeta
 * @property {'db' | 'json'} kind
 * @property {string} name
 * @property {'compare' | 'build'} graphType
 * @property {number[]} steps
 * @property {number[]} ranks
 * @property {string | null} whyNotMatch  why manual matching cannot work on the file (null: it can)
 */

/**
 * What a file keeps of the graphs it shows: names, counterparts, parents and subtree ends per side.
 * @typedef {{npu: string[], bench: string[] | null, npuMatched: number[], benchMatched: number[] | null,
 *   npuParent: number[], benchParent: number[] | null, npuEnd: number[], benchEnd: number[] | null}} Shown
 */

/** The compare fields msprobe writes into the NPU side's tensors (removed when a pair is re-compared or unmatched). */
const VIS_COMPARE_KEYS = ['Max diff', 'Min diff', 'Mean diff', 'L2norm diff', 'MaxRelativeErr', 'MinRelativeErr', 'MeanRelativeErr',
  'NormRelativeErr', 'Requires_grad Consistent', 'Result', 'Err_message', 'Cosine', 'EucDist', 'MaxAbsErr', 'One Thousandth Err Ratio',
  'Five Thousandths Err Ratio'];

/** A float as Python's `str` writes it (`0.0`, `4.2e-05`, `inf`, `nan`). @param {number} x */
export function pyFloat(x) {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-4 || a >= 1e16)) {
    const [m, e] = x.toExponential().split('e');
    const n = Number(e);
    return `${m}e${n < 0 ? '-' : '+'}${String(Math.abs(n)).padStart(2, '0')}`;
  }
  const t = String(x);
  return /[.e]/.test(t) ? t : `${t}.0`;
}

/** A statistic as msprobe stores it (a Python float's text, or a number) → number, or null. @param {unknown} v */
function statNum(v) {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return null;
  const t = v.trim().toLowerCase();
  if (t === 'inf' || t === '+inf') return Infinity;
  if (t === '-inf') return -Infinity;
  if (t === 'nan') return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/.test(t)) return null;
  return Number(t);
}

/**
 * Re-compares a manually matched pair from the statistics a `.vis.db` stores, as tb-graph-ascend does
 * (`match_nodes_model.py`): the tensors paired section by section in order; for statistics, per
 * Max/Min/Mean/Norm the difference NPU − Bench and the relative error |diff / Bench| (Bench 0: |diff|),
 * written with msprobe's column names; the precision index is min(1, the largest relative error of the
 * outputs). For md5, a tensor passes when the md5 values are equal and the index is 0 when all do, else 1
 * (msprobe 26's legend: 0 pass, 1 error).
 * @param {Record<string, any>} npuIn @param {Record<string, any>} npuOut @param {Record<string, any>} benchIn @param {Record<string, any>} benchOut
 * @param {string} task
 * @returns {{input: Record<string, any>, output: Record<string, any>, precision: number | null}}
 */
export function recompareStats(npuIn, npuOut, benchIn, benchOut, task) {
  const strip = (/** @type {any} */ t) => {
    if (!t || typeof t !== 'object') return t;
    const c = { ...t };
    for (const k of VIS_COMPARE_KEYS) delete c[k];
    return c;
  };
  const input = Object.fromEntries(Object.entries(npuIn).map(([k, v]) => [k, strip(v)]));
  const output = Object.fromEntries(Object.entries(npuOut).map(([k, v]) => [k, strip(v)]));
  /** @param {Record<string, any>} a @param {Record<string, any>} b */
  const bySection = (a, b) => {
    /** @type {Record<string, string[]>} */
    const by = {};
    for (const s of VIS_SECTIONS) by[s] = [];
    for (const k of [...Object.keys(a), ...Object.keys(b)]) by[visSection(k)].push(k);
    return by;
  };
  const na = bySection(npuIn, npuOut);
  const nb = bySection(benchIn, benchOut);
  const benchAll = { ...benchIn, ...benchOut };
  let worst = -1;
  let md5Differ = false;
  let compared = 0;
  for (const sec of VIS_SECTIONS) {
    for (let i = 0; i < Math.min(na[sec].length, nb[sec].length); i++) {
      const key = na[sec][i];
      const target = key in input ? input : output;
      const t = target[key];
      const b = benchAll[nb[sec][i]];
      if (!t || typeof t !== 'object' || !b || typeof b !== 'object') continue;
      compared++;
      if (task === 'md5') {
        const same = t.md5 !== undefined && t.md5 === b.md5;
        if (!same) md5Differ = true;
        t.Result = same ? 'pass' : 'error';
        continue;
      }
      for (const [stat, diffKey, relKey] of [['Max', 'Max diff', 'MaxRelativeErr'], ['Min', 'Min diff', 'MinRelativeErr'], ['Mean', 'Mean diff', 'MeanRelativeErr'], ['Norm', 'L2norm diff', 'NormRelativeErr']]) {
        const x = statNum(t[stat]);
        const y = statNum(b[stat]);
        if (x === null || y === null) {
          t[diffKey] = 'N/A';
          t[relKey] = 'N/A';
          continue;
        }
        const d = x - y;
        const rel = Math.abs(y === 0 ? d : d / y);
        t[diffKey] = pyFloat(d);
        t[relKey] = `${pyFloat(rel * 100)}%`;
        if (sec === 'output' && Number.isFinite(rel)) worst = Math.max(worst, rel);
        else if (sec === 'output') worst = 1;
      }
    }
  }
  const precision = task === 'md5' ? (compared ? (md5Differ ? 1 : 0) : null) : worst < 0 ? null : Math.min(1, worst);
  return { input, output, precision };
}

/** A `.vis.db` opened in sql.js (in memory: manual matches change the copy, which can be saved). */
export class VisDb {
  /**
   * @param {any} SQL the sql.js module
   * @param {Uint8Array} bytes
   * @param {string} name
   */
  constructor(SQL, bytes, name) {
    this.name = name;
    this.db = new SQL.Database(bytes);
    const cfg = this.rows("SELECT graph_type, task, tool_tip, micro_steps, node_colors, rank_list, step_list FROM tb_config WHERE id = '1'");
    const c = cfg[0] ?? this.rows('SELECT graph_type, task, tool_tip, micro_steps, node_colors, rank_list, step_list FROM tb_config LIMIT 1')[0];
    if (!c) throw new Error(`${name}: no tb_config row (not a msprobe .vis.db?)`);
    this.config = {
      graphType: /** @type {'compare' | 'build'} */ (c[0] === 'compare' ? 'compare' : 'build'),
      task: String(c[1] ?? ''),
      toolTip: parseJson(c[2], null),
      microSteps: Number(c[3] ?? 1) || 1,
      nodeColors: parseJson(c[4], null) ?? {},
      ranks: /** @type {number[]} */ (parseJson(c[5], [0])),
      steps: /** @type {number[]} */ (parseJson(c[6], [0])),
    };
    this.step = 0;
    this.rank = 0;
    /** @type {Shown | null} */
    this.shown = null;
  }

  /** @returns {VisMeta} */
  meta() {
    return { kind: 'db', name: this.name, graphType: this.config.graphType, steps: this.config.steps, ranks: this.config.ranks, whyNotMatch: this.whyNotMatch() };
  }

  /** @param {string} sql @param {any[]} [params] @returns {any[][]} */
  rows(sql, params) {
    const st = this.db.prepare(sql);
    try {
      if (params) st.bind(params);
      const out = [];
      while (st.step()) out.push(st.get());
      return out;
    } finally {
      st.free();
    }
  }

  /** @param {string} source 'NPU' | 'Bench' @returns {{nodes: Map<string, VisNode>, root: string}} */
  readSide(source) {
    const rows = this.rows(
      'SELECT node_name, node_type, up_node, sub_nodes, precision_index, overflow_level, micro_step_id, matched_node_link, node_order ' +
        'FROM tb_nodes WHERE step = ? AND rank = ? AND data_source = ?',
      [this.step, this.rank, source],
    );
    /** @type {Map<string, VisNode>} */
    const nodes = new Map();
    let root = '';
    for (const r of rows) {
      const name = String(r[0]);
      const up = r[2] === null || r[2] === undefined ? '' : String(r[2]);
      if (!up && !root) root = name;
      nodes.set(name, {
        name,
        type: Number(r[1]) || 0,
        up,
        children: parseJson(r[3], []) ?? [],
        precision: r[4] === null || r[4] === undefined ? null : Number(r[4]),
        overflow: r[5] === null || r[5] === undefined || r[5] === '' ? null : String(r[5]),
        micro: Number(r[6] ?? 0) || 0,
        link: parseJson(r[7], []) ?? [],
        order: Number(r[8] ?? 0),
      });
    }
    return { nodes, root };
  }

  /**
   * The graphs of one (step, rank), shaped like the core's run answer.
   * @param {number} step @param {number} rank
   */
  run(step, rank) {
    if (!this.config.steps.includes(step) || !this.config.ranks.includes(rank)) {
      throw new Error(`${this.name}: step ${step} rank ${rank} is not in the file`);
    }
    this.step = step;
    this.rank = rank;
    const npuSide = this.readSide('NPU');
    if (!npuSide.nodes.size) throw new Error(`${this.name}: no NPU nodes for step ${step} rank ${rank}`);
    const compare = this.config.graphType === 'compare';
    const benchSide = compare ? this.readSide('Bench') : null;
    return assemble(this.name, this.config, npuSide, benchSide, (r) => (this.shown = r));
  }

  /**
   * @param {'npu' | 'bench'} side @param {number} index
   * @returns {NodeDetail}
   */
  node(side, index) {
    const s = this.shown;
    const names = side === 'npu' ? s?.npu : s?.bench;
    const name = names?.[index];
    if (!s || !names || name === undefined) throw new Error(`no node ${index}`);
    const own = this.detail(side === 'npu' ? 'NPU' : 'Bench', name);
    const m = (side === 'npu' ? s.npuMatched : s.benchMatched)?.[index] ?? -1;
    const otherNames = side === 'npu' ? s.bench : s.npu;
    if (m >= 0 && otherNames) {
      const other = this.detail(side === 'npu' ? 'Bench' : 'NPU', otherNames[m]);
      own.rows = side === 'npu' ? pairRows(own, other) : pairRows(other, own);
    }
    return own;
  }

  /** @param {string} source @param {string} name @returns {NodeDetail} */
  detail(source, name) {
    const cols = 'node_name, node_type, up_node, precision_index, overflow_level, micro_step_id, matched_node_link, stack_id, input_data, output_data';
    let r = this.rows(`SELECT ${cols} FROM tb_nodes WHERE id = ?`, [`${source}_${this.step}_${this.rank}_${name}`])[0];
    if (!r) {
      r = this.rows(`SELECT ${cols} FROM tb_nodes WHERE step = ? AND rank = ? AND data_source = ? AND node_name = ?`, [this.step, this.rank, source, name])[0];
    }
    if (!r) throw new Error(`${this.name}: node ${name} not found`);
    const stackRow = r[7] ? this.rows('SELECT stack_info FROM tb_stack WHERE id = ?', [r[7]])[0] : undefined;
    const stack = stackRow ? parseJson(stackRow[0], []) : [];
    return {
      name,
      nodeType: Number(r[1]) || 0,
      upNode: r[2] ? String(r[2]) : '',
      precisionIndex: precisionText(r[3] === null ? null : Number(r[3])),
      overflowLevel: r[4] ? String(r[4]) : null,
      matchedNodeLink: parseJson(r[6], []) ?? [],
      microStep: Number(r[5] ?? 0) || 0,
      stack: Array.isArray(stack) ? stack.map(str) : [],
      inputData: entriesOf(r[8]),
      outputData: entriesOf(r[9]),
      rows: [],
    };
  }

  /** Whether a pair of this file can be matched by hand, or why not. @returns {string | null} */
  whyNotMatch() {
    if (this.config.graphType !== 'compare') return `${this.name}: a build graph has no counterpart to match`;
    if (this.config.task !== 'summary' && this.config.task !== 'md5') return `${this.name}: a ${this.config.task} compare cannot be matched by hand from the file (the real-data metrics need the tensors; load the dump folders)`;
    return null;
  }

  /** @param {string} source @param {string} name */
  rowOf(source, name) {
    const id = `${source}_${this.step}_${this.rank}_${name}`;
    let r = this.rows('SELECT id, input_data, output_data FROM tb_nodes WHERE id = ?', [id])[0];
    if (!r) r = this.rows('SELECT id, input_data, output_data FROM tb_nodes WHERE step = ? AND rank = ? AND data_source = ? AND node_name = ?', [this.step, this.rank, source, name])[0];
    if (!r) throw new Error(`${this.name}: node ${name} not found`);
    return { id: r[0], input: parseJson(r[1], {}) ?? {}, output: parseJson(r[2], {}) ?? {} };
  }

  /** The names from the root to node i of a side (msprobe's matched_node_link). @param {'npu' | 'bench'} side @param {number} i */
  ancestry(side, i) {
    const s = /** @type {Shown} */ (this.shown);
    const names = /** @type {string[]} */ (side === 'npu' ? s.npu : s.bench);
    const parent = /** @type {number[]} */ (side === 'npu' ? s.npuParent : s.benchParent);
    const out = [];
    for (let k = i; k >= 0; k = parent[k]) out.push(names[k]);
    return out.reverse();
  }

  /**
   * Manual match/unmatch operations on the shown step and rank, as the core's `match` answers them:
   * the changed nodes `[index, precision | null, counterpart]` per side. The rows change in the
   * in-memory copy (`modified = 1`, as tb-graph-ascend marks them); `exportBytes` saves it.
   * @param {import('./protocol.js').MatchOp[]} ops
   */
  applyOps(ops) {
    const why = this.whyNotMatch();
    if (why) throw new Error(why);
    const s = this.shown;
    if (!s || !s.bench || !s.benchMatched || !s.benchEnd) throw new Error(`${this.name}: nothing is shown`);
    const names = { npu: s.npu, bench: s.bench };
    const nm = s.npuMatched;
    const bm = s.benchMatched;
    /** @type {Map<number, number | null>} */
    const npuCh = new Map();
    /** @type {Set<number>} */
    const benchCh = new Set();
    const setRow = (/** @type {string} */ id, /** @type {string} */ cols, /** @type {any[]} */ vals) => {
      this.db.run(`UPDATE tb_nodes SET ${cols}, modified = 1 WHERE id = ?`, [...vals, id]);
    };
    const unlinkNpu = (/** @type {number} */ i) => {
      const j = nm[i];
      if (j < 0) return;
      const r = this.rowOf('NPU', names.npu[i]);
      const strip = (/** @type {Record<string, any>} */ io) => Object.fromEntries(Object.entries(io).map(([k, v]) => {
        if (!v || typeof v !== 'object') return [k, v];
        const c = { ...v };
        for (const key of VIS_COMPARE_KEYS) delete c[key];
        return [k, c];
      }));
      setRow(r.id, 'matched_node_link = ?, precision_index = ?, input_data = ?, output_data = ?', ['[]', null, JSON.stringify(strip(r.input)), JSON.stringify(strip(r.output))]);
      nm[i] = -1;
      npuCh.set(i, null);
      if (bm[j] === i) {
        bm[j] = -1;
        setRow(this.rowOf('Bench', names.bench[j]).id, 'matched_node_link = ?', ['[]']);
        benchCh.add(j);
      }
    };
    const unlinkBench = (/** @type {number} */ j) => {
      if (bm[j] >= 0) unlinkNpu(bm[j]);
    };
    const link = (/** @type {number} */ i, /** @type {number} */ j) => {
      unlinkNpu(i);
      unlinkBench(j);
      const a = this.rowOf('NPU', names.npu[i]);
      const b = this.rowOf('Bench', names.bench[j]);
      const c = recompareStats(a.input, a.output, b.input, b.output, this.config.task);
      setRow(a.id, 'matched_node_link = ?, precision_index = ?, input_data = ?, output_data = ?', [JSON.stringify(this.ancestry('bench', j)), c.precision, JSON.stringify(c.input), JSON.stringify(c.output)]);
      setRow(b.id, 'matched_node_link = ?', [JSON.stringify(this.ancestry('npu', i))]);
      nm[i] = j;
      bm[j] = i;
      npuCh.set(i, c.precision);
      benchCh.add(j);
    };
    const kids = (/** @type {number[]} */ end, /** @type {number} */ i) => {
      const out = [];
      for (let c = i + 1; c < end[i]; c = end[c]) out.push(c);
      return out;
    };
    // The core's recursive rule: a child pairs with the Bench child of the same name, or of its name
    // with the pair's module path swapped.
    const modulePathOf = (/** @type {string} */ n) => {
      const segs = n.split('.');
      return segs.length >= 5 && (segs[0] === 'Module' || segs[0] === 'Cell') ? `${segs.slice(0, segs.length - 3).join('.')}.` : null;
    };
    for (const op of ops) {
      if (op.op === 'unmatch') {
        if (op.side === 'npu') unlinkNpu(op.index);
        else unlinkBench(op.index);
        continue;
      }
      if (op.op !== 'match') throw new Error('accepting suggestions needs the dump folders');
      if (s.npu[op.npu] === undefined || s.bench[op.bench] === undefined) throw new Error(`no node ${op.npu} / ${op.bench}`);
      const todo = [[op.npu, op.bench]];
      while (todo.length) {
        const [i, j] = /** @type {[number, number]} */ (todo.pop());
        link(i, j);
        if (!op.recursive) continue;
        const pn = modulePathOf(names.npu[i]);
        const pb = modulePathOf(names.bench[j]);
        const bench = new Map(kids(s.benchEnd, j).map((c) => [names.bench[c], c]));
        for (const c of kids(s.npuEnd, i)) {
          const n = names.npu[c];
          const swapped = pn && pb && n.startsWith(pn) ? pb + n.slice(pn.length) : null;
          const hit = bench.get(n) ?? (swapped ? bench.get(swapped) : undefined);
          if (hit !== undefined) todo.push([c, hit]);
        }
      }
    }
    return {
      npu: [...npuCh].sort((x, y) => x[0] - y[0]).map(([i, p]) => /** @type {[number, number | null, number]} */ ([i, p, nm[i]])),
      bench: [...benchCh].sort((x, y) => x - y).map((j) => /** @type {[number, number | null, number]} */ ([j, null, bm[j]])),
    };
  }

  /** The file with the manual matches made on it (a `.vis.db`). */
  exportBytes() {
    return /** @type {Uint8Array} */ (this.db.export());
  }

  free() {
    this.db.close();
  }
}

/**
 * Builds the run answer from both sides of a file.
 * @param {string} name
 * @param {{graphType: 'compare' | 'build', task: string, toolTip: any, microSteps: number, nodeColors: any}} config
 * @param {{nodes: Map<string, VisNode>, root: string}} npuSide
 * @param {{nodes: Map<string, VisNode>, root: string} | null} benchSide
 * @param {(shown: Shown) => void} keep
 */
function assemble(name, config, npuSide, benchSide, keep) {
  const npu = orderGraph(npuSide.nodes, npuSide.root);
  const bench = benchSide ? orderGraph(benchSide.nodes, benchSide.root) : null;
  if (bench && benchSide) {
    linkSide(npu.dto, npuSide.nodes, bench.index);
    linkSide(bench.dto, benchSide.nodes, npu.index);
  }
  /** @type {import('./protocol.js').Diagnostic[]} */
  const diagnostics = [];
  for (const [label, g] of /** @type {[string, {unreachable: number} | null][]} */ ([['NPU', npu], ['Bench', bench]])) {
    if (g && g.unreachable) diagnostics.push({ severity: 'warning', file: name, message: `${g.unreachable} ${label} nodes are not reachable from the root and are not shown` });
  }
  keep({
    npu: npu.dto.names, bench: bench ? bench.dto.names : null, npuMatched: npu.dto.matched, benchMatched: bench ? bench.dto.matched : null,
    npuParent: npu.dto.parent, benchParent: bench ? bench.dto.parent : null, npuEnd: npu.dto.subtreeEnd.slice(), benchEnd: bench ? bench.dto.subtreeEnd.slice() : null,
  });
  const compare = config.graphType === 'compare' && !!bench;
  return {
    graphType: compare ? 'compare' : 'build',
    task: compare ? config.task : '',
    microSteps: config.microSteps,
    nodeColors: compare ? config.nodeColors ?? {} : {},
    toolTip: compare ? config.toolTip : null,
    diagnostics,
    npu: npu.dto,
    bench: bench ? bench.dto : null,
  };
}

/** The legacy `.vis` JSON of msprobe ≤ 8.1 (one file per step/rank). */
export class VisJson {
  /** @param {any} obj @param {string} name */
  constructor(obj, name) {
    this.name = name;
    if (!obj || typeof obj !== 'object') throw new Error(`${name}: not a .vis JSON object`);
    const compare = !!obj.NPU;
    const npuG = compare ? obj.NPU : obj;
    if (!npuG || typeof npuG.node !== 'object' || typeof npuG.root !== 'string') {
      throw new Error(`${name}: no graph (expected "NPU"/"Bench" or "root"/"node" keys of a msprobe .vis file)`);
    }
    this.graphs = { npu: npuG, bench: compare ? obj.Bench : null };
    this.config = {
      graphType: /** @type {'compare' | 'build'} */ (compare && obj.Bench ? 'compare' : 'build'),
      task: String(obj.task ?? ''),
      toolTip: parseJson(obj.ToolTip, null),
      microSteps: Number(obj.MicroSteps ?? 1) || 1,
      nodeColors: obj.Colors ?? {},
    };
    /** @type {Shown | null} */
    this.shown = null;
  }

  /** @returns {VisMeta} */
  meta() {
    return {
      kind: 'json', name: this.name, graphType: this.config.graphType, steps: [0], ranks: [0],
      whyNotMatch: `${this.name}: a legacy .vis is read as it is; manual matching works on a .vis.db or the dump folders`,
    };
  }

  /** @param {any} g @returns {{nodes: Map<string, VisNode>, root: string}} */
  side(g) {
    /** @type {Map<string, VisNode>} */
    const nodes = new Map();
    let order = 0;
    for (const [name, n] of Object.entries(g.node ?? {})) {
      const data = (n && n.data) || {};
      const up = n && typeof n.upnode === 'string' && n.upnode !== 'None' ? n.upnode : '';
      nodes.set(name, {
        name,
        type: Number(n?.node_type) || 0,
        up,
        children: Array.isArray(n?.subnodes) ? n.subnodes.map(String) : [],
        precision: typeof data.precision_index === 'number' ? data.precision_index : null,
        overflow: typeof data.overflow_level === 'string' ? data.overflow_level : null,
        micro: Number(n?.micro_step_id ?? 0) || 0,
        link: Array.isArray(n?.matched_node_link) ? n.matched_node_link.map(String) : [],
        order: order++,
      });
    }
    return { nodes, root: g.root };
  }

  run() {
    const npuSide = this.side(this.graphs.npu);
    const benchSide = this.graphs.bench ? this.side(this.graphs.bench) : null;
    return assemble(this.name, this.config, npuSide, benchSide, (r) => (this.shown = r));
  }

  /** @param {'npu' | 'bench'} side @param {number} index @returns {NodeDetail} */
  node(side, index) {
    const s = this.shown;
    const names = side === 'npu' ? s?.npu : s?.bench;
    const name = names?.[index];
    if (!s || !names || name === undefined) throw new Error(`no node ${index}`);
    const own = this.detail(side, name);
    const m = (side === 'npu' ? s.npuMatched : s.benchMatched)?.[index] ?? -1;
    const otherNames = side === 'npu' ? s.bench : s.npu;
    if (m >= 0 && otherNames) {
      const other = this.detail(side === 'npu' ? 'bench' : 'npu', otherNames[m]);
      own.rows = side === 'npu' ? pairRows(own, other) : pairRows(other, own);
    }
    return own;
  }

  /** @param {'npu' | 'bench'} side @param {string} name @returns {NodeDetail} */
  detail(side, name) {
    const n = this.graphs[side]?.node?.[name];
    if (!n) throw new Error(`${this.name}: node ${name} not found`);
    const data = n.data || {};
    return {
      name,
      nodeType: Number(n.node_type) || 0,
      upNode: typeof n.upnode === 'string' && n.upnode !== 'None' ? n.upnode : '',
      precisionIndex: precisionText(typeof data.precision_index === 'number' ? data.precision_index : null),
      overflowLevel: typeof data.overflow_level === 'string' ? data.overflow_level : null,
      matchedNodeLink: Array.isArray(n.matched_node_link) ? n.matched_node_link.map(String) : [],
      microStep: Number(n.micro_step_id ?? 0) || 0,
      stack: Array.isArray(n.stack_info) ? n.stack_info.map(str) : [],
      inputData: entriesOf(n.input_data),
      outputData: entriesOf(n.output_data),
      rows: [],
    };
  }

  free() {}
}
