// @ts-check
/// <reference lib="webworker" />
// The dedicated worker that owns the WebAssembly core. It answers the requests of protocol.js.
// Bundling note (scripts/build-site.mjs): in the single-file build the import lines below are
// replaced by the inlined wasm-bindgen glue and protocol.js, so keep them one per line.
import init, { initSync, Session } from './pkg/probelens.js';
import initSqlJs from './vendor/sql-wasm.js';
import { STREAM_THRESHOLD, STAGES, NAME_SEP } from './protocol.js';
import { VisDb, VisJson, gunzipIfNeeded, sniffVis } from './visfile.js';
import { decodeColumns } from './columns.js';
import { toCsv, compareHeader, compareRows } from './csv.js';

/** @typedef {import('./protocol.js').Request} Request */
/** @typedef {import('./protocol.js').Response} Response */
/** @typedef {import('./protocol.js').Side} Side */
/** @typedef {import('./protocol.js').GraphDto} GraphDto */
/** @typedef {import('./protocol.js').Graph} Graph */
/** @typedef {import('./protocol.js').PackedGraph} PackedGraph */
/** @typedef {import('./protocol.js').SliceRead} SliceRead */

const scope = /** @type {DedicatedWorkerGlobalScope} */ (/** @type {unknown} */ (self));

/** @type {Session | VisDb | VisJson | null} the session whose result is displayed (the core's, or an opened file) */
let current = null;
/** the task of the displayed result (for the CSV columns) */
let currentTask = '';
/** @type {any} the sql.js module, once instantiated */
let SQL = null;
/** @type {Session | null} the session being filled by a new load */
let staging = null;
/** Counterpart columns of the current result (kept here: the page gets the transferred copies). */
/** @type {{npu: Int32Array, bench: Int32Array | null} | null} */
let currentMatched = null;
/** Set after the core trapped (a Rust panic): the instance may be inconsistent, so refuse further work. */
let aborted = '';
/** The root folder names of the staging session's sides (for messages). @type {Record<string, string | undefined>} */
let rootNames = {};
/** Files bigger than this go to the core in chunks (beginFile/appendChunk). */
let streamThreshold = STREAM_THRESHOLD;

/**
 * The state of each dump session: `id` (newSession's answer, which `adoptSide` names), and its lazy
 * files: handles of the rank folders' JSON files and the tensor files (keyed `side + '\u0000' + path`),
 * which the core reads through the reader given with `setFileReader` (a dump.json in slices while
 * parsing it, a construct.json or stack.json whole when it parses it, a tensor when it compares it). `reads`: the tensor files read so far (`side/path`); `slices`: the
 * reads of JSON files (`side/path`, offset, length), and `slicesRun` how many of them the last run
 * reported.
 * @typedef {{id: number, handles: Map<string, Blob>, reads: string[], slices: SliceRead[], slicesRun: number}} SessionState
 * @type {WeakMap<Session, SessionState>}
 */
const lazy = new WeakMap();
/** The id of the last session made. */
let sessionIds = 0;

/** The request being handled (the reader posts its progress under its id). @type {Request | null} */
let active = null;
/** When the reader last posted progress (ms). */
let lastProgress = 0;

/**
 * Gives a new session its reader of lazy files: synchronous, as the core's `Files::read` is.
 * While a JSON file is read (a dump.json in slices, `offset`/`length` given) it posts the request's progress:
 * `side` (the slot), `path`, and the bytes of that file read so far of its size, at most every
 * 100 ms, and once at the file's end.
 * @param {Session} s
 */
function attachReader(s) {
  /** @type {SessionState} */
  const state = { id: ++sessionIds, handles: new Map(), reads: [], slices: [], slicesRun: 0 };
  lazy.set(s, state);
  s.setFileReader(
    (
      /** @type {Side} */ side,
      /** @type {string} */ path,
      /** @type {number | undefined} */ offset,
      /** @type {number | undefined} */ length,
    ) => {
      const f = state.handles.get(side + '\u0000' + path);
      if (!f) throw new Error('not among the chosen files');
      const json = /\.json$/i.test(path);
      const start = offset ?? 0;
      const end = offset === undefined ? f.size : Math.min(f.size, offset + (length ?? f.size - offset));
      if (json) state.slices.push({ file: `${side}/${path}`, offset: start, length: end - start });
      else state.reads.push(`${side}/${path}`);
      const id = active?.id;
      const report = (/** @type {number} */ done) => {
        if (!json || id === undefined) return;
        lastProgress = performance.now();
        post({ id, type: 'progress', stage: side === 'npu' ? STAGES.readNpu : STAGES.readBench, side, path, done, total: f.size });
      };
      if (start === 0 || performance.now() - lastProgress >= 100) report(start);
      let bytes;
      try {
        bytes = new FileReaderSync().readAsArrayBuffer(offset === undefined ? f : f.slice(start, end));
      } catch (e) {
        // Chromium: NotReadableError once the file changed (or went) after it was chosen.
        const name = e instanceof DOMException ? e.name : 'error';
        throw new Error(`the file changed or became unreadable after it was chosen (${name}); choose the folder again`);
      }
      if (end === f.size) report(end);
      return new Uint8Array(bytes);
    },
  );
}

