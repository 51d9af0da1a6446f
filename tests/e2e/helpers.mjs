// Shared helpers of the browser tests: Debian Chromium via playwright-core, the static server,
// console/network guards, and readers for the page's result and outline.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DIST = path.join(ROOT, 'dist');
export const OUT = path.join(ROOT, 'tests', 'out');
export const FIX = path.join(ROOT, 'tests', 'fixtures');
export const SINGLE_URL = pathToFileURL(path.join(DIST, 'probelens.html')).href;

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
];

/**
 * The CLI binary to compare the page with: `PROBELENS_BIN`, else the newest of `target/release` and
 * `target/ci` (`npm test` builds the ci one with `cargo test --profile ci` before the page).
 */
export function cliBinary() {
  if (process.env.PROBELENS_BIN) return process.env.PROBELENS_BIN;
  const found = ['release', 'ci']
    .map((p) => path.join(ROOT, 'target', p, 'probelens'))
    .filter((f) => fs.existsSync(f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  assert.ok(found.length, 'no target/{release,ci}/probelens: run `cargo build --release` first');
  return found[0];
}

/** Fails early with a clear message when the build is missing. */
export function requireBuild() {
  for (const f of ['index.html', 'probelens.html', 'pkg/probelens.js', 'pkg/probelens_bg.wasm']) {
    if (!fs.existsSync(path.join(DIST, f))) throw new Error(`dist/${f} is missing: run \`npm run build\` first`);
  }
  fs.mkdirSync(OUT, { recursive: true });
}

export async function launch() {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
}

/**
 * Starts `node scripts/serve.mjs` on a free port (PORT=0) and waits for its announced URL.
 * @returns {Promise<{url: string, close: () => Promise<void>}>}
 */
export async function startServer() {
  const child = spawn(process.execPath, [path.join(ROOT, 'scripts', 'serve.mjs')], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`serve.mjs did not start: ${out}`)), 10000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /^probelens: serving (http:\/\/127\.0\.0\.1:\d+\/)$/m.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m[1]);
      }
    });
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => reject(new Error(`serve.mjs exited with ${code}: ${out}`)));
  });
  return {
    url,
    close: () => new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    }),
  };
}

/**
 * Opens a page that records console errors, page errors and requests outside the allowlist.
 * @param {import('playwright-core').Browser} browser
 * @param {(url: string) => boolean} allowed which request URLs are the page's own files
 * `outlineW`: the outlines' width as a user's drag would leave it (remembered), else the default.
 * @param {{viewport?: {width: number, height: number}, outlines?: boolean, outlineW?: number}} [opts]
 */
export async function openPage(browser, allowed, { viewport = { width: 1500, height: 950 }, outlines = true, outlineW = 0 } = {}) {
  const context = await browser.newContext({ viewport });
  // The outlines start hidden below 1800 px; these tests read them, so they show them as a user's
  // click would leave them (remembered in localStorage). The layout test passes `outlines: false`.
  if (outlines) {
    await context.addInitScript((w) => {
      try {
        if (!localStorage.getItem('probelens.layout.v1')) localStorage.setItem('probelens.layout.v1', JSON.stringify(w ? { outlineOpen: true, outlineW: w } : { outlineOpen: true }));
      } catch {
        // no storage: the defaults
      }
    }, outlineW);
  }
  const page = await context.newPage();
  const problems = { console: [], page: [], requests: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') problems.console.push(m.text());
  });
  page.on('pageerror', (e) => problems.page.push(e.message));
  page.on('request', (r) => {
    if (!allowed(r.url())) problems.requests.push(r.url());
  });
  // Workers' requests and errors too.
  page.on('worker', (w) => {
    w.on('console', (m) => {
      if (m.type() === 'error') problems.console.push(`[worker] ${m.text()}`);
    });
  });
  return {
    page,
    context,
    problems,
    assertClean() {
      assert.deepEqual(problems.page, [], 'page errors');
      assert.deepEqual(problems.console, [], 'console errors');
      assert.deepEqual(problems.requests, [], 'requests outside the allowlist');
    },
  };
}

/** Allowlist for the served site: only its own origin (plus data:/blob: URLs the page makes itself). */
export const servedAllowlist = (base) => (u) => u.startsWith(base) || u.startsWith('data:') || u.startsWith('blob:');
/** Allowlist for the single file: file: itself, data: and blob: only. */
export const fileAllowlist = (u) => u.startsWith('file:') || u.startsWith('data:') || u.startsWith('blob:');

/** Number of finished loads so far. @param {import('playwright-core').Page} page */
export async function loads(page) {
  return Number((await page.evaluate(() => document.body.dataset.loads)) ?? 0);
}

/**
 * Waits until the load after `before` finished, and returns the page state ('ready', 'empty').
 * @param {import('playwright-core').Page} page @param {number} before
 */
