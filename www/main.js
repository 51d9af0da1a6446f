// @ts-check
// Entry of the served site: the worker is ./worker.js, the .wasm is fetched by the worker,
// the demo and the mapping templates are plain files next to the page.
import { startApp } from './app.js';

/** @typedef {import('./loader.js').SourceFile} SourceFile */

/**
 * @typedef {object} DemoManifest
 * @property {string} label
 * @property {{label: string, files: {path: string, url: string}[]}} npu
 * @property {{label: string, files: {path: string, url: string}[]}} bench
 * @property {{name: string, url: string} | null} mapping
 */

/** @param {string} url */
async function get(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r;
}

/** @param {{path: string, url: string}[]} files @returns {Promise<SourceFile[]>} */
async function fetchFiles(files) {
  return Promise.all(
    files.map(async (f) => {
      const blob = await (await get(f.url)).blob();
      return { path: f.path, file: blob, size: blob.size };
    }),
  );
}

startApp({
  makeWorker: () => new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'probelens-core' }),
  wasmBytes: () => undefined,
  async loadDemo() {
    /** @type {DemoManifest} */
    const man = await (await get('./demo/manifest.json')).json();
    const [npu, bench] = await Promise.all([fetchFiles(man.npu.files), fetchFiles(man.bench.files)]);
    const mapping = man.mapping ? { name: man.mapping.name, text: await (await get(man.mapping.url)).text() } : null;
    return { label: man.label, npu: { label: man.npu.label, files: npu }, bench: { label: man.bench.label, files: bench }, mapping };
  },
  async listTemplates() {
    return (await get('./mappings/index.json')).json();
  },
  async getTemplate(name) {
    return (await get(`./mappings/${encodeURIComponent(name)}`)).text();
  },
  async sqlWasm() {
    return (await get('./vendor/sql-wasm.wasm')).arrayBuffer();
  },
});
