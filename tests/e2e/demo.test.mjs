// The bundled demo and the user's own folders: a folder chosen for one side while the other side still
// holds the demo's folder replaces the demo as a whole. The demo's other side is cleared (as its
// *Clear* does), so the first load is the build graph of the user's folder, never a compare with an
// unrelated demo dump (whose layout may not even agree: the demo is a `step0/proc*` tree), and the
// folder chosen next for the other side is compared with it, the first side adopted from that
// build's session (not read again). The demo's mapping is the demo's own: it leaves the choices and
// `-lm` turns off, so the user's folders are compared as msprobe does without a mapping (issue 24,
// item 3). The *Demo* button brings the whole demo pair back, with its mapping. Real wasm core in Chromium; the numbers are msprobe's reference summaries.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  FIX, requireBuild, launch, startServer, openPage, servedAllowlist, loads, waitLoad, resultSummary, reference,
  recordSent, resetSent, lastLoad, visibleErrors, choose, assertMatchesReference, jsonSizes,
} from './helpers.mjs';

// A step/rank tree on both sides (two steps, two ranks); its layer_mapping.yaml is the demo's (the same file).
const TWO = path.join(FIX, 'qwen_two_ranks');
const MIX = path.join(FIX, 'qwen_mix_statistics');
const BENCH_PROC = path.join(MIX, 'bench', 'step0', 'proc23368');

/** The entries of a `jsonSizes` map under one folder. @param {Record<string, number>} sizes @param {string} prefix */
const inFolder = (sizes, prefix) => Object.fromEntries(Object.entries(sizes).filter(([k]) => k.startsWith(prefix)));

/** What the two side cards and the mapping card show. */
async function cards(page) {
  return page.evaluate(() => ({
    npu: document.getElementById('npu-src').textContent,
    bench: document.getElementById('bench-src').textContent,
    warn: [...document.querySelectorAll('[id$="-warn"]')].filter((e) => !e.hidden).map((e) => e.id),
    mapping: /** @type {HTMLSelectElement} */ (document.getElementById('mapping-select')).value,
    lm: /** @type {HTMLInputElement} */ (document.getElementById('opt-lm')).checked,
  }));
}

/** Asserts the demo pair is shown, as on first open. */
async function assertDemo(page) {
  assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'map', 0, 0);
  const c = await cards(page);
  assert.match(c.npu, /^npu\/step0 — 3 files/);
  assert.match(c.bench, /^bench\/step0 — 3 files/);
  assert.deepEqual([c.mapping, c.lm], ['demo', true], 'the demo\'s mapping, -lm on');
  assert.deepEqual(await visibleErrors(page), []);
}