export async function waitLoad(page, before, timeout = 30000) {
  await page.waitForFunction((n) => Number(document.body.dataset.loads ?? 0) > n && document.body.dataset.state !== 'loading', before, { timeout });
  return page.evaluate(() => document.body.dataset.state);
}

/**
 * Summary of the result the page got from the core (window.__probelens.lastResult).
 * @param {import('playwright-core').Page} page
 */
export async function resultSummary(page) {
  return page.evaluate(() => {
    const r = window.__probelens.lastResult;
    if (!r) return null;
    const side = (g) => {
      if (!g) return null;
      const hist = {};
      for (let i = 0; i < g.names.length; i++) {
        const p = g.precision[i];
        const k = Number.isNaN(p) ? 'null' : p.toFixed(1);
        hist[k] = (hist[k] ?? 0) + 1;
      }
      return {
        nodes: g.names.length,
        matched: Array.from(g.matched).filter((m) => m >= 0).length,
        precision: hist,
        root: g.names[0],
      };
    };
    return { graphType: r.graphType, task: r.task, nodeColors: r.nodeColors, npu: side(r.npu), bench: side(r.bench) };
  });
}

/**
 * The reference numbers msprobe's SQLite output has for (variant, step, rank, side).
 * @param {string} fixture e.g. 'qwen_mix_statistics'
 * @param {string} variant e.g. 'map'
 */
export function reference(fixture, variant, step, rank, source) {
  const all = JSON.parse(fs.readFileSync(path.join(FIX, fixture, 'reference', variant, 'summary.json'), 'utf8'));
  const dbs = Array.isArray(all) ? all : [all];
  for (const db of dbs) {
    for (const g of db.graphs ?? []) {
      if (g.step === step && g.rank === rank && g.data_source === source) return g;
    }
  }
  throw new Error(`no reference for ${fixture}/${variant} step ${step} rank ${rank} ${source}`);
}

/** Asserts the page's result equals the reference numbers of (fixture, variant, step, rank). */
export function assertMatchesReference(sum, fixture, variant, step, rank) {
  const rn = reference(fixture, variant, step, rank, 'NPU');
  const rb = reference(fixture, variant, step, rank, 'Bench');
  assert.equal(sum.graphType, 'compare');
  assert.equal(sum.npu.nodes, rn.nodes, `NPU nodes (${fixture}/${variant} step ${step} rank ${rank})`);
  assert.equal(sum.npu.matched, rn.matched, 'NPU matched');
  assert.equal(sum.bench.nodes, rb.nodes, 'Bench nodes');
  assert.equal(sum.bench.matched, rb.matched, 'Bench matched');
  assert.deepEqual(sum.npu.precision, rn.precision_index, 'NPU precision_index histogram');
}

/** Selects a node and waits until its details are shown (or a message replaces them); returns them. */
export async function detailsOf(page, side, i) {
  await page.evaluate(([s, k]) => window.__probelens.select(s, k), [side, i]);
  await page.waitForFunction(() => {
    const d = document.getElementById('details');
    return !!d.dataset.node || /unavailable|Could not/.test(d.textContent ?? '');
  });
  return page.evaluate(() => ({ node: document.getElementById('details').dataset.node, text: document.getElementById('details').textContent }));
}

/**
 * Expected class of every node, computed independently from the result's colour table:
 * NPU: unmatched → 'unmatched'; else the entry whose [lo, hi) (last: [lo, hi]) contains the precision index,
 * 'none' when it has none. Bench: the class of its NPU counterpart.
 * @param {import('playwright-core').Page} page
 */
export async function expectedClasses(page) {
  return page.evaluate(() => {
    const r = window.__probelens.lastResult;
    const ranged = Object.values(r.nodeColors)
      .filter((e) => e.value.length === 2)
      .sort((a, b) => a.value[0] - b.value[0]);
    const name = (e) => (e.accuracy_level ?? '').toLowerCase().split(/[\s_-]+/)[0];
    const cls = (p) => {
      if (Number.isNaN(p)) return 'none';
      for (let k = 0; k < ranged.length; k++) {
        const [lo, hi] = ranged[k].value;
        if (p >= lo && (p < hi || (k === ranged.length - 1 && p === hi))) return name(ranged[k]);
      }
      return 'none';
    };
    const npu = Array.from(r.npu.precision, (p, i) => (r.npu.matched[i] < 0 ? 'unmatched' : cls(p)));
    const bench = r.bench ? Array.from(r.bench.matched, (m) => (m < 0 ? 'unmatched' : npu[m])) : null;
    return { npu, bench };
  });
}

/**
 * Expands everything in a pane and reads every outline row (scrolling the virtualised list).
 * @param {import('playwright-core').Page} page @param {'npu' | 'bench'} side
 */
