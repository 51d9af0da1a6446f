// The page with many rank folders (issue 25, item 5): a tree of 16 rank folders per side, made at test
// time from a real rank folder of tests/fixtures/qwen_mix_statistics, is dropped on the cards. The
// rank selector shows within 1 s of the drop (measured in the page), before any dump.json is parsed:
// the folders are listed from the paths alone, and only the chosen rank is parsed, with progress.
// A rank whose dump.json is truncated shows its error on its own entry of the selector (marked, the
// message as its tooltip, the message on the card when chosen), and the other ranks stay usable.
// Real wasm core in Chromium. The page with the broken entry: tests/out/ranks-broken.png
// (www/screenshots/ with UPDATE_SCREENSHOTS=1, for README-page.md).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  FIX, ROOT, OUT, requireBuild, launch, startServer, openPage, servedAllowlist, loads, waitLoad, resultSummary, visibleErrors,
} from './helpers.mjs';

const MIX = path.join(FIX, 'qwen_mix_statistics');
const RANK = { npu: path.join(MIX, 'npu', 'step0', 'proc23598'), bench: path.join(MIX, 'bench', 'step0', 'proc23368') };
// README-page.md's screenshot is refreshed with UPDATE_SCREENSHOTS=1; other runs write tests/out/.
const SHOTS = process.env.UPDATE_SCREENSHOTS ? path.join(ROOT, 'www', 'screenshots') : OUT;
const RANKS = 16;
const BROKEN = 9;

/**
 * `<tmp>/<side>/rank0 … rank15`, each a copy of the fixture's rank folder; the NPU rank 9's dump.json
 * cut in half. `<tmp>/first-broken/npu`: the same NPU tree with rank 0's dump.json cut in half too.
 */
function makeTree(tmp) {
  for (const side of ['npu', 'bench']) {
    for (let r = 0; r < RANKS; r++) {
      const dir = path.join(tmp, side, `rank${r}`);
      fs.mkdirSync(dir, { recursive: true });
      for (const f of ['construct.json', 'dump.json', 'stack.json']) fs.copyFileSync(path.join(RANK[side], f), path.join(dir, f));
    }
  }
  truncate(path.join(tmp, 'npu', `rank${BROKEN}`, 'dump.json'));
  // A second NPU tree whose first rank (the one a fresh load runs) is the broken one.
  fs.cpSync(path.join(tmp, 'npu'), path.join(tmp, 'first-broken', 'npu'), { recursive: true });
  truncate(path.join(tmp, 'first-broken', 'npu', 'rank0', 'dump.json'));
}

/** Cuts a file in half. @param {string} file */
function truncate(file) {
  const bytes = fs.readFileSync(file);
  fs.writeFileSync(file, bytes.subarray(0, Math.floor(bytes.length / 2)));
}

/**
 * Drops a folder on a side's card as a browser does: headless drops cannot carry directories, so the
 * folder's files are chosen in a scratch `<input webkitdirectory>` and the drop gets a DataTransfer
 * look-alike whose item returns FileSystemEntry look-alikes over those File objects. Resolves with the
 * time (ms, measured in the page) from the drop to the rank selector listing `expect` ranks.
 */
async function dropTree(page, side, dir, expect) {
  await page.evaluate(() => {
    const el = document.createElement('input');
    el.type = 'file';
    el.id = 'scratch-dir';
    el.webkitdirectory = true;
    el.multiple = true;
    el.hidden = true;
    document.body.append(el);
  });
  await page.setInputFiles('#scratch-dir', dir);
  return page.evaluate(([side, expect]) => new Promise((resolve) => {
    const input = /** @type {HTMLInputElement} */ (document.getElementById('scratch-dir'));
    const files = Array.from(input.files ?? []);
    input.remove();
    /** @type {Map<string, any>} */
    const dirs = new Map();
    const dirEntry = (fullPath) => {
      let d = dirs.get(fullPath);
      if (d) return d;
      const children = [];
      d = {
        isFile: false, isDirectory: true, name: fullPath.split('/').pop(), fullPath, children,
        createReader: () => {
          let pos = 0;
          return { readEntries: (ok) => { const batch = children.slice(pos, pos + 10); pos += batch.length; setTimeout(() => ok(batch)); } };
        },
      };
      dirs.set(fullPath, d);
      const parent = fullPath.slice(0, fullPath.lastIndexOf('/'));
      if (parent) dirEntry(parent).children.push(d);
      return d;
    };
    for (const f of files) {
      const full = `/${f.webkitRelativePath}`;
      const parent = dirEntry(full.slice(0, full.lastIndexOf('/')));
      parent.children.push({ isFile: true, isDirectory: false, name: f.name, fullPath: full, file: (ok) => ok(f) });
    }
    const root = dirEntry(`/${files[0].webkitRelativePath.split('/')[0]}`);
    const dt = { items: [{ kind: 'file', webkitGetAsEntry: () => root, getAsFile: () => null }], files: [] };
    const sel = /** @type {HTMLSelectElement} */ (document.getElementById('rank-select'));
    const wrap = document.getElementById('rank-wrap');
    const listed = () => !wrap.hidden && sel.options.length === expect;
    const t0 = performance.now();
    const obs = new MutationObserver(() => {
      if (!listed()) return;
      obs.disconnect();
      resolve(performance.now() - t0);
    });
    obs.observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['hidden'] });
    // Never listed: a time that fails the test instead of a hang.
    setTimeout(() => {
      obs.disconnect();
      resolve(Infinity);
    }, 15000);
    const ev = new Event('drop', { bubbles: true, cancelable: true });
    Object.defineProperty(ev, 'dataTransfer', { value: dt });
    document.getElementById(`${side}-card`).dispatchEvent(ev);
  }), [side, expect]);
}