describe('the demo and the user\'s own folders', () => {
  let server;
  let browser;
  before(async () => {
    requireBuild();
    server = await startServer();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('an NPU folder chosen over the demo is shown alone (build), whatever the demo\'s layout; the Bench folder then compares, the NPU side adopted; Demo restores the pair', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await recordSent(page);
    await page.goto(server.url);
    assert.equal(await waitLoad(page, 0), 'ready');
    await assertDemo(page);

    // (1) A step/rank tree for the NPU side: the demo's Bench side is a step0/proc* tree, which it
    // could not be compared with (the core: "inconsistent (Steps vs Ranks)"). It replaces the demo:
    // a build graph of this folder, no message, the Bench card empty, the mapping kept.
    await resetSent(page);
    assert.equal(await choose(page, 'npu', path.join(TWO, 'npu')), 'ready');
    const built = await resultSummary(page);
    assert.equal(built.graphType, 'build');
    assert.equal(built.bench, null);
    assert.equal(built.npu.nodes, reference('qwen_two_ranks', 'build_npu', 0, 0, 'NPU').nodes);
    assert.deepEqual(await visibleErrors(page), []);
    assert.deepEqual(await page.evaluate(() => window.__probelens.errors), []);
    const c = await cards(page);
    assert.match(c.npu, /^npu — 12 files/);
    assert.equal(c.bench, 'drop a dump folder here', 'the Bench card is empty');
    assert.deepEqual(c.warn, []);
    assert.deepEqual([c.mapping, c.lm], ['', false], 'the demo\'s mapping is not applied to the user\'s folder');
    assert.equal(await page.isVisible('#bench-pane'), false, 'a single pane');
    assert.match(await page.locator('#npu-title').textContent(), /Debug \/ NPU — build graph/);
    assert.deepEqual(await page.locator('#step-select option').evaluateAll((os) => os.map((o) => o.value)), ['0', '1']);
    assert.deepEqual(await page.locator('#rank-select option').evaluateAll((os) => os.map((o) => o.value)), ['0', '1']);
    let l = await lastLoad(page);
    assert.deepEqual([l.npu, l.bench], [['fileHandles'], []], 'only the NPU folder is sent, by handle');
    assert.deepEqual(l.bytes, inFolder(jsonSizes('npu', path.join(TWO, 'npu')), 'npu/step0/rank0/'), 'only the chosen rank folder\'s JSON files are read (the tree is listed, not parsed)');

    // (2) The Bench folder: the compare, with the NPU side adopted from the build's session (not sent,
    // its dump.json files not read again); msprobe's numbers without a mapping.
    await resetSent(page);
    assert.equal(await choose(page, 'bench', path.join(TWO, 'bench')), 'ready');
    l = await lastLoad(page);
    assert.deepEqual(l.npu, ['adoptSide'], 'the NPU side is adopted, none of its files sent');
    assert.deepEqual(l.bench, ['fileHandles']);
    assert.deepEqual(l.bytes, inFolder(jsonSizes('bench', path.join(TWO, 'bench')), 'bench/step0/rank0/'), 'only the chosen Bench rank folder\'s JSON files are read');
    assert.equal(l.inits, 0, 'same worker');
    assert.deepEqual(await visibleErrors(page), []);
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'nomap', 0, 0);
    // A re-run on another rank (rank 1) reads that rank's folders of both sides, each once; back on
    // rank 0, nothing is read (a parsed rank folder is kept).
    let n = await loads(page);
    await page.selectOption('#rank-select', '1');
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'nomap', 0, 1);
    assert.deepEqual((await lastLoad(page)).bytes, {
      ...inFolder(jsonSizes('npu', path.join(TWO, 'npu')), 'npu/step0/rank1/'),
      ...inFolder(jsonSizes('bench', path.join(TWO, 'bench')), 'bench/step0/rank1/'),
    }, 'rank 1\'s folders read, each once');
    n = await loads(page);
    await page.selectOption('#rank-select', '0');
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'nomap', 0, 0);
    assert.deepEqual((await lastLoad(page)).bytes, {}, 'a re-run of a parsed rank reads nothing');

    // (3) The Demo button: the whole demo pair again, with its mapping.
    n = await loads(page);
    await page.click('#demo-btn');
    assert.equal(await waitLoad(page, n), 'ready');
    await assertDemo(page);
    assert.deepEqual(await page.evaluate(() => window.__probelens.errors), []);
    assertClean();
    await context.close();
  });

  test('a Bench folder chosen over the demo is shown alone too (the demo\'s NPU side cleared); a broken folder leaves the demo shown', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-demo-'));
    try {
      const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
      await page.goto(server.url);
      assert.equal(await waitLoad(page, 0), 'ready');
      const demo = await resultSummary(page);

      // A broken NPU folder: the message on its card, the demo's result still shown (its Bench side is
      // no longer chosen: the next folder chosen does not meet the demo).
      const bad = path.join(tmp, 'bad');
      fs.cpSync(path.join(MIX, 'npu', 'step0', 'proc23598'), bad, { recursive: true });
      fs.writeFileSync(path.join(bad, 'dump.json'), '{"task": "statistics", "data": {"x": [1, 2');
      assert.equal(await choose(page, 'npu', bad), 'ready');
      const errors = await visibleErrors(page);
      assert.equal(errors.length, 1, errors.join('\n'));
      assert.match(errors[0], /^npu-error: bad\/dump\.json: /);
      assert.deepEqual(await resultSummary(page), demo, 'the shown result is kept');
      assert.equal((await cards(page)).bench, 'drop a dump folder here');
      assert.deepEqual(await page.evaluate(() => window.__probelens.errors.map((e) => e.where)), ['npu']);

      // The Demo button, then a Bench folder (a proc folder, the demo's Bench layout differs too): the
      // demo's NPU side is cleared and the Bench folder shown alone, in the Bench title.
      let n = await loads(page);
      await page.click('#demo-btn');
      assert.equal(await waitLoad(page, n), 'ready');
      await assertDemo(page);
      assert.equal(await choose(page, 'bench', BENCH_PROC), 'ready');
      const built = await resultSummary(page);
      assert.equal(built.graphType, 'build');
      assert.equal(built.bench, null);
      assert.equal(built.npu.nodes, reference('qwen_mix_statistics', 'bench_vs_bench', 0, 0, 'NPU').nodes);
      assert.deepEqual(await visibleErrors(page), []);
      const c = await cards(page);
      assert.equal(c.npu, 'drop a dump folder here', 'the NPU card is empty');
      assert.match(c.bench, /^proc23368 — 3 files/);
      assert.match(await page.locator('#npu-title').textContent(), /Bench — build graph/);
      // The NPU folder next: the compare (msprobe's numbers without a mapping: the demo's is not applied).
      assert.equal(await choose(page, 'npu', path.join(MIX, 'npu', 'step0', 'proc23598')), 'ready');
      assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0);
      assert.deepEqual(await visibleErrors(page), []);
      // Choosing a side's folder again with no demo left clears nothing: still a compare.
      assert.equal(await choose(page, 'bench', BENCH_PROC), 'ready');
      assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0);
      n = await loads(page);
      await page.click('#demo-btn');
      assert.equal(await waitLoad(page, n), 'ready');
      await assertDemo(page);
      assertClean();
      await context.close();
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
