// @ts-check
// Entry of the single-file build (dist/probelens.html). scripts/build-site.mjs concatenates the app
// modules and this file into one inline module and defines the __PL_* constants before it:
// the gzipped .wasm, the worker bundle's source, the demo files and the mapping templates.
import { startApp } from './app.js';

/** @param {string} b64 @returns {Uint8Array<ArrayBuffer>} */
function fromBase64(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** @param {Uint8Array<ArrayBuffer>} bytes @returns {Promise<Uint8Array<ArrayBuffer>>} */
async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** @param {{path: string, gz: string}[]} files */
async function demoFiles(files) {
  return Promise.all(
    files.map(async (f) => {
      const blob = new Blob([await gunzip(fromBase64(f.gz))]);
      return { path: f.path, file: blob, size: blob.size };
    }),
  );
}

const wasm = __PL_WASM_GZ ? (await gunzip(fromBase64(__PL_WASM_GZ))).buffer : new ArrayBuffer(0);
const workerUrl = URL.createObjectURL(new Blob([__PL_WORKER_SRC], { type: 'text/javascript' }));

startApp({
  // A classic worker: module workers from blob: URLs do not start when the page is a file:// URL.
  makeWorker: () => new Worker(workerUrl, { name: 'probelens-core' }),
  wasmBytes: () => wasm.slice(0),
  async loadDemo() {
    const d = __PL_DEMO;
    const [npu, bench] = await Promise.all([demoFiles(d.npu.files), demoFiles(d.bench.files)]);
    return { label: d.label, npu: { label: d.npu.label, files: npu }, bench: { label: d.bench.label, files: bench }, mapping: d.mapping };
  },
  async listTemplates() {
    return Object.keys(__PL_TEMPLATES);
  },
  async getTemplate(name) {
    const t = __PL_TEMPLATES[name];
    if (t === undefined) throw new Error(`no template ${name}`);
    return t;
  },
  async sqlWasm() {
    return (await gunzip(fromBase64(__PL_SQL_WASM_GZ))).buffer;
  },
});