/** The files the core read for the last run (its `jsonReads`), by `slot/path`, each once. */
async function readFiles(page) {
  const reads = await page.evaluate(() => window.__probelens.lastResult.jsonReads.map((r) => r.file));
  return [...new Set(reads)].sort();
}

/** What the rank selector shows: its value, and the entries marked as broken with their message. */
async function rankSelector(page) {
  return page.evaluate(() => {
    const sel = /** @type {HTMLSelectElement} */ (document.getElementById('rank-select'));
    return {
      value: sel.value,
      count: sel.options.length,
      marked: Array.from(sel.options).filter((o) => o.dataset.error).map((o) => ({ value: o.value, text: o.textContent, title: o.title })),
    };
  });
}

/** Chooses a rank and waits for its load. */
async function chooseRank(page, rank) {
  const n = await loads(page);
  await page.selectOption('#rank-select', String(rank));
  return waitLoad(page, n);
}

describe('many rank folders', () => {
  let server;
  let browser;
  let tmp;
  before(async () => {
    requireBuild();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-ranks-'));
    makeTree(tmp);
    server = await startServer();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('16 rank folders: the selector within 1 s of the drop, only the chosen rank parsed; a broken rank is marked and the others stay usable', async (t) => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    assert.equal(await waitLoad(page, 0), 'ready');
    // The progress line while the load runs (each text it shows).
    await page.evaluate(() => {
      window.__progress = [];
      const el = document.getElementById('progress-stage');
      new MutationObserver(() => window.__progress.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
    });

    // (1) The NPU tree: listed at once, rank 0 built alone (it replaces the demo), only its folder read.
    let n = await loads(page);
    const npuMs = await dropTree(page, 'npu', path.join(tmp, 'npu'), RANKS);
    assert.ok(npuMs < 1000, `the rank selector shows ${npuMs.toFixed(0)} ms after the drop`);
    assert.equal(await waitLoad(page, n), 'ready');
    assert.equal((await resultSummary(page)).graphType, 'build');
    let rs = await rankSelector(page);
    assert.deepEqual([rs.value, rs.count, rs.marked], ['0', RANKS, []]);
    assert.deepEqual(await readFiles(page), ['npu/rank0/construct.json', 'npu/rank0/dump.json', 'npu/rank0/stack.json'], 'only the chosen rank folder is read');
    const progress = await page.evaluate(() => window.__progress);
    assert.ok(progress.some((p) => /^Reading NPU files — .+ of .+/.test(p)), `the chosen rank's reading shows with its bytes: ${JSON.stringify(progress)}`);
    assert.ok(!progress.some((p) => /^Checking NPU files/.test(p)), 'the tree is not parsed up front');

    // (2) The Bench tree: compared, rank 0; then rank 5, only rank 5's folders read.
    n = await loads(page);
    const benchMs = await dropTree(page, 'bench', path.join(tmp, 'bench'), RANKS);
    assert.ok(benchMs < 1000, `${benchMs.toFixed(0)} ms`);
    t.diagnostic(`rank selector after the drop: NPU tree ${npuMs.toFixed(0)} ms, Bench tree ${benchMs.toFixed(0)} ms`);
    assert.equal(await waitLoad(page, n), 'ready');
    assert.equal((await resultSummary(page)).graphType, 'compare');
    assert.equal(await chooseRank(page, 5), 'ready');
    const five = await resultSummary(page);
    assert.equal(five.graphType, 'compare');
    assert.equal(await page.evaluate(() => window.__probelens.state.runOpts.rank), 5);
    assert.deepEqual(await readFiles(page), ['bench/rank5/construct.json', 'bench/rank5/dump.json', 'bench/rank5/stack.json',
      'npu/rank5/construct.json', 'npu/rank5/dump.json', 'npu/rank5/stack.json']);
    assert.deepEqual(await visibleErrors(page), []);

    // (3) The broken rank: its message on its own entry and on the NPU card; rank 5 stays shown and usable.
    assert.equal(await chooseRank(page, BROKEN), 'ready');
    rs = await rankSelector(page);
    assert.equal(rs.value, '5', 'the selector is back on the rank shown');
    assert.equal(rs.marked.length, 1, JSON.stringify(rs.marked));
    assert.equal(rs.marked[0].value, String(BROKEN));
    assert.match(rs.marked[0].text, /⚠/);
    assert.match(rs.marked[0].title, new RegExp(`^npu/rank${BROKEN}/dump\\.json: `), rs.marked[0].title);
    const errs = await visibleErrors(page);
    assert.equal(errs.length, 1, JSON.stringify(errs));
    assert.match(errs[0], new RegExp(`^npu-error: npu/rank${BROKEN}/dump\\.json: `));
    assert.deepEqual(await resultSummary(page), five, 'rank 5 is still shown');
    assert.equal(await page.evaluate(() => window.__probelens.state.runOpts.rank), 5);
    // A screenshot of the page with the selector's entries shown (headless screenshots do not draw
    // a select's popup, so it is a list box for the picture), for README-page.md.
    await page.evaluate((n) => {
      /** @type {HTMLSelectElement} */ (document.getElementById('rank-select')).size = n;
    }, RANKS + 1);
    await page.screenshot({ path: path.join(SHOTS, 'ranks-broken.png') });
    await page.locator('#rank-wrap').screenshot({ path: path.join(OUT, 'ranks-selector-error.png') });
    await page.evaluate(() => {
      /** @type {HTMLSelectElement} */ (document.getElementById('rank-select')).size = 0;
    });
    // Chosen again: the message again (on the card), the entry still marked.
    assert.equal(await chooseRank(page, BROKEN), 'ready');
    assert.match((await visibleErrors(page)).join('\n'), new RegExp(`npu/rank${BROKEN}/dump\\.json`));

    // (4) Another rank loads; the card's message goes, the broken entry stays marked.
    assert.equal(await chooseRank(page, 12), 'ready');
    assert.equal(await page.evaluate(() => window.__probelens.state.runOpts.rank), 12);
    assert.equal((await resultSummary(page)).graphType, 'compare');
    assert.deepEqual(await visibleErrors(page), []);
    rs = await rankSelector(page);
    assert.deepEqual([rs.value, rs.marked.map((m) => m.value)], ['12', [String(BROKEN)]]);
    const leaf = await page.evaluate(() => window.__probelens.lastResult.npu.names.indexOf('Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0'));
    assert.ok(leaf > 0);
    await page.evaluate((i) => window.__probelens.select('npu', i), leaf);
    await page.waitForFunction(() => document.querySelectorAll('#details-compare tr[data-side="npu"]').length > 0);
    assertClean();
    await context.close();
  });

  test('a fresh tree whose first rank is broken: its ranks stay listed (also after a language switch) and another rank loads', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    assert.equal(await waitLoad(page, 0), 'ready');
    const demo = await resultSummary(page);
    let n = await loads(page);
    const ms = await dropTree(page, 'npu', path.join(tmp, 'first-broken', 'npu'), RANKS);
    assert.ok(ms < 1000, `${ms.toFixed(0)} ms`);
    await waitLoad(page, n);
    let rs = await rankSelector(page);
    assert.deepEqual([rs.value, rs.count, rs.marked.map((m) => m.value)], ['0', RANKS, ['0']]);
    assert.match(rs.marked[0].title, /^npu\/rank0\/dump\.json: /);
    assert.equal(await page.evaluate(() => document.getElementById('rank-select').classList.contains('has-error')), true, 'the chosen entry is the broken one');
    assert.match((await visibleErrors(page)).join('\n'), /^npu-error: npu\/rank0\/dump\.json: /m);
    assert.deepEqual(await resultSummary(page), demo, 'what was shown stays shown');
    // A language switch draws the selectors again: the tree's ranks, still marked.
    await page.click('#lang-btn');
    rs = await rankSelector(page);
    assert.equal(rs.count, RANKS);
    assert.match(rs.marked[0].text, /⚠ 无法读取/);
    await page.click('#lang-btn');
    // Another rank: the tree loads (its build graph), rank 0 still marked.
    assert.equal(await chooseRank(page, 1), 'ready');
    assert.equal((await resultSummary(page)).graphType, 'build');
    assert.equal(await page.evaluate(() => window.__probelens.state.runOpts.rank), 1);
    assert.deepEqual(await visibleErrors(page), []);
    rs = await rankSelector(page);
    assert.deepEqual([rs.value, rs.marked.map((m) => m.value)], ['1', ['0']]);
    assert.deepEqual(await readFiles(page), ['npu/rank1/construct.json', 'npu/rank1/dump.json', 'npu/rank1/stack.json']);
    assertClean();
    await context.close();
  });
});