/**
 * Files being received, keyed by side + path.
 * @type {Map<string, {size: number, got: number, buf: Uint8Array | null}>}
 */
const incoming = new Map();

/** @param {Response} msg @param {Transferable[]} [transfer] */
function post(msg, transfer) {
  scope.postMessage(msg, transfer ?? []);
}

/** @param {unknown} e */
function messageOf(e) {
  if (e instanceof Error) return e.message;
  return String(e);
}

/**
 * Converts a GraphDto (plain JSON arrays, an opened msprobe file's) into typed columns.
 * @param {GraphDto} g
 * @returns {Graph}
 */
function toGraph(g) {
  const n = g.names.length;
  const precision = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const p = g.precision[i];
    precision[i] = p === null || p === undefined ? NaN : p;
  }
  return {
    names: g.names,
    parent: Int32Array.from(g.parent),
    nodeType: Uint8Array.from(g.nodeType),
    precision,
    overflow: g.overflow,
    matched: Int32Array.from(g.matched),
    microStep: Int32Array.from(g.microStep ?? []),
    subtreeEnd: Int32Array.from(g.subtreeEnd),
  };
}

/**
 * A GraphDto as it crosses to the page: typed columns, names joined, and the buffers to transfer.
 * @param {GraphDto} dto
 * @returns {{graph: PackedGraph, buffers: ArrayBuffer[]}}
 */
function packDto(dto) {
  const { names, ...rest } = toGraph(dto);
  const buffers = [rest.parent, rest.nodeType, rest.precision, rest.matched, rest.microStep, rest.subtreeEnd].map(
    (a) => /** @type {ArrayBuffer} */ (a.buffer),
  );
  return { graph: { ...rest, namesJoined: names.join(NAME_SEP) }, buffers };
}

