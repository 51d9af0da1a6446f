// @ts-check
/// <reference lib="webworker" />
// The dedicated worker that owns the WebAssembly core. It answers the requests of protocol.js.
// Bundling note (scripts/build-site.mjs): in the single-file build the import lines below are
// replaced by the inlined wasm-bindgen glue and protocol.js, so keep them one per line.
import init, { initSync, Session } from './pkg/probelens.js';
import { STREAM_THRESHOLD, STAGES, NAME_SEP } from './protocol.js';

/** @typedef {import('./protocol.js').Request} Request */
/** @typedef {import('./protocol.js').Response} Response */
/** @typedef {import('./protocol.js').Side} Side */
/** @typedef {import('./protocol.js').GraphDto} GraphDto */
/** @typedef {import('./protocol.js').Graph} Graph */

const scope = /** @type {DedicatedWorkerGlobalScope} */ (/** @type {unknown} */ (self));

/** @type {Session | null} the session whose result is displayed */
let current = null;
/** @type {Session | null} the session being filled by a new load */
let staging = null;
/** Counterpart columns of the current result (kept here: the page gets the transferred copies). */
/** @type {{npu: Int32Array, bench: Int32Array | null} | null} */
let currentMatched = null;
/** Set after the core trapped (a Rust panic): the instance may be inconsistent, so refuse further work. */
let aborted = '';
/** Files bigger than this go to the core in chunks (beginFile/appendChunk). */
let streamThreshold = STREAM_THRESHOLD;

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
 * Converts a GraphDto (plain JSON arrays) into typed columns.
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

/** @param {Graph} g @returns {ArrayBuffer[]} */
function buffersOf(g) {
  return [g.parent, g.nodeType, g.precision, g.matched, g.microStep, g.subtreeEnd].map(
    (a) => /** @type {ArrayBuffer} */ (a.buffer),
  );
}

/** @param {Request} req */
async function handle(req) {
  const { id } = req;
  if (aborted && req.type !== 'init') {
    post({ id, type: 'error', message: aborted });
    return;
  }
  switch (req.type) {
    case 'init': {
      if (req.streamThreshold !== undefined) streamThreshold = req.streamThreshold;
      if (req.wasm) initSync({ module: new Uint8Array(req.wasm) });
      else await init();
      post({ id, type: 'result', value: {} });
      return;
    }
    case 'newSession': {
      if (staging) staging.free();
      incoming.clear();
      staging = new Session();
      for (const [side, name] of Object.entries(req.roots ?? {})) if (name) staging.setRootName(side, name);
      post({ id, type: 'result', value: { version: Session.version() } });
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
    case 'check': {
      need(staging).check(req.side);
      post({ id, type: 'result' });
      return;
    }
    case 'layout': {
      const s = need(staging ?? current);
      post({ id, type: 'result', value: JSON.parse(s.layout()) });
      return;
    }
    case 'run': {
      const s = need(req.session === 'staging' ? staging : current);
      post({ id, type: 'progress', stage: STAGES.run });
      const t0 = performance.now();
      const text = s.run(JSON.stringify(req.options));
      const tRun = performance.now() - t0;
      post({ id, type: 'progress', stage: STAGES.convert });
      const raw = JSON.parse(text);
      const npu = toGraph(raw.npu);
      const bench = raw.bench ? toGraph(raw.bench) : null;
      if (req.session === 'staging') {
        if (current && current !== s) current.free();
        current = s;
        staging = null;
      }
      currentMatched = { npu: npu.matched.slice(), bench: bench ? bench.matched.slice() : null };
      const pack = (/** @type {Graph | null} */ g) => {
        if (!g) return null;
        const { names, ...rest } = g;
        return { ...rest, namesJoined: names.join(NAME_SEP) };
      };
      const value = { ...raw, npu: pack(npu), bench: pack(bench), timings: { runMs: tRun, totalMs: performance.now() - t0 } };
      post({ id, type: 'result', value }, [...buffersOf(npu), ...(bench ? buffersOf(bench) : [])]);
      return;
    }
    case 'nodePair': {
      const s = need(current);
      const other = req.side === 'npu' ? 'bench' : 'npu';
      const own = JSON.parse(s.node(req.side, req.index));
      const m = currentMatched?.[req.side]?.[req.index] ?? -1;
      const peer = m >= 0 && currentMatched?.[other] ? JSON.parse(s.node(other, m)) : null;
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
 * @template T
 * @param {T | null} s
 * @returns {T}
 */
function need(s) {
  if (!s) throw new Error('no session: load files first');
  return s;
}

/** Requests are handled strictly in order, even when one awaits (init). */
let queue = Promise.resolve();

scope.onmessage = (/** @type {MessageEvent} */ e) => {
  const req = /** @type {Request} */ (e.data);
  queue = queue.then(async () => {
    try {
      await handle(req);
    } catch (err) {
      if (err instanceof WebAssembly.RuntimeError) {
        aborted = `the core crashed (${err.message}); the page restarts it on the next load`;
      }
      /** @type {import('./protocol.js').ErrorResponse} */
      const msg = { id: req.id, type: 'error', message: messageOf(err) };
      if (aborted) {
        msg.message = `${msg.message} (${aborted})`;
        msg.fatal = true;
      }
      if ('side' in req) msg.side = req.side;
      if ('path' in req) msg.path = req.path;
      // The core's Errors say which side and file they concern (src/wasm.rs side_err).
      const info = /** @type {{side?: unknown, file?: unknown}} */ (err instanceof Error ? err : {});
      if (info.side === 'npu' || info.side === 'bench') msg.side = info.side;
      if (typeof info.file === 'string' && info.file) msg.path = info.file;
      msg.stage = req.type;
      post(msg);
    }
  });
};
