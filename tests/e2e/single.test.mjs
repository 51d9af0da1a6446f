// Browser tests of dist/probelens.html opened from file:// (wasm inlined, worker from a Blob URL,
// demo inlined), with the real fixture folders; no request may leave file:/data:/blob:.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import {
  FIX, OUT, DIST, SINGLE_URL, requireBuild, launch, openPage, fileAllowlist, loads, waitLoad, resultSummary,
  reference, indexOf, readOutline, expectedClasses,
} from './helpers.mjs';

const MIX = path.join(FIX, 'qwen_mix_statistics');

function assertRef(sum, fixture, variant, step, rank) {
  const rn = reference(fixture, variant, step, rank, 'NPU');
  const rb = reference(fixture, variant, step, rank, 'Bench');
  assert.equal(sum.npu.nodes, rn.nodes, 'NPU nodes');
  assert.equal(sum.npu.matched, rn.matched, 'NPU matched');
  assert.equal(sum.bench.nodes, rb.nodes, 'Bench nodes');
  assert.equal(sum.bench.matched, rb.matched, 'Bench matched');
  assert.deepEqual(sum.npu.precision, rn.precision_index, 'NPU precision_index histogram');
}

describe('single file over file://', () => {
  let browser;
  before(async () => {
    requireBuild();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  test('is self-contained and has a hash-based CSP with connect-src none', () => {
    const html = fs.readFileSync(path.join(DIST, 'probelens.html'), 'utf8');
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html);
    assert.ok(csp, 'CSP meta');
    assert.match(csp[1], /connect-src 'none'/);
    assert.match(csp[1], /script-src 'sha256-[A-Za-z0-9+/=]+' 'wasm-unsafe-eval'/);
    assert.doesNotMatch(csp[1], /unsafe-inline'[^;]*;[^;]*$|script-src[^;]*unsafe-inline/);
    assert.doesNotMatch(html, /<script[^>]+src=/, 'no external scripts');
    assert.doesNotMatch(html, /<link[^>]+rel="stylesheet"/, 'no external stylesheet');
  });

  test('the demo loads from file:// and matches the reference', async () => {
    const { page, assertClean, context } = await openPage(browser, fileAllowlist);
    await page.goto(SINGLE_URL);
    assert.equal(await waitLoad(page, 0), 'ready');
    assertRef(await resultSummary(page), 'qwen_mix_statistics', 'map', 0, 0);
    await page.locator('#npu-pane').screenshot({ path: path.join(OUT, 'single-demo-npu-pane.png') });
    await page.locator('#bench-pane').screenshot({ path: path.join(OUT, 'single-demo-bench-pane.png') });
    assertClean();
    await context.close();
  });

  test('real-tensor folders from file://: the worker (a blob: worker) reads the compared tensors lazily', async () => {
    const { page, assertClean, context } = await openPage(browser, fileAllowlist);
    await page.goto(SINGLE_URL);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.uncheck('#opt-lm');
    await waitLoad(page, n);
    const RT = path.join(FIX, 'real_tensor');
    n = await loads(page);
    await page.setInputFiles('#npu-dir', path.join(RT, 'npu', 'step0', 'proc9305'));
    await waitLoad(page, n, 120000);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', path.join(RT, 'bench', 'step0', 'proc9393'));
    await waitLoad(page, n, 120000);
    assertRef(await resultSummary(page), 'real_tensor', 'nomap', 0, 0);
    const r = await page.evaluate(() => {
      const x = window.__probelens.lastResult;
      return { reads: x.tensorReads, diagnostics: x.diagnostics };
    });
    assert.deepEqual(r.diagnostics, [], 'every tensor was readable');
    const files = (side, proc) => fs.readdirSync(path.join(RT, side, 'step0', proc, 'dump_tensor_data')).map((f) => `${side}/dump_tensor_data/${f}`);
    // Here every tensor file of both folders is compared, so each is read once (the served-site test
    // derives the set from the dump entries of the matched nodes).
    assert.deepEqual([...r.reads].sort(), [...files('npu', 'proc9305'), ...files('bench', 'proc9393')].sort());
    assertClean();
    await context.close();
  });

  test('folder inputs, selection, details and stack copy from file://', async () => {
    const { page, assertClean, context } = await openPage(browser, fileAllowlist);
    await page.goto(SINGLE_URL);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.setInputFiles('#npu-dir', path.join(MIX, 'npu'));
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', path.join(MIX, 'bench'));
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#mapping-file', path.join(MIX, 'layer_mapping.yaml'));
    await waitLoad(page, n);
    assertRef(await resultSummary(page), 'qwen_mix_statistics', 'map', 0, 0);
    n = await loads(page);
    await page.selectOption('#step-select', '1');
    await waitLoad(page, n);
    assertRef(await resultSummary(page), 'qwen_mix_statistics', 'map', 1, 0);
    // Outline classes equal the result on the bench side too.
    const exp = await expectedClasses(page);
    const o = await readOutline(page, 'bench');
    for (const [i, row] of o.rows) assert.equal(row.precision, exp.bench[i], `bench node ${i}`);
    await page.click('#bench-pane [data-act="collapse-all"]');
    // Select on the Bench side: the NPU counterpart is revealed and selected.
    const name = 'Module.module.model.layers.0.self_attn.o_proj.Linear.forward.0';
    const b = await indexOf(page, 'bench', name);
    await page.evaluate((i) => window.__probelens.select('bench', i), b);
    await page.locator(`#bench-node-${b}`).click();
    const peer = await page.evaluate((i) => window.__probelens.lastResult.bench.matched[i], b);
    assert.ok(peer >= 0);
    assert.equal(await page.locator(`#npu-node-${peer}`).getAttribute('aria-selected'), 'true');
    await page.waitForFunction(() => document.querySelectorAll('#details-compare tr[data-side="bench"]').length > 0);
    await page.screenshot({ path: path.join(OUT, 'single-selected-page.png') });
    await page.click('#tab-stack');
    await page.click('#details-stack button[data-copy="bench"]');
    await page.waitForFunction(() => document.querySelector('#details-stack button[data-copy="bench"]').textContent === 'Copied');
    assertClean();
    await context.close();
  });

  test('a .vis.db (sql.js inlined), a manual match and a CSV download from file://', async () => {
    const { page, assertClean, context } = await openPage(browser, fileAllowlist);
    await page.goto(SINGLE_URL);
    await waitLoad(page, 0);
    const dir = path.join(FIX, 'qwen_mix_statistics', 'reference', 'map');
    const gz = path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith('.vis.db.gz')));
    // An uncompressed .vis.db, as msprobe writes it.
    const db = path.join(OUT, 'single-map.vis.db');
    fs.writeFileSync(db, zlib.gunzipSync(fs.readFileSync(gz)));
    let n = await loads(page);
    await page.setInputFiles('#vis-file', db);
    await waitLoad(page, n);
    assertRef(await resultSummary(page), 'qwen_mix_statistics', 'map', 0, 0);
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#csv-all')]);
    const csv = path.join(OUT, 'single-compare.csv');
    await dl.saveAs(csv);
    assert.match(fs.readFileSync(csv, 'utf8'), /^NPU Name,Bench Name,/);
    // Back to the demo without the mapping: match the pair the mapping would match.
    n = await loads(page);
    await page.click('#demo-btn');
    await waitLoad(page, n);
    n = await loads(page);
    await page.uncheck('#opt-lm');
    await waitLoad(page, n);
    const i = await indexOf(page, 'npu', 'Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0');
    const j = await indexOf(page, 'bench', 'Module.module.model.layers.0.self_attn.o_proj.Linear.forward.0');
    await page.evaluate(([i, j]) => {
      window.__probelens.select('npu', i);
      window.__probelens.select('bench', j);
    }, [i, j]);
    await page.click('#match-btn');
    await page.waitForFunction(([i, j]) => window.__probelens.lastResult.npu.matched[i] === j, [i, j]);
    assert.equal(await page.evaluate((i) => window.__probelens.lastResult.npu.precision[i], i), 1);
    assertClean();
    await context.close();
  });
});