/** @param {Request} req */
async function handle(req) {
  const { id } = req;
  if (aborted && req.type !== 'init') {
    post({ id, type: 'error', message: aborted });
    return;
  }
  // A failed growth that was reported gracefully must not make a later trap look like one.
  if (wasmMemory) Session.clearHeapFailure();
  switch (req.type) {
    case 'init': {
      if (req.streamThreshold !== undefined) streamThreshold = req.streamThreshold;
      const exp = req.wasm ? initSync({ module: new Uint8Array(req.wasm) }) : await init();
      wasmMemory = /** @type {{ memory?: WebAssembly.Memory }} */ (exp).memory ?? null;
      if (req.heapLimit) Session.setHeapLimit(req.heapLimit);
      if (req.sliceBytes) Session.setSliceBytes(req.sliceBytes);
      post({ id, type: 'result', value: {} });
      return;
    }
    case 'newSession': {
      if (staging) staging.free();
      incoming.clear();
      staging = new Session();
      attachReader(staging);
      rootNames = { ...(req.roots ?? {}) };
      for (const [side, name] of Object.entries(req.roots ?? {})) if (name) staging.setRootName(side, name);
      post({ id, type: 'result', value: { version: Session.version(), session: lazy.get(staging)?.id } });
      return;
    }
    case 'adoptSide': {
      const s = need(staging);
      const from = current instanceof Session && current !== s ? current : null;
      const have = from ? lazy.get(from) : undefined;
      const mine = lazy.get(s);
      if (!from || !have || !mine || have.id !== req.from) {
        post({ id, type: 'result', value: { adopted: false } });
        return;
      }
      s.adoptSide(from, req.side);
      // The shown result, if a build (a folder shown alone), frees its graph for the load that
      // adopts from it (the compare that follows builds its own): built again on its next use if
      // that load fails and it stays shown.
      const suspended = from.suspend();
      // The core reads the adopted lazy files through this session's reader: give it their handles.
      const prefix = req.side + '\u0000';
      for (const k of [...mine.handles.keys()]) if (k.startsWith(prefix)) mine.handles.delete(k);
      for (const [k, f] of have.handles) if (k.startsWith(prefix)) mine.handles.set(k, f);
      post({ id, type: 'result', value: { adopted: true, suspended } });
      return;
    }
    case 'discardStaging': {
      if (staging) staging.free();
      staging = null;
      incoming.clear();
      post({ id, type: 'result' });
      return;
    }
    case 'fileBegin': {
      const s = need(staging);
      const key = req.side + '\u0000' + req.path;
      if (req.size > streamThreshold) {
        s.beginFile(req.side, req.path, req.size);
        incoming.set(key, { size: req.size, got: 0, buf: null });
      } else {
        incoming.set(key, { size: req.size, got: 0, buf: new Uint8Array(req.size) });
      }
      let done = false;
      if (req.size === 0) {
        incoming.delete(key);
        s.addFile(req.side, req.path, new Uint8Array(0));
        done = true;
      }
      post({ id, type: 'result', value: { done } });
      return;
    }
    case 'fileChunk': {
      const s = need(staging);
      const key = req.side + '\u0000' + req.path;
      const f = incoming.get(key);
      if (!f) throw new Error(`${req.path}: chunk for a file that was not begun`);
      const chunk = new Uint8Array(req.chunk);
      if (f.got + chunk.length > f.size) throw new Error(`${req.path}: more bytes than announced`);
      if (f.buf) f.buf.set(chunk, f.got);
      else s.appendChunk(req.side, req.path, chunk);
      f.got += chunk.length;
      const done = f.got === f.size;
      if (done) {
        incoming.delete(key);
        if (f.buf) s.addFile(req.side, req.path, f.buf);
      }
      post({ id, type: 'result', value: { done } });
      return;
    }
    case 'fileHandles': {
      const s = need(staging);
      const handles = lazy.get(s)?.handles;
      for (const f of req.files) {
        const path = f.path.replace(/^\/+/, '');
        s.addLazyFile(req.side, path, f.size);
        handles?.set(req.side + '\u0000' + path, f.file);
      }
      post({ id, type: 'result' });
      return;
    }
    case 'check': {
      need(staging).check(req.side);
      post({ id, type: 'result' });
      return;
    }
    case 'layout': {
      const s = need(staging ?? current);
      if (!(s instanceof Session)) throw new Error('no dump folders loaded');
      post({ id, type: 'result', value: JSON.parse(s.layout()) });
      return;
    }
    case 'run': {
      const s = need(req.session === 'staging' ? staging : current);
      if (!(s instanceof Session)) throw new Error('no dump folders loaded');
      post({ id, type: 'progress', stage: STAGES.run });
      const t0 = performance.now();
      const state = lazy.get(s);
      const reads = state?.reads;
      const read0 = reads?.length ?? 0;
      const text = s.run(JSON.stringify(req.options));
      // The JSON reads since the last run: this run's, and those of the `check` before it.
      const jsonReads = state ? state.slices.slice(state.slicesRun) : undefined;
      if (state) state.slicesRun = state.slices.length;
      const tRun = performance.now() - t0;
      post({ id, type: 'progress', stage: STAGES.convert });
      const raw = JSON.parse(text);
      // The answer holds each graph's size; its columns come as one binary buffer per side.
      const npu = decodeColumns(s.columns('npu'), raw.npu.nodes);
      const bench = raw.bench ? decodeColumns(s.columns('bench'), raw.bench.nodes) : null;
      // The session this one replaces is freed after the answer is posted: freeing a large
      // result takes ~0.1 s of wasm time, which then overlaps the page drawing the answer.
      let replaced = null;
      if (req.session === 'staging') {
        if (current && current !== s) replaced = current;
        current = s;
        staging = null;
      }
      try {
        const buffers = bench ? [npu.buffer, bench.buffer] : [npu.buffer];
        postResult(id, raw, npu.graph, bench?.graph ?? null, buffers, tRun, t0, reads ? reads.slice(read0) : undefined, jsonReads);
      } finally {
        if (replaced) replaced.free();
      }
      return;
    }
    case 'exportVis': {
      const s = need(current);
      if (!(s instanceof VisDb)) throw new Error('no .vis.db is open');
      const bytes = s.exportBytes();
      post({ id, type: 'result', value: { bytes: bytes.buffer } }, [bytes.buffer]);
      return;
    }
    case 'probeRun': {
      const from = current instanceof Session ? current : null;
      const have = from ? lazy.get(from) : undefined;
      if (!from || !have) throw new Error('no dump folders loaded');
      const s = new Session();
      attachReader(s);
      try {
        const mine = /** @type {SessionState} */ (lazy.get(s));
        for (const side of ['npu', 'bench']) s.adoptSide(from, side);
        for (const [k, f] of have.handles) mine.handles.set(k, f);
        const raw = JSON.parse(s.run(JSON.stringify(req.options)));
        const matched = (/** @type {Side} */ side) => {
          if (!raw[side]) return 0;
          const { graph } = decodeColumns(s.columns(side), raw[side].nodes);
          let n = 0;
          for (const m of graph.matched) if (m >= 0) n++;
          return n;
        };
        post({ id, type: 'result', value: { npu: matched('npu'), bench: matched('bench') } });
      } finally {
        lazy.delete(s);
        s.free();
      }
      return;
    }
    case 'openVis': {
      post({ id, type: 'progress', stage: STAGES.openVis });
      const bytes = await gunzipIfNeeded(new Uint8Array(req.bytes));
      const kind = sniffVis(bytes);
      /** @type {VisDb | VisJson} */
      let vis;
      if (kind === 'sqlite') {
        if (!SQL) {
          if (!req.sqlWasm) throw new Error('the SQLite reader is not available');
          SQL = await initSqlJs({ wasmBinary: req.sqlWasm });
        }
        vis = new VisDb(SQL, bytes, req.name);
      } else if (kind === 'json') {
        let obj;
        try {
          obj = JSON.parse(new TextDecoder().decode(bytes));
        } catch (e) {
          throw new Error(`${req.name}: invalid JSON: ${messageOf(e)}`);
        }
        vis = new VisJson(obj, req.name);
      } else {
        throw new Error(`${req.name}: neither a .vis.db (SQLite) nor a .vis (JSON) file`);
      }
      if (current) current.free();
      current = vis;
      currentMatched = null;
      post({ id, type: 'result', value: vis.meta() });
      return;
    }
    case 'runVis': {
      const s = need(current);
      if (s instanceof Session) throw new Error('no msprobe output file is open');
      const t0 = performance.now();
      const raw = s instanceof VisDb ? s.run(req.step, req.rank) : s.run();
      const npu = packDto(raw.npu);
      const bench = raw.bench ? packDto(raw.bench) : null;
      const buffers = [...npu.buffers, ...(bench?.buffers ?? [])];
      postResult(id, raw, npu.graph, bench?.graph ?? null, buffers, performance.now() - t0, t0);
      return;
    }
    case 'match': {
      const s = need(current);
      if (s instanceof VisDb) {
        // A .vis.db: the pair is re-compared from the statistics the file stores (visfile.js).
        const value = s.applyOps(req.ops);
        const cm = currentMatched;
        if (cm) {
          for (const [i, , m] of value.npu) cm.npu[i] = m;
          const cb = cm.bench;
          if (cb) for (const [i, , m] of value.bench) cb[i] = m;
        }
        post({ id, type: 'result', value });
        return;
      }
      if (!(s instanceof Session)) throw new Error('manual matching needs the dump folders or a .vis.db (this result was read from a legacy .vis file)');
      /** @type {Map<number, [number | null, number]>[]} */
      const merged = [new Map(), new Map()];
      /** @param {string} text */
      const mergeChanges = (text) => {
        const ch = JSON.parse(text);
        [ch.npu, ch.bench].forEach((list, k) => {
          for (const [i, p, m] of list) merged[k].set(i, [p, m]);
        });
      };
      // Consecutive matches go to the core as one batch (one before/after snapshot per batch).
      for (let k = 0; k < req.ops.length;) {
        const op = req.ops[k];
        if (op.op === 'accept') {
          mergeChanges(s.acceptSuggestions(op.minScore));
          k++;
          continue;
        }
        if (op.op !== 'match') {
          mergeChanges(s.unmatch(op.side, op.index));
          k++;
          continue;
        }
        /** @type {[number, number, boolean][]} */
        const batch = [];
        for (; k < req.ops.length; k++) {
          const m = req.ops[k];
          if (m.op !== 'match') break;
          batch.push([m.npu, m.bench, m.recursive]);
        }
        mergeChanges(batch.length === 1 ? s.matchNodes(batch[0][0], batch[0][1], batch[0][2]) : s.matchMany(JSON.stringify(batch)));
      }
      /** @type {[number, number | null, number][][]} */
      const out = merged.map((m) => [...m].sort((a, b) => a[0] - b[0]).map(([i, [p, mm]]) => /** @type {[number, number | null, number]} */ ([i, p, mm])));
      const cm = currentMatched;
      if (cm) {
        for (const [i, , m] of out[0]) cm.npu[i] = m;
        const cb = cm.bench;
        if (cb) for (const [i, , m] of out[1]) cb[i] = m;
      }
      post({ id, type: 'result', value: { npu: out[0], bench: out[1] } });
      return;
    }
    case 'checkMapping': {
      /** @type {import('./protocol.js').MappingCheck} */
      let value;
      try {
        value = { ok: true, ...JSON.parse(Session.checkMapping(req.name, req.text)) };
      } catch (e) {
        if (!(e instanceof Error) || e instanceof WebAssembly.RuntimeError) throw e;
        const info = /** @type {{detail?: unknown, line?: unknown, column?: unknown}} */ (e);
        value = {
          ok: false,
          message: e.message,
          detail: typeof info.detail === 'string' ? info.detail : e.message,
          line: typeof info.line === 'number' ? info.line : null,
          column: typeof info.column === 'number' ? info.column : null,
        };
      }
      post({ id, type: 'result', value });
      return;
    }
    case 'suggest': {
      const s = need(current);
      if (!(s instanceof Session)) throw new Error('suggestions need the dump folders (this result was read from a msprobe output file)');
      post({ id, type: 'progress', stage: STAGES.suggest });
      post({ id, type: 'result', value: { list: JSON.parse(s.suggest(req.minScore)), defaultMinScore: Session.defaultMinScore() } });
      return;
    }
    case 'diagnose': {
      const s = need(current);
      if (!(s instanceof Session)) throw new Error('the diagnosis needs the dump folders (this result was read from a msprobe output file)');
      post({ id, type: 'progress', stage: STAGES.diagnose });
      const diagnosis = JSON.parse(s.diagnose(BigInt(req.step), BigInt(req.rank)));
      const divergence = s.divergence();
      post({ id, type: 'result', value: { diagnosis, divergence } }, [divergence.buffer]);
      return;
    }
    case 'diagnoseStep': {
      const s = need(current);
      if (!(s instanceof Session)) throw new Error('the diagnosis needs the dump folders (this result was read from a msprobe output file)');
      post({ id, type: 'result', value: JSON.parse(s.diagnoseStep(JSON.stringify(req.options))) });
      return;
    }
    case 'exportMapping': {
      const s = need(current);
      if (!(s instanceof Session)) throw new Error('exporting a mapping needs the dump folders (this result was read from a msprobe output file)');
      post({ id, type: 'result', value: JSON.parse(s.exportMappingReport(req.yaml, JSON.stringify(req.pairs))) });
      return;
    }
    case 'exportCsv': {
      const s = need(current);
      const m = currentMatched;
      if (!m || !m.bench) throw new Error('the compare table needs a compare result (two sides)');
      post({ id, type: 'progress', stage: STAGES.exportCsv });
      /** @type {string[][]} */
      const rows = [compareHeader(currentTask)];
      for (let i = 0; i < m.npu.length; i++) {
        const b = m.npu[i];
        if (b < 0) continue;
        const own = nodeOf(s, 'npu', i);
        if (!own.rows?.length) continue;
        rows.push(...compareRows(currentTask, own, nodeOf(s, 'bench', b)));
      }
      post({ id, type: 'result', value: { csv: toCsv(rows), rows: rows.length - 1 } });
      return;
    }
    case 'nodePair': {
      const s = need(current);
      const other = req.side === 'npu' ? 'bench' : 'npu';
      const own = nodeOf(s, req.side, req.index);
      const m = currentMatched?.[req.side]?.[req.index] ?? -1;
      const peer = m >= 0 && currentMatched?.[other] ? nodeOf(s, other, m) : null;
      post({ id, type: 'result', value: req.side === 'npu' ? { npu: own, bench: peer } : { npu: peer, bench: own } });
      return;
    }
    default: {
      const r = /** @type {{id: number, type: string}} */ (req);
      post({ id: r.id, type: 'error', message: `unknown request type ${r.type}` });
    }
  }
}