export async function readOutline(page, side) {
  await page.click(`#${side}-pane [data-act="expand-all"]`);
  return page.evaluate(async (side) => {
    const el = document.getElementById(`${side}-outline`);
    const rows = new Map();
    const total = Number(el.dataset.rowCount);
    for (let top = 0; ; top += el.clientHeight / 2) {
      el.scrollTop = top;
      el.dispatchEvent(new Event('scroll'));
      await new Promise((r) => requestAnimationFrame(r));
      for (const row of el.querySelectorAll('[role=treeitem]:not([hidden])')) {
        rows.set(Number(row.dataset.nodeIndex), {
          precision: row.dataset.precision,
          matched: row.dataset.matched,
          level: Number(row.getAttribute('aria-level')),
          expanded: row.getAttribute('aria-expanded'),
        });
      }
      if (top > el.scrollHeight) break;
    }
    el.scrollTop = 0;
    return { total, nodeCount: Number(el.dataset.nodeCount), matchedCount: Number(el.dataset.matchedCount), rows: [...rows.entries()] };
  }, side);
}

/** Index of a node by its full name. */
export async function indexOf(page, side, name) {
  return page.evaluate(([s, n]) => window.__probelens.lastResult[s].names.indexOf(n), [side, name]);
}

// ---------------------------------------------------------------- what a load sent and read

/** Records what the page posts to the worker (type, side, the session named, file paths). */
export function recordSent(page) {
  return page.addInitScript(() => {
    window.__sent = [];
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (msg, ...rest) {
      if (msg && typeof msg === 'object') {
        window.__sent.push({ type: msg.type, side: msg.side, from: msg.from, path: msg.path, files: Array.isArray(msg.files) ? msg.files.map((f) => f.path) : undefined });
      }
      return post.call(this, msg, ...rest);
    };
  });
}

/** Starts a new record of the sent messages. */
export async function resetSent(page) {
  await page.evaluate(() => {
    window.__sent = [];
  });
}

/**
 * What the last load did: the requests that concern each core slot (adopted, or files sent), the bytes
 * of each lazy JSON file the core read, and whether the worker was (re)started.
 */
export async function lastLoad(page) {
  const { sent, reads } = await page.evaluate(() => ({ sent: window.__sent, reads: window.__probelens.lastResult?.jsonReads ?? [] }));
  const bytes = {};
  for (const r of reads) bytes[r.file] = (bytes[r.file] ?? 0) + r.length;
  const of = (slot) => sent.filter((m) => m.side === slot && /^(adoptSide|fileHandles|fileBegin)$/.test(m.type)).map((m) => m.type);
  return { npu: [...new Set(of('npu'))], bench: [...new Set(of('bench'))], bytes, inits: sent.filter((m) => m.type === 'init').length, sent };
}

/**
 * What a load that parses every rank folder under `root` once reads of it, as `lastLoad().bytes`
 * has it: each rank folder's dump.json (in slices), construct.json and stack.json (whole), by
 * `slot/path` relative to `root`.
 */
export function jsonSizes(slot, root) {
  const out = {};
  const walk = (dir, rel) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(path.join(dir, e.name), r);
      else if (/^(dump|construct|stack)\.json$/.test(e.name)) out[`${slot}/${r}`] = fs.statSync(path.join(dir, e.name)).size;
    }
  };
  walk(root, '');
  return out;
}

/** The visible card errors. */
export async function visibleErrors(page) {
  return page.evaluate(() => [...document.querySelectorAll('[id$="-error"]')].filter((e) => !e.hidden).map((e) => `${e.id}: ${e.textContent}`));
}

/** Chooses a folder for a side and waits for its load; returns the page state. */
export async function choose(page, side, dir, timeout = 60000) {
  const n = await loads(page);
  await page.setInputFiles(`#${side}-dir`, dir);
  return waitLoad(page, n, timeout);
}

/** Unfolds the inputs (folded into one bar once something is shown) so that their cards can be used. */
export async function openInputs(page) {
  if (await page.locator('#loadbar.compact').count()) await page.click('#load-toggle');
}

/** Clears a side and waits for the load that follows. */
export async function clear(page, side) {
  const n = await loads(page);
  await openInputs(page);
  await page.click(`#${side}-clear`);
  return waitLoad(page, n);
}

/**
 * Unmatches the selected real-tensor pair (NPU node `leaf.i`), undoes that with Ctrl+Z, and asserts
 * the pair is matched again with the metrics `cosines()` read before (numeric Cosine values).
 * @param {import('playwright-core').Page} page
 * @param {{i: number}} leaf
 * @param {() => Promise<string[]>} cosines
 */
export async function assertUnmatchUndoKeepsMetrics(page, leaf, cosines) {
  const before = await cosines();
  assert.ok(before.some((c) => /^-?\d/.test(c)), `numeric Cosine values: ${before}`);
  await page.click('#unmatch-btn');
  await page.waitForFunction((i) => window.__probelens.lastResult.npu.matched[i] === -1, leaf.i);
  await page.keyboard.press('Control+z');
  await page.waitForFunction((i) => window.__probelens.lastResult.npu.matched[i] >= 0, leaf.i);
  assert.deepEqual(await cosines(), before, 'the re-matched pair has its metrics again');
}
