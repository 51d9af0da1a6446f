#!/usr/bin/env node
// The "single 2 GB dump.json in the page" measurement of issue #7. Not a test (it takes minutes and
// GBs); run it by hand after `npm run build`:
//   python3 bench/gen_scale.py --template tests/fixtures/qwen_mix_statistics/npu/step0/proc23598 \
//       --layers 1730 --api_repeat 19 --out /tmp/probelens-2g      # dump.json 2.1 GB (+ 0.5 GB construct)
//   node bench/big.mjs /tmp/probelens-2g
// Serves dist/, opens it in headless Debian Chromium (software rendering), waits for the demo, then
// chooses DIR as the NPU folder through the folder input (as a user would; it replaces the demo, so
// it loads alone: a build graph) and follows the load: the progress stages with their times, the end state, the message,
// the wasm memory, and the peak RSS of the browser's processes (sampled with ps every 0.5 s).
// After the load it checks what the user is left with: the page answers, the shown result (the
// demo, or DIR's graph), a node's details, and a new load of the demo in the (fresh) worker.
// Prints a Markdown report on stdout.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { launch, startServer, openPage, servedAllowlist, loads, waitLoad } from '../tests/e2e/helpers.mjs';

const dir = process.argv[2];
if (!dir || !fs.existsSync(dir)) {
  console.error('usage: node bench/big.mjs DUMP_DIR   (a rank folder or a step*/rank* tree)');
  process.exit(2);
}
const files = fs.readdirSync(dir, { recursive: true }).map((f) => path.join(dir, String(f))).filter((f) => fs.statSync(f).isFile());
const sizes = Object.fromEntries(files.map((f) => [path.relative(dir, f), fs.statSync(f).size]));
const total = Object.values(sizes).reduce((a, b) => a + b, 0);
const mb = (b) => (b / 1e6).toFixed(0);

/** RSS (bytes) of the Chromium processes this script started (descendants of this node process): [sum, largest]. */
function chromiumRss() {
  const out = execFileSync('ps', ['-e', '-o', 'pid=,ppid=,rss=,comm='], { encoding: 'utf8' });
  const kids = new Map();
  const info = new Map();
  for (const line of out.trim().split('\n')) {
    const [pid, ppid, r, comm] = line.trim().split(/\s+/);
    info.set(Number(pid), { rss: Number(r) * 1024, comm: comm ?? '' });
    if (!kids.has(Number(ppid))) kids.set(Number(ppid), []);
    kids.get(Number(ppid)).push(Number(pid));
  }
  let sum = 0;
  let max = 0;
  const stack = [...(kids.get(process.pid) ?? [])];
  while (stack.length) {
    const p = stack.pop();
    const i = info.get(p);
    if (i && /chrom/i.test(i.comm)) {
      sum += i.rss;
      max = Math.max(max, i.rss);
    }
    stack.push(...(kids.get(p) ?? []));
  }
  return [sum, max];
}