/**
 * Details of a node of the current result.
 * @param {Session | VisDb | VisJson} s @param {Side} side @param {number} index
 * @returns {import('./protocol.js').NodeDetail}
 */
function nodeOf(s, side, index) {
  return s instanceof Session ? JSON.parse(s.node(side, index)) : s.node(side, index);
}

/**
 * Posts a run answer with its graphs (their buffers are transferred).
 * @param {number} id @param {any} raw the answer (its `npu`/`bench` are replaced by the graphs)
 * @param {PackedGraph} npu @param {PackedGraph | null} bench @param {ArrayBuffer[]} buffers the graphs' buffers
 * @param {number} tRun @param {number} t0
 * @param {string[]} [tensorReads] tensor files the core read during the run
 * @param {SliceRead[]} [jsonReads] reads of JSON files since the previous run
 */
function postResult(id, raw, npu, bench, buffers, tRun, t0, tensorReads, jsonReads) {
  currentMatched = { npu: npu.matched.slice(), bench: bench ? bench.matched.slice() : null };
  currentTask = raw.task ?? '';
  const wasmBytes = wasmMemory ? wasmMemory.buffer.byteLength : 0;
  const value = { ...raw, npu, bench, tensorReads, jsonReads, timings: { runMs: tRun, totalMs: performance.now() - t0, wasmBytes } };
  post({ id, type: 'result', value }, buffers);
}

