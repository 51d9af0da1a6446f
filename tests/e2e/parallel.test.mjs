// Browser tests of the parallel merge in the page (issue #6, page part): the TP fixture's two rank
// folders per side are merged with rank size 2, TP 2, PP 1 (msprobe's compare_tp2 variant) through
// the Options panel's "Parallel merge" group, and the merged graphs are compared with msprobe's own
// .vis.db of that variant (reference/compare_tp2/summary.json, written by summarize.py next to the
// fixture): node names, match counts, precision histogram. A bad parameter (TP 3 with 2 ranks) shows
// the CLI's message next to the group and keeps the merged result. Served site and file://.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  FIX, SINGLE_URL, requireBuild, launch, startServer, openPage, servedAllowlist, fileAllowlist, loads, waitLoad,
  resultSummary, reference, openInputs,
} from './helpers.mjs';

const TP = path.join(FIX, 'parallel_tp');

/** Types `value` into a parallel-merge input and presses Enter (a change); waits for the re-run. */
async function setParam(page, id, value) {
  const n = await loads(page);
  await openInputs(page); // the inputs fold into one bar once something is shown
  await page.fill(`#${id}`, value);
  await page.press(`#${id}`, 'Enter');
  return waitLoad(page, n, 60000);
}

/** The page's node names per side, sorted. */
const names = (page) => page.evaluate(() => {
  const r = window.__probelens.lastResult;
  return { npu: [...r.npu.names].sort(), bench: r.bench ? [...r.bench.names].sort() : null };
});

const parallelError = (page) => page.evaluate(() => {
  const el = document.getElementById('parallel-error');
  return el.hidden ? '' : el.textContent;
});

const rankOptions = (page) => page.evaluate(() => [...document.querySelectorAll('#rank-select option')].map((o) => o.textContent));

async function checkTp(page) {
  assert.equal(await waitLoad(page, 0), 'ready');
  // msprobe's variant has no layer mapping (the demo turns it on).
  let n = await loads(page);
  await page.uncheck('#opt-lm');
  await waitLoad(page, n);
  n = await loads(page);
  await page.setInputFiles('#npu-dir', path.join(TP, 'npu'));
  await waitLoad(page, n, 60000);
  n = await loads(page);
  await page.setInputFiles('#bench-dir', path.join(TP, 'bench'));
  assert.equal(await waitLoad(page, n, 60000), 'ready');
  // Without a merge: rank folders 0 and 1.
  assert.deepEqual(await rankOptions(page), ['rank 0', 'rank 1']);
  assert.equal(await page.evaluate(() => window.__probelens.lastResult.merge), undefined);

  // One parameter after the other, as typed: the CLI's messages until the set is complete.
  await setParam(page, 'opt-rank-size', '2');
  assert.equal(await parallelError(page), '--rank_size: In the graph merge task, parameters "tp/pp/rank_size" is required!');
  await setParam(page, 'opt-tp', '2');
  assert.match(await parallelError(page), /parameters "tp\/pp\/rank_size" is required!$/);
  assert.equal(await setParam(page, 'opt-pp', '1'), 'ready');
  assert.equal(await parallelError(page), '', 'no message once the parameters are complete');

  // The merged graphs equal msprobe's compare_tp2 output.
  const merge = await page.evaluate(() => window.__probelens.lastResult.merge);
  assert.deepEqual(merge, { ranks: [0], rank: 0 }, 'one TP group: one merged graph, exported as rank 0');
  assert.deepEqual(await rankOptions(page), ['merged rank 0'], 'the rank selector lists the merged graphs');
  assert.equal(await page.isHidden('#rank-wrap'), false);
  // A language switch draws the selectors again: still the merged graphs.
  await page.click('#lang-btn');
  assert.deepEqual(await rankOptions(page), ['合并卡 0']);
  await page.click('#lang-btn');
  assert.deepEqual(await rankOptions(page), ['merged rank 0']);
  const sum = await resultSummary(page);
  const got = await names(page);
  for (const [side, source] of [['npu', 'NPU'], ['bench', 'Bench']]) {
    const ref = reference('parallel_tp', 'compare_tp2', 0, 0, source);
    assert.deepEqual(got[side], ref.names, `${source} node names`);
    assert.equal(sum[side].nodes, ref.nodes, `${source} nodes`);
    assert.equal(sum[side].matched, ref.matched, `${source} matched`);
    assert.deepEqual(sum[side].precision, ref.precision_index, `${source} precision histogram`);
  }
  assert.equal(sum.graphType, 'compare');

  // A bad parameter: TP 3 with 2 ranks. The CLI's message next to the group; the merged result stays.
  assert.equal(await setParam(page, 'opt-tp', '3'), 'ready');
  assert.equal(await parallelError(page), 'npu: [NPU] The parallel param "tp" must be less than or equal to "rank_size"!');
  assert.deepEqual(await resultSummary(page), sum, 'the previous result is kept');
  assert.deepEqual(await page.evaluate(() => window.__probelens.lastResult.merge), merge);
  assert.deepEqual(await rankOptions(page), ['merged rank 0']);
  for (const side of ['npu', 'bench']) assert.equal(await page.isHidden(`#${side}-error`), true, `no message on the ${side} card`);
  // Not an integer: argparse's message.
  await setParam(page, 'opt-tp', 'x');
  assert.equal(await parallelError(page), "argument --tp: invalid int value: 'x'");
  assert.deepEqual(await resultSummary(page), sum);

  // Back to TP 2, then no merge: the rank folders come back.
  await setParam(page, 'opt-tp', '2');
  assert.equal(await parallelError(page), '');
  assert.deepEqual(await resultSummary(page), sum);
  await setParam(page, 'opt-rank-size', '');
  assert.equal(await parallelError(page), '');
  assert.equal(await page.evaluate(() => window.__probelens.lastResult.merge), undefined);
  assert.deepEqual(await rankOptions(page), ['rank 0', 'rank 1']);
}

describe('parallel merge: served site', () => {
  let browser;
  let server;
  before(async () => {
    requireBuild();
    browser = await launch();
    server = await startServer();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('TP=2 over the parallel_tp folders equals msprobe; a bad TP keeps the result', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await checkTp(page);
    assertClean();
    await context.close();
  });
});

describe('parallel merge: single file over file://', () => {
  let browser;
  before(async () => {
    requireBuild();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  test('TP=2 over the parallel_tp folders equals msprobe; a bad TP keeps the result', async () => {
    const { page, assertClean, context } = await openPage(browser, fileAllowlist);
    await page.goto(SINGLE_URL);
    await checkTp(page);
    assertClean();
    await context.close();
  });
});
