#!/usr/bin/env node
// Browser part of `npm run bench` (scripts/bench.sh runs it when present):
//   node bench/browser.mjs NPU_DIR BENCH_DIR     # the scale pair, then the wide module
//   node bench/browser.mjs --wide-only           # only the wide module
// Serves dist/ (npm run build first), opens it in headless Debian Chromium (software rendering),
// chooses the two folders through the page's folder inputs (the NPU folder alone first: it replaces
// the demo, a build view) with the Qwen2.5 mapping, and reports,
// as medians of BENCH_RUNS runs: drop -> first graph drawn, the worker's run() time, the wasm
// memory after the run, expand-all latency, the frame time while panning/zooming with every node
// expanded, and selection latency.
// Then the wide module (issue #7: "expanding a module with 1,000 children <= 50 ms"): the pair of
// bench/gen_wide.py (generated into bench/out/wide when missing), whose Module.model.Wide.forward.0
// has 1,000 child modules; with the module selected in the NPU outline, Enter is dispatched and the
// time to the frame drawn is measured (BENCH_EXPANDS times, collapsed again in between; median and
// max), with *sync expand* on (the page's default: the Bench counterpart opens too, both panes
// redraw) and off. Prints Markdown on stdout. Not a test.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { launch, startServer, openPage, servedAllowlist, loads, waitLoad, ROOT } from '../tests/e2e/helpers.mjs';

const wideOnly = process.argv[2] === '--wide-only';
const [npuDir, benchDir] = wideOnly ? [] : process.argv.slice(2);
if (!wideOnly && (!npuDir || !benchDir)) {
  console.error('usage: node bench/browser.mjs NPU_DIR BENCH_DIR | --wide-only');
  process.exit(2);
}
const runs = Number(process.env.BENCH_RUNS ?? 3);
const expands = Number(process.env.BENCH_EXPANDS ?? 15);
const WIDE = path.join(ROOT, 'bench', 'out', 'wide');
const WIDE_NODE = 'Module.model.Wide.forward.0';
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const loadBefore = loadavg();
const mapping = path.join(ROOT, 'tests/fixtures/qwen_mix_statistics/layer_mapping.yaml');
const inputBytes = wideOnly ? 0 : ['npu', 'bench']
  .map((s) => (s === 'npu' ? npuDir : benchDir))
  .flatMap((d) => fs.readdirSync(d, { recursive: true }).map((f) => path.join(d, String(f))))
  .filter((f) => fs.statSync(f).isFile())
  .reduce((a, f) => a + fs.statSync(f).size, 0);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

/**
 * Expands the wide module from the NPU outline with Enter, `n` times (collapsing it in between), and
 * returns the times from the keydown to the frame drawn (ms): the keydown handler, the pane's
 * requestAnimationFrame draw, then the style/layout/paint of that frame (a message posted from a
 * later requestAnimationFrame callback arrives after the frame's rendering).
 * @param {import('playwright-core').Page} page
 */
async function expandTimes(page, n) {
  return page.evaluate(async ([name, n]) => {
    const frame = () => new Promise((r) => requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => r(performance.now());
      ch.port2.postMessage(0);
    }));
    const r = window.__probelens.lastResult;
    const i = r.npu.names.indexOf(name);
    const kids = Array.from(r.npu.parent).filter((p) => p === i).length;
    const ol = document.getElementById('npu-outline');
    const key = () => ol.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true, cancelable: true }));
    const open = () => window.__probelens.views.npu.model.expanded[i] === 1;
    window.__probelens.select('npu', i);
    await frame();
    if (open()) key();
    await frame();
    const times = [];
    for (let k = 0; k < n; k++) {
      if (open()) throw new Error('the module is not collapsed');
      const t0 = performance.now();
      key();
      const t1 = await frame();
      if (!open()) throw new Error('Enter did not expand the module');
      times.push(t1 - t0);
      key(); // collapse again
      await frame();
      await new Promise((res) => setTimeout(res, 50));
    }
    return { kids, times };
  }, [WIDE_NODE, n]);
}