/**
 * @template T
 * @param {T | null} s
 * @returns {T}
 */
function need(s) {
  if (!s) throw new Error('no session: load files first');
  return s;
}

/** The wasm instance's memory, for the size report in result timings (benchmarks). @type {WebAssembly.Memory | null} */
let wasmMemory = null;

/**
 * After a trap: was it the core running out of memory (the wasm memory could not grow)? Then the
 * message names the file (or pair) it was working on and says what to do. The instance is still
 * readable after a trap; only this worker's state is lost (the page starts a fresh worker).
 * @param {Request} req
 * @returns {{message: string, file: string} | null}
 */
function outOfMemory(req) {
  let asked = 0;
  let work = '';
  try {
    asked = Session.heapFailure();
    if (asked > 0) work = Session.heapWork();
  } catch {
    // The instance cannot even answer: keep what was read.
  }
  if (!(asked > 0)) return null;
  const reading = req.type === 'fileBegin' || req.type === 'fileChunk';
  // A file being read is the request's (the core may have trapped copying a chunk in, before it knew).
  const file = reading ? [rootNames[req.side], req.path.replace(/^\/+/, '')].filter(Boolean).join('/') : work;
  const doing = reading ? 'reading it'
    : /dump\.json$/.test(work) ? 'parsing it' : req.type === 'run' ? 'building and comparing the graphs' : 'working on it';
  const used = wasmMemory ? `${(wasmMemory.buffer.byteLength / 1e6).toFixed(0)} MB in use, ` : '';
  return {
    file,
    message: `${file ? `${file}: ` : ''}the browser's memory limit was reached while ${doing} (${used}` +
      `${(asked / 1e6).toFixed(1)} MB more could not be allocated; a page's WebAssembly memory is at most 4 GiB): ` +
      'use the CLI (probelens graph_visualize) or a smaller dump',
  };
}