const load = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const server = await startServer();
const browser = await launch();
const report = [];
try {
  const { page, context, problems } = await openPage(browser, servedAllowlist(server.url));
  const crashed = [];
  page.on('crash', () => crashed.push(Date.now()));
  await page.goto(server.url);
  await waitLoad(page, 0, 120000);
  const before = await page.evaluate(() => ({ nodes: window.__probelens.lastResult?.npu.names.length, root: window.__probelens.lastResult?.npu.names[0] }));

  let peak = [0, 0];
  const stages = [];
  let n = await loads(page);
  const t0 = Date.now();
  const sampler = setInterval(() => {
    const [s, m] = chromiumRss();
    peak = [Math.max(peak[0], s), Math.max(peak[1], m)];
  }, 500);
  const watcher = (async () => {
    let last = '';
    while (!crashed.length) {
      const st = await page.evaluate(() => {
        const p = document.getElementById('progress');
        return p && !p.hidden ? p.dataset.stage ?? '' : '';
      }).catch(() => null);
      if (st === null) break;
      if (st !== last) {
        stages.push([st || '(idle)', Date.now() - t0]);
        last = st;
      }
      if (Number(await page.evaluate(() => document.body.dataset.loads).catch(() => n + 1)) > n) break;
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  await page.setInputFiles('#npu-dir', dir);
  let state = 'crashed';
  try {
    state = await waitLoad(page, n, 3600000);
  } catch (e) {
    if (!crashed.length) throw e;
  }
  const elapsed = Date.now() - t0;
  clearInterval(sampler);
  await watcher;

  report.push(`Headless Chromium (software rendering, --disable-gpu), served dist/; load average ${load} before the run.`);
  report.push('');
  report.push(`Input \`${dir}\`: ${Object.entries(sizes).map(([f, s]) => `${f} ${mb(s)} MB`).join(', ')} (${mb(total)} MB).`);
  report.push('');
  report.push('| measure | value |');
  report.push('| --- | --- |');
  report.push(`| tab crashed | ${crashed.length ? `**yes**, after ${((crashed[0] - t0) / 1000).toFixed(1)} s` : 'no'} |`);
  report.push(`| folder chosen -> load finished (${state}) | ${(elapsed / 1000).toFixed(1)} s |`);
  report.push(`| stages (start time) | ${stages.map(([s, t]) => `${s} ${(t / 1000).toFixed(1)} s`).join('; ')} |`);
  report.push(`| peak RSS of the browser's processes (sum / largest process) | ${mb(peak[0])} / ${mb(peak[1])} MB |`);
  if (!crashed.length) {
    const after = await page.evaluate(() => {
      const r = window.__probelens.lastResult;
      const err = document.getElementById('npu-error');
      return {
        nodes: r?.npu.names.length,
        root: r?.npu.names[0],
        wasmBytes: r?.timings?.wasmBytes,
        runMs: r?.timings?.runMs,
        error: err && !err.hidden ? err.textContent : '',
        errors: window.__probelens.errors.map((e) => `${e.where}: ${e.message}`),
      };
    });
    const loaded = after.nodes !== before.nodes || after.root !== before.root || !after.error;
    report.push(`| result shown | ${loaded ? `DIR's graph, ${after.nodes} nodes` : `the previous one (demo, ${after.nodes} nodes)`} |`);
    if (loaded) {
      report.push(`| worker's run() (parse, build, DTO) | ${(after.runMs / 1000).toFixed(1)} s |`);
      report.push(`| wasm memory after the run | ${mb(after.wasmBytes)} MB |`);
    }
    report.push(`| message on the NPU card | ${after.error ? `\`${after.error}\`` : '(none)'} |`);
    // What the user is left with: details of a node of the shown result, then a new load.
    const t1 = Date.now();
    await page.evaluate(() => window.__probelens.select('npu', 1));
    await page.waitForFunction(() => {
      const d = document.getElementById('details');
      return !!d && (!!d.dataset.node || /unavailable|Could not/.test(d.textContent ?? ''));
    }, null, { timeout: 600000 });
    const details = await page.evaluate(() => (document.getElementById('details')?.textContent ?? '').replace(/\s+/g, ' ').slice(0, 120));
    report.push(`| details of node 1 afterwards | ${((Date.now() - t1) / 1000).toFixed(1)} s: "${details}…" |`);
    n = await loads(page);
    const t2 = Date.now();
    await page.click('#demo-btn');
    const st2 = await waitLoad(page, n, 600000);
    report.push(`| then loading the demo | ${st2}, ${((Date.now() - t2) / 1000).toFixed(1)} s, ${await page.evaluate(() => window.__probelens.lastResult?.npu.names.length)} NPU nodes |`);
    report.push(`| page errors / console errors | ${problems.page.length} / ${problems.console.length}${problems.console.length ? ` (${problems.console.slice(0, 2).join(' | ')})` : ''} |`);
  }
  await context.close();
} finally {
  await browser.close();
  await server.close();
}
report.push('');
report.push(`Load average after: ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}.`);
console.log(report.join('\n'));