const server = await startServer();
const browser = await launch();
const samples = [];
const wide = {};
try {
  for (let k = 0; k < (wideOnly ? 0 : runs); k++) {
    const { page, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0, 120000);
    let n = await loads(page);
    await page.setInputFiles('#mapping-file', mapping);
    await waitLoad(page, n, 120000);
    // The NPU side first (it replaces the demo, whose Bench side the page clears: a build view), then
    // the timed drop of the Bench side -> compare.
    n = await loads(page);
    await page.setInputFiles('#npu-dir', npuDir);
    await waitLoad(page, n, 600000);
    const built = await page.evaluate(() => ({ type: window.__probelens.lastResult?.graphType, errors: window.__probelens.errors.map((e) => `${e.where}: ${e.message}`) }));
    if (built.type !== 'build' || built.errors.length) throw new Error(`the NPU folder alone did not load: ${JSON.stringify(built)}`);
    n = await loads(page);
    const t0 = Date.now();
    await page.setInputFiles('#bench-dir', benchDir);
    await waitLoad(page, n, 600000);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const dropToGraphMs = Date.now() - t0;
    const compared = await page.evaluate(() => ({ type: window.__probelens.lastResult?.graphType, errors: window.__probelens.errors.map((e) => `${e.where}: ${e.message}`) }));
    if (compared.type !== 'compare' || compared.errors.length) throw new Error(`the pair did not load: ${JSON.stringify(compared)}`);
    const m = await page.evaluate(() => {
      const r = window.__probelens.lastResult;
      const out = {
        nodes: r.npu.parent.length,
        runMs: r.timings?.runMs ?? NaN,
        // The worker's time after run(): turning its answer into the posted graphs.
        afterRunMs: (r.timings?.totalMs ?? NaN) - (r.timings?.runMs ?? NaN),
        // The page's display of the answer (models, outlines, panes, legend, summary).
        displayMs: window.__probelens.timings.displayMs,
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
  // The wide module.
  if (!fs.existsSync(path.join(WIDE, 'bench', 'dump.json'))) {
    execFileSync('python3', [path.join(ROOT, 'bench', 'gen_wide.py'), '--children', '1000', '--out', WIDE], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  {
    const { page, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0, 120000);
    let n = await loads(page);
    await page.setInputFiles('#npu-dir', path.join(WIDE, 'npu'));
    await waitLoad(page, n, 120000);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', path.join(WIDE, 'bench'));
    await waitLoad(page, n, 120000);
    wide.nodes = await page.evaluate(() => window.__probelens.lastResult.npu.names.length);
    const on = await expandTimes(page, expands);
    await page.uncheck('#opt-sync');
    const off = await expandTimes(page, expands);
    wide.kids = on.kids;
    wide.on = on.times;
    wide.off = off.times;
    await context.close();
  }
} finally {
  await browser.close();
  await server.close();
}
const col = (k) => median(samples.map((s) => s[k]));
const mb = (b) => (b / 1e6).toFixed(0);
const loadAfter = loadavg();
if (wideOnly) {
  printWide();
  process.exit(0);
}
console.log(`Headless Chromium (software rendering, --disable-gpu), median of ${runs} run(s); input ${mb(inputBytes)} MB, NPU graph ${samples[0]?.nodes} nodes.\n`);
console.log('| measure | value |');
console.log('| --- | --- |');
console.log(`| drop of the Bench folder -> compare drawn | ${(col('dropToGraphMs') / 1000).toFixed(1)} s |`);
console.log(`| of which the worker's run() | ${(col('runMs') / 1000).toFixed(1)} s |`);
console.log(`| of which the worker's answer after run() (parse, columns, post) | ${col('afterRunMs').toFixed(0)} ms |`);
console.log(`| of which the page's display of the answer | ${col('displayMs').toFixed(0)} ms |`);
console.log(`| wasm memory after the run | ${mb(col('wasmBytes'))} MB (${(col('wasmBytes') / inputBytes).toFixed(2)}x input) |`);
console.log(`| expand all (NPU pane) | ${col('expandAllMs').toFixed(0)} ms |`);
console.log(`| frame while panning/zooming, all expanded (median / max) | ${col('frameMedianMs').toFixed(1)} / ${col('frameMaxMs').toFixed(1)} ms |`);
console.log(`| select a node (reveal + counterpart) | ${col('selectMs').toFixed(0)} ms |`);
console.log('');
printWide();

function printWide() {
  const ms = (xs) => `${median(xs).toFixed(1)} ms (max ${Math.max(...xs).toFixed(1)})`;
  console.log(`Expanding a module with ${wide.kids} children (bench/gen_wide.py pair, ${wide.nodes} NPU nodes; headless Chromium, software rendering), keydown Enter in the NPU outline -> frame drawn, median of ${wide.on.length}; load average ${loadBefore} before, ${loadAfter} after:\n`);
  console.log('| measure | goal (issue #7) | value |');
  console.log('| --- | --- | --- |');
  console.log(`| expand, *sync expand* on (default: the Bench counterpart opens too, both panes redraw) | <= 50 ms | ${ms(wide.on)} |`);
  console.log(`| expand, *sync expand* off (NPU pane only) | <= 50 ms | ${ms(wide.off)} |`);
}
