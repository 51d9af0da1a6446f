#!/usr/bin/env node
// Browser part of `npm run bench` (scripts/bench.sh runs it when present):
//   node bench/browser.mjs NPU_DIR BENCH_DIR
// Serves dist/ (npm run build first), opens it in headless Debian Chromium (software rendering),
// chooses the two folders through the page's folder inputs with the Qwen2.5 mapping, and reports,
// as medians of BENCH_RUNS runs: drop -> first graph drawn, the worker's run() time, the wasm
// memory after the run, expand-all latency, the frame time while panning/zooming with every node
// expanded, and selection latency. Prints a Markdown table on stdout. Not a test.
import fs from 'node:fs';
import path from 'node:path';
import { launch, startServer, openPage, servedAllowlist, loads, waitLoad, ROOT } from '../tests/e2e/helpers.mjs';

const [npuDir, benchDir] = process.argv.slice(2);
if (!npuDir || !benchDir) {
  console.error('usage: node bench/browser.mjs NPU_DIR BENCH_DIR');
  process.exit(2);
}
const runs = Number(process.env.BENCH_RUNS ?? 3);
const mapping = path.join(ROOT, 'tests/fixtures/qwen_mix_statistics/layer_mapping.yaml');
const inputBytes = ['npu', 'bench']
  .map((s) => (s === 'npu' ? npuDir : benchDir))
  .flatMap((d) => fs.readdirSync(d, { recursive: true }).map((f) => path.join(d, String(f))))
  .filter((f) => fs.statSync(f).isFile())
  .reduce((a, f) => a + fs.statSync(f).size, 0);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

const server = await startServer();
const browser = await launch();
const samples = [];
try {
  for (let k = 0; k < runs; k++) {
    const { page, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0, 120000);
    let n = await loads(page);
    await page.setInputFiles('#mapping-file', mapping);
    await waitLoad(page, n, 120000);
    // The NPU side first (a build view), then the timed drop of the Bench side -> compare.
    n = await loads(page);
    await page.setInputFiles('#npu-dir', npuDir);
    await waitLoad(page, n, 600000);
    n = await loads(page);
    const t0 = Date.now();
    await page.setInputFiles('#bench-dir', benchDir);
    await waitLoad(page, n, 600000);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const dropToGraphMs = Date.now() - t0;
    const m = await page.evaluate(() => {
      const r = window.__probelens.lastResult;
      const out = {
        nodes: r.npu.parent.length,
        runMs: r.timings?.runMs ?? NaN,
        wasmBytes: r.timings?.wasmBytes ?? NaN,
      };
      const v = window.__probelens.views.npu;
      let t = performance.now();
      document.querySelector('#npu-pane [data-act="expand-all"]').click();
      out.expandAllMs = performance.now() - t;
      // Frame time while panning and zooming over the fully expanded graph.
      const frames = [];
      for (const s of [0.02, 0.1, 0.5, 1.5]) {
        v.scale = s;
        for (let i = 0; i < 10; i++) {
          v.tx = 10 - i * 37;
          v.ty = -v.model.h[0] * s * (i / 10);
          v.draw();
          frames.push(v.stats.ms);
        }
      }
      frames.sort((a, b) => a - b);
      out.frameMedianMs = frames[Math.floor(frames.length / 2)];
      out.frameMaxMs = frames[frames.length - 1];
      t = performance.now();
      window.__probelens.select('npu', Math.floor(v.model.n * 0.77));
      out.selectMs = performance.now() - t;
      return out;
    });
    samples.push({ dropToGraphMs, ...m });
    await context.close();
  }
} finally {
  await browser.close();
  await server.close();
}
const col = (k) => median(samples.map((s) => s[k]));
const mb = (b) => (b / 1e6).toFixed(0);
console.log(`Headless Chromium (software rendering, --disable-gpu), median of ${runs} run(s); input ${mb(inputBytes)} MB, NPU graph ${samples[0]?.nodes} nodes.\n`);
console.log('| measure | value |');
console.log('| --- | --- |');
console.log(`| drop of the Bench folder -> compare drawn | ${(col('dropToGraphMs') / 1000).toFixed(1)} s |`);
console.log(`| of which the worker's run() | ${(col('runMs') / 1000).toFixed(1)} s |`);
console.log(`| wasm memory after the run | ${mb(col('wasmBytes'))} MB (${(col('wasmBytes') / inputBytes).toFixed(2)}x input) |`);
console.log(`| expand all (NPU pane) | ${col('expandAllMs').toFixed(0)} ms |`);
console.log(`| frame while panning/zooming, all expanded (median / max) | ${col('frameMedianMs').toFixed(1)} / ${col('frameMaxMs').toFixed(1)} ms |`);
console.log(`| select a node (reveal + counterpart) | ${col('selectMs').toFixed(0)} ms |`);