/** Requests are handled strictly in order, even when one awaits (init). */
let queue = Promise.resolve();

scope.onmessage = (/** @type {MessageEvent} */ e) => {
  const req = /** @type {Request} */ (e.data);
  queue = queue.then(async () => {
    try {
      active = req;
      await handle(req);
    } catch (err) {
      const oom = err instanceof WebAssembly.RuntimeError ? outOfMemory(req) : null;
      if (oom) aborted = oom.message;
      else if (err instanceof WebAssembly.RuntimeError) {
        aborted = `the core crashed (${err.message}); the page restarts it on the next load`;
      }
      /** @type {import('./protocol.js').ErrorResponse} */
      const msg = { id: req.id, type: 'error', message: messageOf(err) };
      if (oom) {
        msg.message = oom.message;
        msg.fatal = true;
      } else if (aborted) {
        msg.message = `${msg.message} (${aborted})`;
        msg.fatal = true;
      }
      if ('side' in req) msg.side = req.side;
      if ('path' in req) msg.path = req.path;
      if (oom?.file) msg.path = oom.file;
      // The core's Errors say which side and file they concern (src/wasm/mod.rs side_err).
      const info = /** @type {{side?: unknown, file?: unknown}} */ (err instanceof Error ? err : {});
      if (info.side === 'npu' || info.side === 'bench') msg.side = info.side;
      if (typeof info.file === 'string' && info.file) msg.path = info.file;
      msg.stage = req.type;
      post(msg);
    } finally {
      active = null;
    }
  });
};
