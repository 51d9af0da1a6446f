// A load keeps the unchanged side (issue #7, "drop -> first graph"): when one folder is chosen and the
// other one is the folder the shown result's session holds (same core slot, same worker), the new
// session adopts that side from the shown one (`adoptSide`): nothing of it is sent, read or parsed
// again, and its lazy files (dump.json, tensors) stay readable. Everything else (a changed folder, a
// side that moves slot, a worker restart, a session the worker no longer has) sends the files as
// before. Checked on the real wasm core in Chromium: the worker's record of the JSON reads
// (`jsonReads`), the messages the page sent, and the result against a fresh load and msprobe's numbers.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticDump } from './synth.mjs';
import {
  FIX, requireBuild, launch, startServer, openPage, servedAllowlist, loads, waitLoad, resultSummary, reference, indexOf,
  recordSent, resetSent, lastLoad, visibleErrors, choose, clear, assertUnmatchUndoKeepsMetrics,
  assertMatchesReference, detailsOf, jsonSizes } from './helpers.mjs';

const MIX = path.join(FIX, 'qwen_mix_statistics');
const NPU_PROC = path.join(MIX, 'npu', 'step0', 'proc23598');
const BENCH_PROC = path.join(MIX, 'bench', 'step0', 'proc23368');
const RT = path.join(FIX, 'real_tensor');

/** Every column of the shown result that a fresh load must reproduce. */
async function fullResult(page) {
  return page.evaluate(() => {
    const r = window.__probelens.lastResult;
    const side = (g) => g && {
      names: g.names,
      parent: Array.from(g.parent),
      precision: Array.from(g.precision, (p) => (Number.isNaN(p) ? null : p)),
      matched: Array.from(g.matched),
      overflow: g.overflow,
    };
    return { graphType: r.graphType, task: r.task, nodeColors: r.nodeColors, diagnostics: r.diagnostics, npu: side(r.npu), bench: side(r.bench) };
  });
}

