// Browser tests of the served site (dist/ through scripts/serve.mjs) with the real wasm core
// and the real fixture folders; numbers are cross-checked against msprobe's SQLite reference summaries.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import os from 'node:os';
import zlib from 'node:zlib';
import { spawnSync } from 'node:child_process';
import initSqlJs from 'sql.js';
import { writeSyntheticDump } from './synth.mjs';
import {
  FIX, OUT, requireBuild, launch, startServer, openPage, servedAllowlist, loads, waitLoad, resultSummary,
  reference, expectedClasses, readOutline, indexOf, assertUnmatchUndoKeepsMetrics, assertMatchesReference,
  recordSent, resetSent, lastLoad, openInputs, cliBinary,
} from './helpers.mjs';

const ROOT_DIR = path.resolve(FIX, '..', '..');
const MIX = path.join(FIX, 'qwen_mix_statistics');
const NPU_PROC = path.join(MIX, 'npu', 'step0', 'proc23598');
const BENCH_PROC = path.join(MIX, 'bench', 'step0', 'proc23368');
const MAPPING = path.join(MIX, 'layer_mapping.yaml');
const TWO = path.join(FIX, 'qwen_two_ranks');
/** Modules of 50 nodes each in the synthetic large dump (2000 → 100,001 nodes). */
const BIG_MODULES = Number(process.env.PROBELENS_BIG_MODULES ?? 2000);

/** Full outline check of one side: every node has a row with the class and match flag of the result. */
async function assertOutline(page, side) {
  const exp = await expectedClasses(page);
  const sum = await resultSummary(page);
  const o = await readOutline(page, side);
  assert.equal(o.nodeCount, sum[side].nodes, `${side} outline node count`);
  assert.equal(o.matchedCount, sum[side].matched, `${side} outline matched count`);
  assert.equal(o.rows.length, sum[side].nodes, `${side}: every node has an outline row after expand-all`);
  let matched = 0;
  for (const [i, row] of o.rows) {
    assert.equal(row.precision, exp[side][i], `${side} node ${i} data-precision`);
    if (row.matched === 'true') matched++;
  }
  assert.equal(matched, sum[side].matched, `${side} rows with data-matched=true`);
  await page.click(`#${side}-pane [data-act="collapse-all"]`);
}