describe('a load adopts the unchanged side from the shown session', () => {
  let server;
  let browser;
  let tmp;
  /** The mix pair loaded fresh (both folders sent and parsed in one load). */
  let fresh;
  before(async () => {
    requireBuild();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-adopt-'));
    server = await startServer();
    browser = await launch();
    // The fresh load of both: the Bench folder alone (it sits in the core's npu slot), then the NPU
    // folder: the Bench side moves to the bench slot, so nothing can be adopted and both are read.
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await recordSent(page);
    await page.goto(server.url);
    await waitLoad(page, 0);
    await clear(page, 'bench');
    await clear(page, 'npu');
    assert.equal(await choose(page, 'bench', BENCH_PROC), 'ready');
    assert.equal((await resultSummary(page)).graphType, 'build');
    await resetSent(page);
    assert.equal(await choose(page, 'npu', NPU_PROC), 'ready');
    const l = await lastLoad(page);
    assert.deepEqual([l.npu, l.bench], [['fileHandles'], ['fileHandles']], 'both sides sent');
    assert.deepEqual(l.bytes, { ...jsonSizes('npu', NPU_PROC), ...jsonSizes('bench', BENCH_PROC) }, 'both folders\' JSON files read');
    fresh = await fullResult(page);
    // The user's folders run without the demo's mapping (issue 24, item 3): msprobe's numbers without one.
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0);
    assertClean();
    await context.close();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('NPU folder, then Bench folder: the NPU side is adopted (not sent, its dump.json not read again), the result equals a fresh load; a changed folder is read again', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await recordSent(page);
    await page.goto(server.url);
    await waitLoad(page, 0);
    await clear(page, 'bench');
    // The NPU folder alone: a build graph; the folder is read (checked, then built).
    await resetSent(page);
    assert.equal(await choose(page, 'npu', NPU_PROC), 'ready');
    assert.equal((await resultSummary(page)).graphType, 'build');
    let l = await lastLoad(page);
    assert.deepEqual(l.npu, ['fileHandles']);
    assert.deepEqual(l.bytes, jsonSizes('npu', NPU_PROC));

    // The Bench folder: the NPU side comes from the shown session.
    await resetSent(page);
    assert.equal(await choose(page, 'bench', BENCH_PROC), 'ready');
    l = await lastLoad(page);
    assert.deepEqual(l.npu, ['adoptSide'], 'the NPU side is adopted, none of its files sent');
    assert.deepEqual(l.bench, ['fileHandles']);
    assert.deepEqual(l.bytes, jsonSizes('bench', BENCH_PROC), 'only the Bench folder\'s JSON files are read');
    assert.equal(l.inits, 0, 'same worker');
    assert.deepEqual(await visibleErrors(page), []);
    assert.deepEqual(await fullResult(page), fresh, 'the same result as a fresh load of both folders');
    // Details of the adopted side's nodes (its stack and statistics come from the adopted dump).
    const mlp = await indexOf(page, 'npu', 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0');
    const d = await detailsOf(page, 'npu', mlp);
    assert.equal(d.node, 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0', d.text);
    assert.ok(await page.locator('#details-compare tr[data-side="npu"]').count() > 0, 'NPU tensor rows');

    // The NPU folder chosen again (a new choice of files): it is read again, the Bench side adopted.
    await resetSent(page);
    assert.equal(await choose(page, 'npu', NPU_PROC), 'ready');
    l = await lastLoad(page);
    assert.deepEqual(l.npu, ['fileHandles']);
    assert.deepEqual(l.bench, ['adoptSide']);
    assert.deepEqual(l.bytes, jsonSizes('npu', NPU_PROC), 'the changed side is read, the other is not');
    assert.deepEqual(await fullResult(page), fresh);

    // Clearing the Bench side: the NPU folder alone again, adopted (a build, nothing read).
    await resetSent(page);
    assert.equal(await clear(page, 'bench'), 'ready');
    l = await lastLoad(page);
    assert.deepEqual([l.npu, l.bench, l.bytes], [['adoptSide'], [], {}]);
    assert.equal((await resultSummary(page)).graphType, 'build');
    assertClean();
    await context.close();
  });

  test('a build view freed for the next load is built again when that load fails: same result, same details', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await recordSent(page);
    await page.goto(server.url);
    await waitLoad(page, 0);
    await clear(page, 'bench');
    assert.equal(await choose(page, 'npu', NPU_PROC), 'ready');
    assert.equal((await resultSummary(page)).graphType, 'build');
    const shown = await fullResult(page);
    const mlp = await indexOf(page, 'npu', 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0');
    const before = await detailsOf(page, 'npu', mlp);
    assert.equal(before.node, 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0', before.text);
    await detailsOf(page, 'npu', 0);

    // A broken Bench folder: the NPU side is adopted, which frees the shown build's graph; the load
    // fails and the build stays shown.
    const bad = path.join(tmp, 'bad-bench');
    fs.cpSync(BENCH_PROC, bad, { recursive: true });
    fs.writeFileSync(path.join(bad, 'dump.json'), '{"task": "statistics", "data": {"x": [1, 2');
    await resetSent(page);
    assert.equal(await choose(page, 'bench', bad), 'ready');
    assert.deepEqual((await lastLoad(page)).npu, ['adoptSide']);
    assert.equal(await page.evaluate(() => window.__probelens.suspends), 1, 'the shown build was freed');
    const errors = await visibleErrors(page);
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(errors[0], /^bench-error: bad-bench\/dump\.json: /);
    assert.deepEqual(await fullResult(page), shown, 'the shown result is kept');
    // Its details: the worker builds it again on this first use.
    assert.deepEqual(await detailsOf(page, 'npu', mlp), before);

    // The good Bench folder: adopted from the rebuilt build, the same compare as a fresh load.
    assert.equal(await choose(page, 'bench', BENCH_PROC), 'ready');
    assert.deepEqual(await visibleErrors(page), []);
    assert.equal(await page.evaluate(() => window.__probelens.suspends), 2);
    assert.deepEqual(await fullResult(page), fresh);
    assertClean();
    await context.close();
  });

  test('after a failed load, a worker restart or a session the worker does not have, the files are sent again', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await recordSent(page);
    await page.goto(server.url);
    await waitLoad(page, 0);
    await clear(page, 'bench');
    await choose(page, 'npu', NPU_PROC);
    await choose(page, 'bench', BENCH_PROC);
    const shown = await fullResult(page);
    assert.deepEqual(shown, fresh);

    // A broken NPU folder: the load fails (the error names the side), the shown result and its session stay.
    const bad = path.join(tmp, 'bad');
    fs.cpSync(NPU_PROC, bad, { recursive: true });
    fs.writeFileSync(path.join(bad, 'dump.json'), '{"task": "statistics", "data": {"x": [1, 2');
    await resetSent(page);
    assert.equal(await choose(page, 'npu', bad), 'ready');
    const errors = await visibleErrors(page);
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(errors[0], /^npu-error: bad\/dump\.json: /);
    assert.deepEqual(await fullResult(page), shown, 'the shown result is kept');
    // The next load still adopts the Bench side from the shown session (the failed one was discarded).
    await resetSent(page);
    assert.equal(await choose(page, 'npu', NPU_PROC), 'ready');
    let l = await lastLoad(page);
    assert.deepEqual([l.npu, l.bench], [['fileHandles'], ['adoptSide']]);
    assert.deepEqual(l.bytes, jsonSizes('npu', NPU_PROC));
    assert.deepEqual(await visibleErrors(page), []);
    assert.deepEqual(await fullResult(page), fresh);

    // The page names a session the worker does not hold (as if the page's record were stale): the
    // worker refuses the adoption and the page sends the files.
    await page.evaluate(() => {
      window.__probelens.state.sessionId += 1000;
    });
    await resetSent(page);
    assert.equal(await choose(page, 'npu', NPU_PROC), 'ready');
    l = await lastLoad(page);
    assert.deepEqual([l.npu, l.bench], [['fileHandles'], ['adoptSide', 'fileHandles']], 'adoption refused, Bench files sent');
    assert.deepEqual(l.bytes, { ...jsonSizes('npu', NPU_PROC), ...jsonSizes('bench', BENCH_PROC) });
    assert.deepEqual(await fullResult(page), fresh);

    // A load cancelled by a newer one: the worker is restarted and the shown session goes with it, so
    // the next load sends both sides (the big NPU folder keeps the worker busy until the new choice).
    const big = path.join(tmp, 'big');
    writeSyntheticDump(big, { modules: 1000, apisPerModule: 49 });
    let n = await loads(page);
    await resetSent(page);
    await page.setInputFiles('#npu-dir', big);
    await page.waitForFunction(() => /Checking NPU files|Reading NPU files/.test(document.getElementById('progress-stage').textContent ?? ''));
    await page.setInputFiles('#npu-dir', NPU_PROC);
    await page.waitForFunction((k) => Number(document.body.dataset.loads ?? 0) > k && document.body.dataset.state === 'ready', n, { timeout: 60000 });
    l = await lastLoad(page);
    assert.equal(l.inits, 1, 'the worker was restarted');
    const afterRestart = l.sent.slice(l.sent.findIndex((m) => m.type === 'init'));
    assert.deepEqual(afterRestart.filter((m) => m.type === 'adoptSide'), [], 'nothing adopted in the new worker');
    assert.ok(afterRestart.some((m) => m.type === 'fileHandles' && m.side === 'bench'), 'the Bench side sent again');
    assert.deepEqual(l.bytes, { ...jsonSizes('npu', NPU_PROC), ...jsonSizes('bench', BENCH_PROC) });
    assert.deepEqual(await visibleErrors(page), []);
    assert.deepEqual(await fullResult(page), fresh);
    // And the new worker's session is adopted from in turn.
    await resetSent(page);
    assert.equal(await choose(page, 'npu', NPU_PROC), 'ready');
    l = await lastLoad(page);
    assert.deepEqual([l.bench, l.bytes], [['adoptSide'], jsonSizes('npu', NPU_PROC)]);
    assertClean();
    await context.close();
  });

  test('real tensors of an adopted side are read from its files (the compare needs them after the adoption)', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await recordSent(page);
    await page.goto(server.url);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.uncheck('#opt-lm');
    await waitLoad(page, n);
    await clear(page, 'bench');
    const npu = path.join(RT, 'npu', 'step0', 'proc9305');
    const bench = path.join(RT, 'bench', 'step0', 'proc9393');
    assert.equal(await choose(page, 'npu', npu, 120000), 'ready');
    const built = await page.evaluate(() => ({ type: window.__probelens.lastResult.graphType, reads: window.__probelens.lastResult.tensorReads }));
    assert.deepEqual(built, { type: 'build', reads: [] }, 'a build reads no tensor');
    await resetSent(page);
    assert.equal(await choose(page, 'bench', bench, 120000), 'ready');
    const l = await lastLoad(page);
    assert.deepEqual([l.npu, l.bytes], [['adoptSide'], jsonSizes('bench', bench)]);
    const r = await page.evaluate(() => ({ reads: window.__probelens.lastResult.tensorReads, diagnostics: window.__probelens.lastResult.diagnostics }));
    // Unreadable tensors would be 'unsupported' metrics with a warning; msprobe's verdicts need them all.
    assert.deepEqual(r.diagnostics.filter((d) => /\.pt|tensor/i.test(d.message)), []);
    const npuReads = r.reads.filter((p) => p.startsWith('npu/dump_tensor_data/'));
    assert.ok(npuReads.length > 0, `the adopted NPU side's tensors were read: ${r.reads}`);
    for (const p of npuReads) assert.ok(fs.existsSync(path.join(npu, p.slice('npu/'.length))), p);
    const sum = await resultSummary(page);
    const rn = reference('real_tensor', 'nomap', 0, 0, 'NPU');
    assert.deepEqual([sum.npu.nodes, sum.npu.matched, sum.npu.precision], [rn.nodes, rn.matched, rn.precision_index], 'msprobe\'s real-tensor verdicts');
    // The details of a compared node show the metrics computed from the adopted side's tensors, and a
    // manual re-match reads them again (after an unmatch and undo).
    const leaf = await page.evaluate(() => {
      const g = window.__probelens.lastResult.npu;
      const i = g.names.findIndex((nm, k) => g.subtreeEnd[k] === k + 1 && g.matched[k] >= 0 && nm.startsWith('Functional.linear.'));
      return { i, name: g.names[i] };
    });
    assert.ok(leaf.i > 0);
    const cosines = async () => {
      assert.equal((await detailsOf(page, 'npu', leaf.i)).node, leaf.name);
      await page.waitForFunction(() => document.querySelectorAll('#details-compare tr[data-side="npu"] td[data-field="Cosine"]').length > 0);
      return page.locator('#details-compare tr[data-side="npu"] td[data-field="Cosine"]').allTextContents();
    };
    await assertUnmatchUndoKeepsMetrics(page, leaf, cosines);
    assertClean();
    await context.close();
  });
});