describe('served site', () => {
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

  test('real-tensor dump folders: the tensors under dump_tensor_data are read lazily, only for the compared nodes, and give msprobe\'s verdicts', async () => {
    const { page, problems, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.uncheck('#opt-lm');
    await waitLoad(page, n);
    const RT = path.join(FIX, 'real_tensor');
    // The NPU folder, plus a tensor file no dump entry names (it must never be read).
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-rt-'));
    const npuDir = path.join(tmp, 'proc9305');
    fs.cpSync(path.join(RT, 'npu', 'step0', 'proc9305'), npuDir, { recursive: true });
    const tensorDir = path.join(npuDir, 'dump_tensor_data');
    fs.copyFileSync(path.join(tensorDir, fs.readdirSync(tensorDir).sort()[0]), path.join(tensorDir, 'Not.named.in.dump.json.pt'));
    try {
      // The NPU folder alone (it replaces the demo, whose Bench side is cleared) is a build graph:
      // nothing is compared, no tensor is read.
      n = await loads(page);
      await page.setInputFiles('#npu-dir', npuDir);
      await waitLoad(page, n, 120000);
      const built = await page.evaluate(() => ({ type: window.__probelens.lastResult.graphType, reads: window.__probelens.lastResult.tensorReads }));
      assert.deepEqual(built, { type: 'build', reads: [] });
      n = await loads(page);
      await page.setInputFiles('#bench-dir', path.join(RT, 'bench', 'step0', 'proc9393'));
      await waitLoad(page, n, 120000);
      await checkRealTensorResult(page, RT);
    } finally {
      // The page reads tensors from the chosen files on demand: the copy lives until the test ends.
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    assert.deepEqual(problems.page, []);
    assertClean();
    await page.close();
  });

  /** The real-tensor result on the page: msprobe's numbers, and what was read. */
  async function checkRealTensorResult(page, RT) {
    const sum = await resultSummary(page);
    assertMatchesReference(sum, 'real_tensor', 'nomap', 0, 0);
    const { task, diagnostics, tensorReads, matched } = await page.evaluate(() => {
      const r = window.__probelens.lastResult;
      const side = (g) => g.names.filter((_, i) => g.matched[i] >= 0);
      return { task: r.task, diagnostics: r.diagnostics, tensorReads: r.tensorReads, matched: { npu: side(r.npu), bench: side(r.bench) } };
    });
    assert.equal(task, 'all');
    // Without the .pt files every metric would be 'unsupported' and a warning would say so.
    assert.deepEqual(diagnostics.filter((d) => /\.pt|tensor/i.test(d.message)), []);
    // The core read exactly the tensor files named by the dump entries of the matched (compared)
    // nodes, each once, and no other file (computed here from dump.json, independently of the core).
    const named = (side, proc, names) => {
      // Python's JSON: NaN/Infinity values read as null (only data_name strings matter here).
      const text = fs.readFileSync(path.join(RT, side, 'step0', proc, 'dump.json'), 'utf8');
      const data = JSON.parse(text.replace(/([:[,]\s*)-?(?:Infinity|NaN)\b/g, '$1null')).data;
      const out = [];
      const walk = (v) => {
        if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === 'object') {
          for (const [k, x] of Object.entries(v)) {
            if (k === 'data_name' && typeof x === 'string') out.push(`${side}/dump_tensor_data/${x}`);
            else walk(x);
          }
        }
      };
      for (const name of names) if (data[name]) walk(data[name]);
      return out;
    };
    const expected = [...named('npu', 'proc9305', matched.npu), ...named('bench', 'proc9393', matched.bench)].sort();
    assert.ok(expected.length > 0);
    assert.deepEqual([...tensorReads].sort(), expected, 'tensor files read: those of the compared nodes, once each');
    assert.ok(!tensorReads.some((p) => p.includes('Not.named.in.dump.json')), 'a tensor no entry names is never read');
    // The metrics of every compared NPU tensor (CSV of all tensors, built from the core's strings)
    // are msprobe's, string for string.
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#csv-all')]);
    const csvFile = path.join(OUT, 'served-real-tensor-all.csv');
    await dl.saveAs(csvFile);
    const [head, ...rows] = parseCsv(fs.readFileSync(csvFile, 'utf8'));
    const METRICS = ['Cosine', 'EucDist', 'MaxAbsErr', 'MaxRelativeErr', 'One Thousandth Err Ratio', 'Five Thousandths Err Ratio', 'Result'];
    for (const m of METRICS) assert.ok(head.includes(m), `CSV column ${m}`);
    const SQL = await initSqlJs();
    const db = new SQL.Database(zlib.gunzipSync(fs.readFileSync(path.join(RT, 'reference', 'nomap', 'compare_20261130040457.vis.db.gz'))));
    const ref = new Map();
    for (const [a, b] of db.exec("SELECT input_data, output_data FROM tb_nodes WHERE step = 0 AND rank = 0 AND data_source = 'NPU' AND matched_node_link != '[]'")[0].values) {
      for (const [k, v] of [...Object.entries(JSON.parse(a || '{}')), ...Object.entries(JSON.parse(b || '{}'))]) ref.set(k, v);
    }
    db.close();
    assert.equal(rows.length, ref.size, 'one CSV row per compared NPU tensor of msprobe\'s db');
    for (const r of rows) {
      const want = ref.get(r[0]);
      assert.ok(want, `${r[0]} in msprobe's db`);
      // A field msprobe does not write (a non-tensor item) is an empty cell.
      for (const m of METRICS) assert.equal(r[head.indexOf(m)], want[m] ?? '', `${r[0]} ${m}`);
    }
    // After the run the shown session still reads tensors on demand: unmatching a compared API node and
    // undoing (a manual re-match) recomputes its metrics from the files, the same strings as before.
    const leaf = await page.evaluate(() => {
      const g = window.__probelens.lastResult.npu;
      const i = g.names.findIndex((n, k) => g.subtreeEnd[k] === k + 1 && g.matched[k] >= 0 && n.startsWith('Functional.linear.'));
      return { i, name: g.names[i] };
    });
    assert.ok(leaf.i > 0, 'a matched Functional.linear node');
    const cosines = async () => {
      await page.evaluate((i) => window.__probelens.select('npu', i), leaf.i);
      await page.waitForFunction((nm) => document.getElementById('details').dataset.node === nm, leaf.name);
      await page.waitForFunction(() => document.querySelectorAll('#details-compare tr[data-side="npu"] td[data-field="Cosine"]').length > 0);
      return page.locator('#details-compare tr[data-side="npu"] td[data-field="Cosine"]').allTextContents();
    };
    await assertUnmatchUndoKeepsMetrics(page, leaf, cosines);
  }

  test('a tensor file that disappears after the folder was chosen: a warning naming it, the result still shown', async () => {
    const { page, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.uncheck('#opt-lm');
    await waitLoad(page, n);
    const RT = path.join(FIX, 'real_tensor');
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-rt-gone-'));
    try {
      fs.cpSync(path.join(RT, 'npu', 'step0', 'proc9305'), path.join(tmp, 'proc9305'), { recursive: true });
      n = await loads(page);
      await page.setInputFiles('#npu-dir', path.join(tmp, 'proc9305'));
      await waitLoad(page, n, 120000);
      // Tensors are read only when compared, so this one is missing when the compare needs it.
      const gone = 'Module.embed.Embedding.forward.0.input.0.pt';
      fs.rmSync(path.join(tmp, 'proc9305', 'dump_tensor_data', gone));
      n = await loads(page);
      await page.setInputFiles('#bench-dir', path.join(RT, 'bench', 'step0', 'proc9393'));
      assert.equal(await waitLoad(page, n, 120000), 'ready');
      const sum = await resultSummary(page);
      assert.equal(sum.npu.nodes, reference('real_tensor', 'nomap', 0, 0, 'NPU').nodes);
      const li = await page.locator('#diagnostics li.warning').allTextContents();
      assert.equal(li.length, 1, `one warning: ${li}`);
      assert.ok(li[0].startsWith("warning: 1 tensor pair(s) could not be read, their metrics are 'unsupported' (as msprobe reports them); "
        + `first: proc9305/dump_tensor_data/${gone}: cannot read: `), li[0]);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    assertClean();
    await page.close();
  });

  test('node names with HTML and </script> are shown as text and never run (bad_inputs/html_in_node_name)', async () => {
    const { page, assertClean } = await openPage(browser, servedAllowlist(server.url));
    const dialogs = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      d.dismiss().catch(() => {});
    });
    await page.goto(server.url);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.uncheck('#opt-lm');
    await waitLoad(page, n);
    const CASE = path.join(ROOT_DIR, 'tests', 'bad_inputs', 'html_in_node_name');
    n = await loads(page);
    await page.setInputFiles('#npu-dir', path.join(CASE, 'npu'));
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', path.join(CASE, 'bench'));
    await waitLoad(page, n);
    const evil = await page.evaluate(() => {
      const names = window.__probelens.lastResult.npu.names;
      return names.findIndex((x) => x.includes('<img src=x onerror=alert(1)>'));
    });
    assert.ok(evil > 0, 'the hostile name is in the graph');
    // Reveal and select it, so the outline, the pane and the details all render it.
    await page.evaluate((i) => window.__probelens.select('npu', i), evil);
    await page.click('#npu-pane [data-act="expand-all"]');
    await page.waitForTimeout(300);
    const dom = await page.evaluate(() => ({
      imgs: [...document.querySelectorAll('img')].filter((im) => im.getAttribute('src') === 'x').length,
      scripts: [...document.querySelectorAll('script')].filter((sc) => sc.textContent.includes('alert(2)')).length,
      shownAsText: document.body.innerText.includes('<img src=x onerror=alert(1)>'),
    }));
    assert.equal(dom.imgs, 0, 'no <img> element was created from a name');
    assert.equal(dom.scripts, 0, 'no <script> element was created from a name');
    assert.ok(dom.shownAsText, 'the name is shown literally');
    assert.deepEqual(dialogs, [], 'no injected script ran');
    assertClean();
    await page.close();
  });

  test('serves with the CSP header and application/wasm', async () => {
    const head = (p) => new Promise((resolve, reject) => {
      http.get(new URL(p, server.url), (res) => {
        res.resume();
        resolve(res);
      }).on('error', reject);
    });
    const index = await head('/');
    assert.equal(index.statusCode, 200);
    assert.match(index.headers['content-security-policy'], /script-src 'self' 'wasm-unsafe-eval'/);
    assert.match(index.headers['content-security-policy'], /worker-src 'self' blob:/);
    const wasm = await head('/pkg/probelens_bg.wasm');
    assert.equal(wasm.headers['content-type'], 'application/wasm');
    assert.equal((await head('/../package.json')).statusCode, 404);
  });

  test('the bundled demo loads on first open and matches the reference', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    assert.equal(await waitLoad(page, 0), 'ready');
    const sum = await resultSummary(page);
    assertMatchesReference(sum, 'qwen_mix_statistics', 'map', 0, 0);
    assert.equal(await page.locator('#npu-outline').getAttribute('data-node-count'), String(sum.npu.nodes));
    assert.equal(await page.locator('#bench-outline').getAttribute('data-node-count'), String(sum.bench.nodes));
    // Summary line and legend counts.
    const summary = await page.locator('#summary').textContent();
    assert.match(summary, new RegExp(`NPU ${sum.npu.nodes} nodes · Bench ${sum.bench.nodes} nodes · matched ${sum.npu.matched}`));
    const exp = await expectedClasses(page);
    const errors = exp.npu.filter((c) => c === 'error').length;
    assert.equal(await page.locator('#legend li[data-precision="error"]').getAttribute('data-count'), String(errors));
    assert.equal(await page.locator('#summary').getAttribute('data-errors'), String(errors));
    await page.locator('#npu-pane').screenshot({ path: path.join(OUT, 'served-demo-npu-pane.png') });
    await page.locator('#bench-pane').screenshot({ path: path.join(OUT, 'served-demo-bench-pane.png') });
    await page.screenshot({ path: path.join(OUT, 'served-demo-page.png') });
    assertClean();
    await context.close();
  });

  test('proc folders + mapping through the inputs; outline classes equal the result', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    // Start from no mapping, then choose the folders and the YAML like a user.
    await page.selectOption('#mapping-select', '');
    let n = await loads(page);
    await page.uncheck('#opt-lm');
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#npu-dir', NPU_PROC);
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', BENCH_PROC);
    await waitLoad(page, n);
    assert.match(await page.locator('#npu-src').textContent(), /^proc23598 — 3 files/);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0);
    n = await loads(page);
    await page.setInputFiles('#mapping-file', MAPPING);
    await waitLoad(page, n);
    assert.equal(await page.isChecked('#opt-lm'), true);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'map', 0, 0);
    await assertOutline(page, 'npu');
    await assertOutline(page, 'bench');
    // Fuzzy match (-fm together with -lm disables the mapping in msprobe: map_fuzzy equals fuzzy).
    n = await loads(page);
    await page.check('#opt-fm');
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'map_fuzzy', 0, 0);
    assertClean();
    await context.close();
  });

  test('expand, select, counterpart, details table and stack copy', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    const fwd = await indexOf(page, 'npu', 'Module.0.module.Float16Module.forward.0');
    assert.ok(fwd > 0);
    const row = page.locator(`#npu-node-${fwd}`);
    await expect(row, 'aria-expanded', 'false');
    // Keyboard: click selects, ArrowRight expands (and sync-expands the counterpart).
    await row.click();
    await expect(row, 'aria-selected', 'true');
    await page.keyboard.press('ArrowRight');
    await expect(row, 'aria-expanded', 'true');
    const peer = await page.evaluate((i) => window.__probelens.lastResult.npu.matched[i], fwd);
    assert.ok(peer >= 0, 'the forward module is matched');
    await expect(page.locator(`#bench-node-${peer}`), 'aria-expanded', 'true');
    await expect(page.locator(`#bench-node-${peer}`), 'aria-selected', 'true');
    // Arrow keys move the selection through the visible rows; Enter toggles.
    await page.keyboard.press('ArrowDown');
    const firstChild = await page.evaluate((i) => window.__probelens.lastResult.npu.parent.indexOf(i), fwd);
    await expect(page.locator(`#npu-node-${firstChild}`), 'aria-selected', 'true');
    await page.keyboard.press('ArrowUp');
    await expect(row, 'aria-selected', 'true');
    await page.keyboard.press('Enter');
    await expect(row, 'aria-expanded', 'false');
    await page.keyboard.press('Enter');
    await expect(row, 'aria-expanded', 'true');
    assert.equal(await page.locator('#npu-outline').getAttribute('aria-activedescendant'), `npu-node-${fwd}`);
    // Double-click on the canvas box collapses it again.
    const pos = await page.evaluate((i) => {
      const v = window.__probelens.views.npu;
      v.model.layout(0);
      const p = v.model.absPos(i);
      const r = v.canvas.getBoundingClientRect();
      return { x: r.left + (p.x + 4) * v.scale + v.tx, y: r.top + (p.y + 4) * v.scale + v.ty };
    }, fwd);
    await page.mouse.dblclick(pos.x, pos.y);
    await expect(row, 'aria-expanded', 'false');
    // Select a matched leaf with tensors: the counterpart is revealed and the table shows both sides.
    const leafName = 'Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0';
    const leaf = await indexOf(page, 'npu', leafName);
    await page.evaluate((i) => window.__probelens.select('npu', i), leaf);
    await page.locator(`#npu-node-${leaf}`).click();
    await page.waitForFunction((n) => document.getElementById('details').dataset.node === n, leafName);
    const leafPeer = await page.evaluate((i) => window.__probelens.lastResult.npu.matched[i], leaf);
    await expect(page.locator(`#bench-node-${leafPeer}`), 'aria-selected', 'true');
    const npuRows = page.locator('#details-compare tr[data-side="npu"]');
    const benchRows = page.locator('#details-compare tr[data-side="bench"]');
    assert.ok((await npuRows.count()) >= 3, 'input, parameters and output rows');
    assert.equal(await npuRows.count(), await benchRows.count());
    const headers = await page.locator('#details-compare th').allTextContents();
    for (const h of ['dtype', 'shape', 'Max', 'Min', 'Mean', 'Norm', 'Max diff', 'MaxRelativeErr', 'Result', 'Err_message']) {
      assert.ok(headers.includes(h), `column ${h} in ${headers.join('|')}`);
    }
    const sections = await page.locator('#details-compare tr[data-side="npu"]').evaluateAll((rs) => rs.map((r) => r.dataset.section));
    for (const s of ['input', 'parameters', 'output']) assert.ok(sections.includes(s), `section ${s}`);
    // Values are the core's strings, unchanged: the NPU row's Max equals msprobe's .vis.db value.
    const maxCell = await page.locator('#details-compare tr[data-side="npu"][data-section="input"] td[data-field="Max"]').first().textContent();
    assert.equal(maxCell, '0.32393231987953186');
    const resultCell = await page.locator('#details-compare tr[data-side="npu"][data-section="output"] td[data-field="Result"]').first().textContent();
    assert.ok(['pass', 'warning', 'error'].includes(resultCell), `Result cell ${resultCell}`);
    // Pan by drag, zoom by wheel about the cursor, fit, splitter.
    const view = () => page.evaluate(() => {
      const v = window.__probelens.views.npu;
      return { s: v.scale, tx: v.tx, ty: v.ty };
    });
    const box = await page.locator('#npu-canvas').boundingBox();
    const v0 = await view();
    await page.mouse.move(box.x + 100, box.y + 100);
    await page.mouse.down();
    await page.mouse.move(box.x + 160, box.y + 140, { steps: 5 });
    await page.mouse.up();
    const v1 = await view();
    assert.ok(Math.abs(v1.tx - v0.tx - 60) < 1 && Math.abs(v1.ty - v0.ty - 40) < 1, `pan ${JSON.stringify([v0, v1])}`);
    const worldBefore = await page.evaluate(([x, y]) => {
      const v = window.__probelens.views.npu;
      return [(x - v.tx) / v.scale, (y - v.ty) / v.scale];
    }, [150, 120]);
    await page.mouse.move(box.x + 150, box.y + 120);
    await page.mouse.wheel(0, -300);
    await page.waitForFunction((s) => window.__probelens.views.npu.scale > s, v1.s);
    const worldAfter = await page.evaluate(([x, y]) => {
      const v = window.__probelens.views.npu;
      return [(x - v.tx) / v.scale, (y - v.ty) / v.scale];
    }, [150, 120]);
    assert.ok(Math.abs(worldAfter[0] - worldBefore[0]) < 0.5 && Math.abs(worldAfter[1] - worldBefore[1]) < 0.5, 'zoom keeps the point under the cursor');
    await page.click('#npu-pane [data-act="fit"]');
    const fitted = await page.evaluate(() => {
      const v = window.__probelens.views.npu;
      const m = v.model;
      return { left: v.tx, top: v.ty, right: v.tx + m.w[0] * v.scale, bottom: v.ty + m.h[0] * v.scale, W: v.cssW, H: v.cssH };
    });
    assert.ok(fitted.left >= 0 && fitted.top >= 0 && fitted.right <= fitted.W + 0.5 && fitted.bottom <= fitted.H + 0.5, `fit ${JSON.stringify(fitted)}`);
    const w0 = (await page.locator('#npu-pane').boundingBox()).width;
    const sp = await page.locator('#splitter').boundingBox();
    await page.mouse.move(sp.x + 3, sp.y + 50);
    await page.mouse.down();
    await page.mouse.move(sp.x - 200, sp.y + 50, { steps: 5 });
    await page.mouse.up();
    const w1 = (await page.locator('#npu-pane').boundingBox()).width;
    assert.ok(w0 - w1 > 150, `splitter ${w0} → ${w1}`);
    const h0 = (await page.locator('#details').boundingBox()).height;
    const hs = await page.locator('#hsplit').boundingBox();
    await page.mouse.move(hs.x + 300, hs.y + 2);
    await page.mouse.down();
    await page.mouse.move(hs.x + 300, hs.y - 100, { steps: 5 });
    await page.mouse.up();
    const h1 = (await page.locator('#details').boundingBox()).height;
    assert.ok(h1 - h0 > 80, `details splitter ${h0} → ${h1}`);
    await page.locator('#npu-pane').screenshot({ path: path.join(OUT, 'served-selected-npu-pane.png') });
    await page.locator('#bench-pane').screenshot({ path: path.join(OUT, 'served-selected-bench-pane.png') });
    await page.locator('#details').screenshot({ path: path.join(OUT, 'served-details.png') });
    // Stack tab + copy button (plain http: navigator.clipboard may be missing; the fallback must work).
    await page.click('#tab-stack');
    const stack = await page.locator('#details-stack pre[data-side="npu"]').textContent();
    assert.match(stack, /File .*line \d+/);
    await page.click('#details-stack button[data-copy="npu"]');
    await expect(page.locator('#details-stack button[data-copy="npu"]'), 'textContent', 'Copied');
    assertClean();
    await context.close();
  });

  test('overflow check (-oc) marks nodes in the legend, outline and canvas', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    const n = await loads(page);
    await page.check('#opt-oc');
    await waitLoad(page, n);
    const ov = await page.evaluate(() => {
      const g = window.__probelens.lastResult.npu;
      const idx = [];
      g.overflow.forEach((o, i) => o && idx.push([i, o]));
      return idx;
    });
    assert.ok(ov.length > 0, 'the demo has overflow nodes with -oc');
    const high = ov.filter(([, o]) => o === 'high').length;
    assert.equal(await page.locator('#legend li[data-overflow="high"]').getAttribute('data-count'), String(high));
    const [i, level] = ov[0];
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await expect(page.locator(`#npu-node-${i} .obadge`), 'textContent', level);
    assert.equal(await page.locator('#details-title .ov').textContent(), `overflow ${level}`);
    await page.locator('#npu-pane').screenshot({ path: path.join(OUT, 'served-overflow-npu-pane.png') });
    assertClean();
    await context.close();
  });

  test('a dropped folder is walked through its directory entries (loader.js)', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    // Headless drops cannot carry directories, so feed filesFromDrop a DataTransfer-like object whose
    // items return FileSystemEntry look-alikes (readEntries answers in batches, as browsers do).
    const got = await page.evaluate(async () => {
      const { filesFromDrop } = await import('./loader.js');
      const file = (fullPath, text) => ({
        isFile: true, isDirectory: false, name: fullPath.split('/').pop(), fullPath,
        file: (ok) => ok(new File([text], fullPath.split('/').pop())),
      });
      const dir = (fullPath, children) => ({
        isFile: false, isDirectory: true, name: fullPath.split('/').pop(), fullPath,
        createReader: () => {
          let pos = 0;
          return { readEntries: (ok) => { const batch = children.slice(pos, pos + 2); pos += batch.length; setTimeout(() => ok(batch)); } };
        },
      });
      const root = dir('/npu', [
        dir('/npu/step0', [
          dir('/npu/step0/rank1', [file('/npu/step0/rank1/dump.json', '{}'), file('/npu/step0/rank1/construct.json', '{}')]),
          dir('/npu/step0/rank0', [file('/npu/step0/rank0/stack.json', '{}'), file('/npu/step0/rank0/dump.json', '{}'),
            file('/npu/step0/rank0/construct.json', '{}'), file('/npu/step0/rank0/tensor.npy', 'x'), file('/npu/step0/rank0/.hidden.json', '{}')]),
        ]),
      ]);
      const dt = { items: [{ kind: 'file', webkitGetAsEntry: () => root, getAsFile: () => null }], files: [] };
      const r = await filesFromDrop(dt);
      return { root: r.rootName, paths: r.files.map((f) => f.path) };
    });
    assert.equal(got.root, 'npu');
    assert.deepEqual(got.paths, [
      'step0/rank0/construct.json', 'step0/rank0/dump.json', 'step0/rank0/stack.json',
      'step0/rank1/construct.json', 'step0/rank1/dump.json',
    ]);
    assertClean();
    await context.close();
  });

  test('whole npu/bench roots (steps tree) show step selectors', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.setInputFiles('#npu-dir', path.join(MIX, 'npu'));
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', path.join(MIX, 'bench'));
    await waitLoad(page, n);
    assert.equal(await page.isVisible('#step-select'), true);
    assert.deepEqual(await page.locator('#step-select option').evaluateAll((os) => os.map((o) => o.value)), ['0', '1']);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0); // the user's folders: no demo mapping (issue 24, item 3)
    n = await loads(page);
    await page.selectOption('#step-select', '1');
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 1, 0); // the user's folders: no demo mapping (issue 24, item 3)
    assertClean();
    await context.close();
  });

  test('two ranks: rank selector and per-rank results', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.setInputFiles('#mapping-file', path.join(TWO, 'layer_mapping.yaml'));
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#npu-dir', path.join(TWO, 'npu'));
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', path.join(TWO, 'bench'));
    await waitLoad(page, n);
    assert.deepEqual(await page.locator('#step-select option').evaluateAll((os) => os.map((o) => o.value)), ['0', '1']);
    assert.deepEqual(await page.locator('#rank-select option').evaluateAll((os) => os.map((o) => o.value)), ['0', '1']);
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'map', 0, 0);
    n = await loads(page);
    await page.selectOption('#rank-select', '1');
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'map', 0, 1);
    await assertOutline(page, 'npu');
    await page.screenshot({ path: path.join(OUT, 'served-two-ranks.png') });
    assertClean();
    await context.close();
  });

  test('a shard\'s partial db (graph_visualize --shard 1/2) opens with its own steps and ranks', async () => {
    // Shard 1 of 2 of the two-rank pair holds step 1's two ranks; its tb_config lists them alone.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-shard-'));
    const r = spawnSync(cliBinary(), ['graph_visualize', '-tp', 'npu', '-gp', 'bench', '-lm', 'layer_mapping.yaml',
      '-o', dir, '--no-progress', '--shard', '1/2'], { cwd: TWO, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const db = path.join(dir, 'compare_shard1of2.vis.db');
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    let n = await loads(page);
    await page.setInputFiles('#vis-file', db);
    await waitLoad(page, n);
    assert.deepEqual(await page.locator('#step-select option').evaluateAll((os) => os.map((o) => o.value)), ['1']);
    assert.deepEqual(await page.locator('#rank-select option').evaluateAll((os) => os.map((o) => o.value)), ['0', '1']);
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'map', 1, 0);
    n = await loads(page);
    await page.selectOption('#rank-select', '1');
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'map', 1, 1);
    assertClean();
    await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('one side alone is a build graph', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    const assertBuild = async () => {
      const sum = await resultSummary(page);
      assert.equal(sum.graphType, 'build');
      assert.equal(sum.bench, null);
      assert.equal(sum.npu.nodes, reference('qwen_single_graph', 'build_npu', 0, 0, 'NPU').nodes);
      assert.equal(await page.isVisible('#bench-pane'), false);
      assert.match(await page.locator('#summary').textContent(), /build graph/);
    };
    // The NPU folder chosen over the demo replaces it (the demo's Bench side is cleared): alone.
    let n = await loads(page);
    await page.setInputFiles('#npu-dir', path.join(FIX, 'qwen_single_graph', 'npu'));
    await waitLoad(page, n);
    assert.equal(await page.locator('#bench-src').textContent(), 'drop a dump folder here');
    await assertBuild();
    // With a Bench folder it is a compare; *Clear* of the Bench side makes it alone again.
    n = await loads(page);
    await page.setInputFiles('#bench-dir', path.join(FIX, 'qwen_single_graph', 'bench_L0'));
    await waitLoad(page, n);
    assert.equal((await resultSummary(page)).graphType, 'compare');
    assert.equal(await page.isVisible('#bench-pane'), true);
    n = await loads(page);
    await openInputs(page); // the inputs fold into one bar once something is shown
    await page.click('#bench-clear');
    await waitLoad(page, n);
    await assertBuild();
    await page.screenshot({ path: path.join(OUT, 'served-build.png') });
    assertClean();
    await context.close();
  });

  test('a truncated dump.json shows its error next to the side; the previous result stays', async () => {
    const { page, problems, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    // Rank folders on both sides (so loose files dropped next have the same layout: files at the root).
    let n = await loads(page);
    await page.setInputFiles('#npu-dir', NPU_PROC);
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', BENCH_PROC);
    await waitLoad(page, n);
    const before = await resultSummary(page);
    assertMatchesReference(before, 'qwen_mix_statistics', 'nomap', 0, 0); // the user's folders: no demo mapping (issue 24, item 3)
    const files = ['construct.json', 'stack.json', 'dump.json'].map((f) => {
      let bytes = fs.readFileSync(path.join(NPU_PROC, f));
      if (f === 'dump.json') bytes = bytes.subarray(0, Math.floor(bytes.length / 2));
      return { name: f, b64: bytes.toString('base64') };
    });
    const dt = await page.evaluateHandle((fs) => {
      const dt = new DataTransfer();
      for (const f of fs) {
        const bin = atob(f.b64);
        const u8 = new Uint8Array(bin.length);
        for (let i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
        dt.items.add(new File([u8], f.name, { type: 'application/json' }));
      }
      return dt;
    }, files);
    n = await loads(page);
    await page.dispatchEvent('#npu-card', 'dragover', { dataTransfer: dt });
    await page.dispatchEvent('#npu-card', 'drop', { dataTransfer: dt });
    await waitLoad(page, n);
    const err = page.locator('#npu-error');
    assert.equal(await err.isVisible(), true, 'error shown next to the NPU side');
    const msg = await err.textContent();
    assert.match(msg, /dump\.json/, `the message names the file: ${msg}`);
    assert.equal(await page.locator('#bench-error').isVisible(), false);
    // The previous result is still displayed and usable.
    assert.deepEqual(await resultSummary(page), before);
    assert.equal(await page.locator('#npu-outline').getAttribute('data-node-count'), String(before.npu.nodes));
    const leaf = await indexOf(page, 'npu', 'Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0');
    await page.evaluate((i) => window.__probelens.select('npu', i), leaf);
    await page.waitForFunction(() => document.querySelectorAll('#details-compare tr[data-side="npu"]').length > 0);
    await page.screenshot({ path: path.join(OUT, 'served-bad-file.png') });
    assert.deepEqual(problems.page, []);
    assert.deepEqual(problems.requests, []);
    assert.deepEqual(problems.console, []);
    await context.close();
  });
});

describe('served site: big inputs', () => {
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

  test('streaming path (small chunks, beginFile/appendChunk) gives the same result', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    // construct.json and stack.json sent as bytes (?copy=1: the path of other JSON files), in 64 KiB
    // chunks, streamed into the core above 100 kB.
    await recordSent(page);
    await page.goto(`${server.url}?chunk=65536&stream=100000&copy=1`);
    await waitLoad(page, 0);
    await resetSent(page);
    let n = await loads(page);
    await page.setInputFiles('#npu-dir', NPU_PROC);
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#bench-dir', BENCH_PROC);
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0); // the user's folders: no demo mapping (issue 24, item 3)
    const { sent } = await lastLoad(page);
    const chunks = (side, f) => sent.filter((m) => m.type === 'fileChunk' && m.side === side && m.path === f).length;
    for (const [side, dir] of [['npu', NPU_PROC], ['bench', BENCH_PROC]]) {
      for (const f of ['construct.json', 'stack.json']) {
        assert.equal(chunks(side, f), Math.ceil(fs.statSync(path.join(dir, f)).size / 65536), `${side}/${f} sent in 64 KiB chunks`);
      }
      assert.equal(chunks(side, 'dump.json'), 0, `${side}/dump.json stays a handle`);
    }
    assertClean();
    await context.close();
  });

  test('dump.json is read by the core in slices (?slice=4096), never sent or copied whole; same result', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    // Every message the page sends to the worker: a dump.json must never travel as bytes.
    await page.addInitScript(() => {
      window.__sent = [];
      const post = Worker.prototype.postMessage;
      Worker.prototype.postMessage = function (msg, ...rest) {
        if (msg && typeof msg === 'object') {
          window.__sent.push({ type: msg.type, side: msg.side, path: msg.path, files: Array.isArray(msg.files) ? msg.files.map((f) => f.path) : undefined });
        }
        return post.call(this, msg, ...rest);
      };
    });
    await page.goto(`${server.url}?slice=4096`);
    await waitLoad(page, 0);
    // From here on: the messages and progress texts of the two loads below (not the demo's).
    await page.evaluate(() => {
      window.__sent = [];
      window.__progress = [];
      const el = document.getElementById('progress-stage');
      new MutationObserver(() => window.__progress.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
    });
    /** Asserts that `reads` hold `side`'s `file` read once, in order, in 4096-byte slices. */
    const assertSlices = (reads, side, dir, file = 'dump.json') => {
      const size = fs.statSync(path.join(dir, file)).size;
      const mine = reads.filter((r) => r.file === `${side}/${file}`);
      assert.equal(mine.length, Math.ceil(size / 4096), `${side}/${file}: ceil(${size} / 4096) slices`);
      mine.forEach((r, k) => {
        assert.equal(r.offset, k * 4096, `${side} ${file} slice ${k} offset`);
        assert.equal(r.length, Math.min(4096, size - k * 4096), `${side} ${file} slice ${k} length`);
      });
    };
    /**
     * Asserts that `reads` hold exactly `side`'s three files: construct.json and dump.json each read
     * once in 4096-byte slices (neither is ever whole in the core), stack.json once and whole, in the
     * parse's order: construct.json, dump.json, stack.json.
     */
    const assertFolder = (reads, side, dir) => {
      assertSlices(reads, side, dir, 'construct.json');
      assertSlices(reads, side, dir, 'dump.json');
      const whole = (f) => ({ file: `${side}/${f}`, offset: 0, length: fs.statSync(path.join(dir, f)).size });
      assert.deepEqual(reads.filter((r) => !/\/(dump|construct)\.json$/.test(r.file)), [whole('stack.json')],
        `only ${side}'s rank folder is read`);
      assert.ok(reads.every((r) => r.file.startsWith(`${side}/`)), `only ${side}'s rank folder is read`);
      const first = (f) => reads.findIndex((r) => r.file === `${side}/${f}`);
      const last = (f) => reads.findLastIndex((r) => r.file === `${side}/${f}`);
      assert.ok(last('construct.json') < first('dump.json') && last('dump.json') < first('stack.json'),
        'construct.json, dump.json, stack.json in turn');
    };
    // The NPU folder replaces the demo: its build graph, its construct.json and dump.json read in
    // slices, once.
    let n = await loads(page);
    await page.setInputFiles('#npu-dir', NPU_PROC);
    await waitLoad(page, n);
    assert.equal((await resultSummary(page)).graphType, 'build');
    const npuReads = await page.evaluate(() => window.__probelens.lastResult.jsonReads);
    assertFolder(npuReads, 'npu', NPU_PROC);
    // The Bench folder: the compare; its files read once (as above); the NPU side's are not read
    // again (adopted from the build's session).
    n = await loads(page);
    await page.setInputFiles('#bench-dir', BENCH_PROC);
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0); // the user's folders: no demo mapping (issue 24, item 3)
    const { sent, reads, progress } = await page.evaluate(() => ({
      sent: window.__sent, reads: window.__probelens.lastResult.jsonReads, progress: window.__progress,
    }));
    assertFolder(reads, 'bench', BENCH_PROC);
    // Sent: by handle (fileHandles), once per folder, never as bytes (fileBegin/fileChunk).
    assert.deepEqual(sent.filter((m) => /(^|\/)dump\.json$/.test(m.path ?? '')), [], 'no dump.json bytes sent to the worker');
    const handles = sent.filter((m) => m.type === 'fileHandles').map((m) => [m.side, m.files.filter((p) => p === 'dump.json')]);
    assert.deepEqual(handles, [['npu', ['dump.json']], ['bench', ['dump.json']]], 'each dump.json sent by handle, once');
    // The reading shows in the progress bar with the file's size (the page's bytes format).
    const kib = (b) => `${(b / 1024).toFixed(1)} KiB`;
    for (const [stage, dir] of [['NPU', NPU_PROC], ['Bench', BENCH_PROC]]) {
      const size = fs.statSync(path.join(dir, 'dump.json')).size;
      assert.ok(progress.some((t) => t.startsWith(`Reading ${stage} files — `) && t.endsWith(` of ${kib(size)}`)), `${stage}: ${progress.join('\n')}`);
    }
    assertClean();
    await context.close();
  });

  test('a dump.json that changed after its folder was chosen: a message naming it, the shown result kept', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-changed-'));
    try {
      const bench = path.join(tmp, 'bench');
      fs.cpSync(BENCH_PROC, bench, { recursive: true });
      const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
      await page.goto(`${server.url}?slice=4096`);
      await waitLoad(page, 0);
      // The Bench folder alone (it replaces the demo): its build graph, from the core's npu slot.
      let n = await loads(page);
      await page.setInputFiles('#bench-dir', bench);
      assert.equal(await waitLoad(page, n), 'ready');
      const shown = await resultSummary(page);
      assert.equal(shown.graphType, 'build');
      // With an NPU folder the Bench side moves to the bench slot, so the new session reads its
      // dump.json again (by the core, from the chosen File): the file changed since it was chosen.
      fs.appendFileSync(path.join(bench, 'dump.json'), '\n');
      n = await loads(page);
      await page.setInputFiles('#npu-dir', NPU_PROC);
      assert.equal(await waitLoad(page, n), 'ready');
      const errors = await page.evaluate(() => [...document.querySelectorAll('[id$="-error"]')].filter((e) => !e.hidden).map((e) => `${e.id}: ${e.textContent}`));
      assert.deepEqual(errors, [
        'bench-error: bench/dump.json: cannot read: the file changed or became unreadable after it was chosen (NotReadableError); choose the folder again',
      ]);
      assert.deepEqual(await resultSummary(page), shown, 'the shown result is unchanged');
      // The page still works: the unchanged fixture pair loads.
      n = await loads(page);
      await page.setInputFiles('#bench-dir', BENCH_PROC);
      assert.equal(await waitLoad(page, n), 'ready');
      assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0); // the user's folders: no demo mapping (issue 24, item 3)
      assertClean();
      await context.close();
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  test(`large graph (${BIG_MODULES * 50 + 1} nodes): responsive load, cancel, fast expand/draw/select`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-big-'));
    try {
      const nodes = writeSyntheticDump(path.join(dir, 'npu'), { modules: BIG_MODULES, apisPerModule: 49 }) + 1;
      writeSyntheticDump(path.join(dir, 'bench'), { modules: BIG_MODULES, apisPerModule: 49, scale: 1.5 });
      const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
      await page.goto(server.url);
      await waitLoad(page, 0);
      // A new load cancels a running one: start the big NPU side, then ask for the demo at once.
      let n = await loads(page);
      await page.setInputFiles('#npu-dir', path.join(dir, 'npu'));
      await page.waitForFunction(() => document.body.dataset.state === 'loading');
      await page.click('#demo-btn');
      await waitLoad(page, n);
      await page.waitForFunction(() => document.body.dataset.state === 'ready');
      assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'map', 0, 0);
      // Now the big pair, watching the main thread while the worker works.
      await page.setInputFiles('#npu-dir', path.join(dir, 'npu'));
      n = await loads(page);
      await page.setInputFiles('#bench-dir', path.join(dir, 'bench'));
      const lag = page.evaluate(async (before) => {
        let max = 0;
        let last = performance.now();
        while (Number(document.body.dataset.loads) <= before) {
          await new Promise((r) => setTimeout(r, 20));
          const now = performance.now();
          max = Math.max(max, now - last - 20);
          last = now;
        }
        return max;
      }, n);
      await waitLoad(page, n, 150000);
      const sum = await resultSummary(page);
      assert.equal(sum.npu.nodes, nodes);
      assert.equal(sum.npu.matched, nodes);
      // Timings are reported, not asserted (no timed tests: bench/browser.mjs measures them).
      const maxLag = await lag;
      const m = await page.evaluate(() => {
        const out = { displayMs: window.__probelens.timings.displayMs };
        const v = window.__probelens.views.npu;
        let t = performance.now();
        document.querySelector('#npu-pane [data-act="expand-all"]').click();
        out.expandAllMs = performance.now() - t;
        out.draws = [];
        for (const s of [0.02, 0.1, 0.5, 1.5]) {
          v.scale = s;
          v.tx = 10;
          v.ty = -v.model.h[0] * s * 0.5;
          // Best of three frames: the test machine may be busy with other work.
          let ms = Infinity;
          for (let k = 0; k < 3; k++) {
            v.draw();
            ms = Math.min(ms, v.stats.ms);
          }
          out.draws.push({ s, ms, drawn: v.stats.drawn });
        }
        t = performance.now();
        window.__probelens.select('npu', Math.floor(v.model.n * 0.77));
        out.selectMs = performance.now() - t;
        const o = document.getElementById('npu-outline');
        out.domRows = o.querySelectorAll('[role=treeitem]').length;
        out.rows = Number(o.dataset.rowCount);
        return out;
      });
      for (const d of m.draws) assert.ok(d.drawn > 0, `frame at scale ${d.s} drew boxes`);
      assert.equal(m.rows, nodes);
      assert.ok(m.domRows < 200, `outline is virtualised (${m.domRows} DOM rows)`);
      await page.waitForTimeout(200);
      await page.screenshot({ path: path.join(OUT, 'served-large.png') });
      console.log(`large graph: ${JSON.stringify(m)} main-thread max lag ${maxLag.toFixed(0)} ms`);
      assertClean();
      await context.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** RFC 4180 CSV text to rows (quoted cells may hold commas, quotes and line breaks). @param {string} text */
function parseCsv(text) {
  const rows = [];
  let row = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(cell);
      cell = '';
    } else if (c === '\n' || (c === '\r' && text[i + 1] === '\n')) {
      if (c === '\r') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += c;
  }
  if (cell || row.length) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}

/**
 * Waits until an attribute (or textContent) of a locator has a value.
 * @param {import('playwright-core').Locator} loc @param {string} attr @param {string} value
 */
async function expect(loc, attr, value, timeout = 5000) {
  const t0 = Date.now();
  let last;
  for (;;) {
    last = attr === 'textContent' ? await loc.textContent() : await loc.getAttribute(attr);
    if (last === value) return;
    if (Date.now() - t0 > timeout) assert.fail(`${attr} is ${JSON.stringify(last)}, expected ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
