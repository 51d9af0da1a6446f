// Browser tests of the page's tools (issue #4) on the served site: search, filters, the diagnosis,
// manual match with undo/redo and .vis.config save/load, language, URL hash, exports, minimap and
// keyboard, micro steps, and msprobe's own outputs (.vis.db through sql.js, legacy .vis JSON).
// Expected values are computed independently from the result arrays or read from msprobe's files.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import initSqlJs from 'sql.js';
import {
  FIX, OUT, requireBuild, launch, startServer, openPage, servedAllowlist, loads, waitLoad, resultSummary,
  expectedClasses, indexOf, cliBinary,
} from './helpers.mjs';

const NPU_LEAF = 'Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0';
const BENCH_LEAF = 'Module.module.model.layers.0.self_attn.o_proj.Linear.forward.0';

/** The single file of a reference folder whose name ends with `suffix`. */
function refFile(fixture, variant, suffix) {
  const dir = path.join(FIX, fixture, 'reference', variant);
  const f = fs.readdirSync(dir).find((x) => x.endsWith(suffix));
  assert.ok(f, `no *${suffix} in ${dir}`);
  return path.join(dir, f);
}

/** msprobe's .vis.db of a reference folder, opened with sql.js in Node. */
async function openDb(fixture, variant) {
  const SQL = await initSqlJs();
  return new SQL.Database(zlib.gunzipSync(fs.readFileSync(refFile(fixture, variant, '.vis.db.gz'))));
}

/** Loads the demo and waits for it. */
async function demoPage(browser, server, hash = '') {
  const o = await openPage(browser, servedAllowlist(server.url));
  await o.page.goto(server.url + hash);
  assert.equal(await waitLoad(o.page, 0), 'ready');
  return o;
}

/** Re-runs the demo without the layer mapping (the nomap variant: the manual-match pair is grey). */
async function noMapping(page) {
  const n = await loads(page);
  await page.uncheck('#opt-lm');
  await waitLoad(page, n);
}

/** The NPU rows of the details table: full tensor key → {field: text}. */
async function detailsTable(page, side = 'npu') {
  return page.evaluate((side) => {
    const out = {};
    for (const tr of document.querySelectorAll(`#details-compare tr[data-side="${side}"]`)) {
      const key = tr.querySelector('td.dkey').title;
      if (!key) continue;
      const f = {};
      for (const td of tr.querySelectorAll('td[data-field]')) f[td.dataset.field] = td.textContent;
      out[key] = f;
    }
    return out;
  }, side);
}

/** Waits until the details panel shows `name`, with rows. */
async function waitDetails(page, name) {
  await page.waitForFunction((n) => document.getElementById('details').dataset.node === n
    && document.querySelectorAll('#details-compare tr[data-side]').length > 0, name);
}

/** Everything a manual match may change, as the page has it. */
async function snapshot(page) {
  return page.evaluate(() => {
    const S = window.__probelens.state;
    const r = window.__probelens.lastResult;
    return {
      npuMatched: Array.from(r.npu.matched),
      benchMatched: Array.from(r.bench.matched),
      precision: Array.from(r.npu.precision, (x) => (Number.isNaN(x) ? null : x)),
      npuClasses: Array.from(S.classes.npu),
      benchClasses: Array.from(S.classes.bench),
      legend: [...document.querySelectorAll('#legend li')].map((li) => `${li.dataset.precision}=${li.dataset.count}`),
      summary: document.getElementById('summary').textContent,
      outlineMatched: [document.getElementById('npu-outline').dataset.matchedCount, document.getElementById('bench-outline').dataset.matchedCount],
    };
  });
}

/** Precision histogram like summary.json (one decimal, 'null'). */
function histogram(precision) {
  const h = {};
  for (const p of precision) {
    const k = p === null || Number.isNaN(p) ? 'null' : p.toFixed(1);
    h[k] = (h[k] ?? 0) + 1;
  }
  return h;
}

/** Clicks a button and returns the download saved under tests/out/<name>. */
async function downloadOf(page, selector, name) {
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
  const file = path.join(OUT, name);
  await dl.saveAs(file);
  return { file, suggested: dl.suggestedFilename() };
}

describe('page tools', () => {
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

  test('search by substring and regex reveals, centres and selects the node in both panes', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    await page.keyboard.press('/');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'search-input', '/ focuses the search');
    await page.keyboard.type('linear_proj');
    const expected = await page.evaluate(() => window.__probelens.lastResult.npu.names
      .map((n, i) => [n, i]).filter(([n]) => n.toLowerCase().includes('linear_proj')).map(([, i]) => i));
    await page.waitForFunction((n) => document.getElementById('search-list').dataset.count === String(n), expected.length);
    assert.ok(expected.length > 1);
    // Choose the first hit: it is revealed (ancestors expanded), selected, and its counterpart too.
    await page.click('#search-next');
    const first = expected[0];
    await page.waitForFunction((i) => document.getElementById(`npu-node-${i}`)?.getAttribute('aria-selected') === 'true', first);
    const state = await page.evaluate((i) => {
      const v = window.__probelens.views.npu;
      const m = v.model;
      const p = m.absPos(i);
      return {
        visible: m.isVisible(i), sel: v.selected, peer: window.__probelens.views.bench.peer,
        matched: window.__probelens.lastResult.npu.matched[i],
        inView: p.x * v.scale + v.tx < v.cssW && p.y * v.scale + v.ty > 0 && p.y * v.scale + v.ty < v.cssH,
      };
    }, first);
    assert.equal(state.visible, true);
    assert.equal(state.sel, first);
    assert.equal(state.inView, true, 'the node is centred in its pane');
    assert.equal(state.peer, state.matched, 'the counterpart is shown in the other pane');
    assert.match(await page.locator('#search-count').textContent(), new RegExp(`1 of ${expected.length}`));
    // Regex on the Bench side.
    await page.selectOption('#search-side', 'bench');
    await page.check('#search-regex');
    await page.fill('#search-input', 'layers\\.0\\.self_attn\\.[qkvo]_proj\\.Linear\\.forward');
    const re = /layers\.0\.self_attn\.[qkvo]_proj\.Linear\.forward/i;
    const bexp = await page.evaluate((src) => window.__probelens.lastResult.bench.names.filter((n) => new RegExp(src, 'i').test(n)).length, re.source);
    assert.equal(bexp, 4);
    await page.waitForFunction((n) => document.getElementById('search-list').dataset.count === String(n), bexp);
    await page.locator('#search-list [role=option]').nth(3).click();
    const b3 = await page.evaluate(() => window.__probelens.state.selection);
    assert.equal(b3.side, 'bench');
    await page.screenshot({ path: path.join(OUT, 'tools-search.png') });
    // An invalid expression is a message, not an exception.
    await page.fill('#search-input', 'layers.(0');
    await page.waitForFunction(() => document.getElementById('search-msg').textContent.includes('Invalid regular expression'));
    assert.equal(await page.locator('#search-list').getAttribute('data-count'), '0');
    assertClean();
    await context.close();
  });

  test('filters: every count equals the result; prev/next walk the list', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    const exp = await expectedClasses(page);
    const sum = await resultSummary(page);
    const kinds = await page.locator('#filter-kind option').evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
    const count = (arr, v) => arr.filter((c) => c === v).length;
    const labels = await page.evaluate(() => Object.fromEntries(window.__probelens.state.classes.bins.map((b, k) => [`cls:${k}`, b.cls])));
    let checked = 0;
    for (const [value] of kinds) {
      if (!value) continue;
      await page.selectOption('#filter-kind', value);
      const got = Number(await page.locator('#filter-list').getAttribute('data-count'));
      let want;
      if (value.startsWith('cls:')) want = count(exp.npu, labels[value]);
      else if (value === 'matched') want = sum.npu.matched;
      else if (value === 'unmatched') want = sum.npu.nodes - sum.npu.matched;
      assert.equal(got, want, `filter ${value}`);
      if (value.startsWith('cls:')) {
        assert.equal(String(got), await page.locator(`#legend li[data-precision="${labels[value]}"]`).getAttribute('data-count'), `legend ${value}`);
      }
      checked++;
    }
    assert.ok(checked >= 5, `pass, warning, error, unmatched, matched: ${JSON.stringify(kinds)}`);
    // The Bench side: matched / unmatched.
    await page.selectOption('#filter-side', 'bench');
    await page.selectOption('#filter-kind', 'unmatched');
    assert.equal(Number(await page.locator('#filter-list').getAttribute('data-count')), sum.bench.nodes - sum.bench.matched);
    // Error nodes on the NPU side, walked with next/prev.
    await page.selectOption('#filter-side', 'npu');
    const errKind = Object.entries(labels).find(([, c]) => c === 'error')[0];
    await page.selectOption('#filter-kind', errKind);
    const errors = exp.npu.map((c, i) => [c, i]).filter(([c]) => c === 'error').map(([, i]) => i);
    await page.click('#filter-next');
    await page.click('#filter-next');
    await page.waitForFunction((i) => window.__probelens.state.selection?.index === i, errors[1]);
    await page.click('#filter-prev');
    await page.waitForFunction((i) => window.__probelens.state.selection?.index === i, errors[0]);
    assert.match(await page.locator('#filter-count').textContent(), new RegExp(`1 of ${errors.length}`));
    await page.screenshot({ path: path.join(OUT, 'tools-filter.png') });
    // With -oc the overflow filters appear with the legend's counts.
    const n = await loads(page);
    await page.check('#opt-oc');
    await waitLoad(page, n);
    const ov = await page.evaluate(() => {
      const c = {};
      for (const o of window.__probelens.lastResult.npu.overflow) if (o) c[o] = (c[o] ?? 0) + 1;
      return c;
    });
    assert.ok(Object.keys(ov).length > 0);
    for (const [level, c] of Object.entries(ov)) {
      await page.selectOption('#filter-kind', `overflow:${level}`);
      assert.equal(Number(await page.locator('#filter-list').getAttribute('data-count')), c, `overflow ${level}`);
    }
    assertClean();
    await context.close();
  });

  test('first divergence is the diagnosis: the demo agrees with its mapping, parts ways at the CLI\'s node without', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    const Q = path.join(FIX, 'qwen_mix_statistics');
    for (const variant of ['map', 'nomap']) {
      if (variant === 'nomap') await noMapping(page);
      // The CLI's diagnosis of the demo's folders (step 0, rank 0 of the whole dump), every suspect.
      const args = ['diagnose', '-tp', path.join(Q, 'npu'), '-gp', path.join(Q, 'bench'), ...(variant === 'map' ? ['-lm', path.join(Q, 'layer_mapping.yaml')] : []), '--json', '--top', '1000'];
      const r = spawnSync(cliBinary(), args, { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const want = JSON.parse(r.stdout).suspects.filter((x) => x.step === 0 && x.rank === 0);
      assert.equal(want.length > 0, variant === 'nomap', `${variant}: the CLI's verdict`);
      await page.click('#diverge-btn');
      await page.waitForFunction(() => !!document.getElementById('diverge-msg').dataset.verdict);
      const got = await page.evaluate(() => ({
        d: window.__probelens.diagnosis.result,
        node: document.getElementById('diverge-msg').dataset.node,
        text: document.getElementById('diverge-msg').textContent,
        list: [...document.querySelectorAll('#diverge-list li')].map((li) => li.dataset.node),
      }));
      const strip = (x) => ({ node: x.node, bench_node: x.bench_node, step: x.step, rank: x.rank, pass: x.pass, score: x.score, why: x.why });
      assert.deepEqual(got.d.suspects.map(strip), want.map(strip), `${variant}: the page's suspects are the CLI's`);
      assert.deepEqual(got.list, want.map((x) => x.node));
      assert.equal(got.node, want[0]?.node ?? '', `${variant}: data-node`);
      if (!want.length) {
        assert.equal(got.d.verdict, 'agree');
        assert.match(got.text, /agree within their float noise/);
        continue;
      }
      assert.equal(got.d.verdict, 'diverged');
      // The top suspect is selected, its details shown, and named in the verdict line.
      const sel = await page.evaluate(() => {
        const s = window.__probelens.state.selection;
        return s && window.__probelens.lastResult[s.side].names[s.index];
      });
      assert.equal(sel, want[0].node, `${variant}: selected node`);
      assert.ok(got.text.includes(`in ${want[0].node} (forward pass)`), got.text);
      await waitDetails(page, want[0].node);
    }
    assert.match(await page.locator('#diverge-btn').getAttribute('title'), /probelens diagnose/);
    await page.screenshot({ path: path.join(OUT, 'tools-divergence.png') });
    assertClean();
    await context.close();
  });

  test('manual match gives msprobe\'s numbers; undo/redo/unmatch restore exactly; save → reload → load', async () => {
    const db = await openDb('qwen_mix_statistics', 'map');
    const row = db.exec(`SELECT precision_index, input_data, output_data FROM tb_nodes WHERE step = 0 AND rank = 0 AND data_source = 'NPU' AND node_name = '${NPU_LEAF}'`)[0].values[0];
    db.close();
    const want = { precision: row[0], io: { ...JSON.parse(row[1]), ...JSON.parse(row[2]) } };
    const { page, assertClean, context } = await demoPage(browser, server);
    await noMapping(page);
    const i = await indexOf(page, 'npu', NPU_LEAF);
    const j = await indexOf(page, 'bench', BENCH_LEAF);
    const before = await snapshot(page);
    assert.equal(before.npuMatched[i], -1, 'grey without the mapping');
    assert.equal(before.benchMatched[j], -1);
    // Pick: click the grey NPU node, then the grey Bench node; press M.
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await page.locator(`#npu-node-${i}`).click();
    await page.evaluate((j) => window.__probelens.select('bench', j), j);
    await page.locator(`#bench-node-${j}`).click({ modifiers: ['Control'] });
    assert.equal(await page.locator('#pick-npu').textContent(), NPU_LEAF);
    assert.equal(await page.locator('#pick-bench').textContent(), BENCH_LEAF);
    await page.evaluate(() => document.activeElement?.blur());
    await page.keyboard.press('m');
    await page.waitForFunction(([i, j]) => window.__probelens.lastResult.npu.matched[i] === j, [i, j]);
    const after = await snapshot(page);
    assert.equal(after.precision[i], want.precision, 'precision index equals the .vis.db written with the mapping');
    assert.notEqual(await page.locator(`#npu-node-${i}`).getAttribute('data-precision'), 'unmatched');
    assert.equal(await page.locator(`#bench-node-${j}`).getAttribute('data-matched'), 'true');
    // The pair and its backward twin (matched too, as tb-graph-ascend does; issue 24, item 8).
    const twin = await indexOf(page, 'npu', NPU_LEAF.replace('.forward.0', '.backward.0'));
    assert.equal(after.npuMatched[twin], await indexOf(page, 'bench', BENCH_LEAF.replace('.forward.0', '.backward.0')));
    assert.equal(Number(after.outlineMatched[0]), Number(before.outlineMatched[0]) + 2);
    assert.notDeepEqual(after.legend, before.legend, 'legend counts updated');
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await waitDetails(page, NPU_LEAF);
    const table = await detailsTable(page);
    assert.deepEqual(Object.keys(table).sort(), Object.keys(want.io).sort(), 'same tensors');
    for (const [key, fields] of Object.entries(want.io)) {
      for (const [f, v] of Object.entries(fields)) {
        if (f === 'data_name') continue;
        assert.equal(table[key][f], v, `${key} ${f}`);
      }
    }
    assert.equal(await page.locator('#pairs-list').getAttribute('data-count'), '2');
    await page.locator('#pairs-box').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(OUT, 'tools-manual-match.png') });
    // Save the hand-made pairs.
    const saved = await downloadOf(page, '#match-save', 'tools-manual.vis.config');
    assert.deepEqual(JSON.parse(fs.readFileSync(saved.file, 'utf8')), {
      [NPU_LEAF]: BENCH_LEAF, [NPU_LEAF.replace('.forward.0', '.backward.0')]: BENCH_LEAF.replace('.forward.0', '.backward.0'),
    });
    assert.match(saved.suggested, /\.vis\.config$/);
    // Undo restores exactly, redo re-applies, unmatch of the manual pair is the grey state again.
    await page.keyboard.press('Control+z');
    await page.waitForFunction(([i]) => window.__probelens.lastResult.npu.matched[i] === -1, [i]);
    await page.waitForFunction(() => document.getElementById('match-tool').dataset.redo === '1');
    assert.deepEqual(await snapshot(page), before, 'undo restores colours and numbers');
    await page.keyboard.press('Control+Shift+z');
    await page.waitForFunction(() => document.getElementById('match-tool').dataset.undo === '1');
    assert.deepEqual(await snapshot(page), after, 'redo re-applies');
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await page.click('#unmatch-btn');
    await page.waitForFunction(([i]) => window.__probelens.lastResult.npu.matched[i] === -1, [i]);
    assert.deepEqual(await snapshot(page), before, 'unmatch of the manual pair');
    await page.click('#undo-btn');
    await page.waitForFunction(([i, j]) => window.__probelens.lastResult.npu.matched[i] === j, [i, j]);
    assert.deepEqual(await snapshot(page), after, 'undo of the unmatch');
    // Reload the page, run without the mapping again, load the saved file: the same pair and numbers.
    await page.reload();
    await waitLoad(page, 0);
    await noMapping(page);
    assert.equal(await page.evaluate((i) => window.__probelens.lastResult.npu.matched[i], i), -1);
    await page.setInputFiles('#match-load', saved.file);
    await page.waitForFunction(([i, j]) => window.__probelens.lastResult.npu.matched[i] === j, [i, j]);
    assert.deepEqual(await snapshot(page), after, 'the saved file re-applies the same match');
    assert.match(await page.locator('#match-msg').textContent(), /Applied 2 pair/);
    assertClean();
    await context.close();
  });

  test('a match that displaces an automatic one, and unmatching an automatic one, undo exactly', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    const start = await snapshot(page);
    // Take the Bench partner of an automatically matched NPU leaf and match it with a grey NPU leaf.
    const pick = await page.evaluate(() => {
      const r = window.__probelens.lastResult;
      const g = r.npu;
      const leaf = (i) => g.subtreeEnd[i] === i + 1;
      const auto = g.names.findIndex((n, i) => leaf(i) && g.matched[i] >= 0 && n.startsWith('Torch.') && !Number.isNaN(g.precision[i]));
      const grey = g.names.findIndex((n, i) => leaf(i) && g.matched[i] < 0 && g.nodeType[i] === g.nodeType[auto] && i !== auto);
      return { auto, grey, bench: g.matched[auto] };
    });
    assert.ok(pick.auto >= 0 && pick.grey >= 0);
    await page.evaluate((p) => window.__probelens.select('npu', p.grey), pick);
    await page.evaluate((p) => window.__probelens.select('bench', p.bench), pick);
    await page.click(`#bench-node-${pick.bench}`, { modifiers: ['Control'] });
    await page.evaluate((p) => window.__probelens.select('npu', p.grey), pick);
    await page.evaluate(() => {
      document.getElementById('match-recursive').checked = false;
    });
    // The pick follows the selection: select the grey NPU node last, keep the Bench pick.
    assert.equal(await page.evaluate(() => window.__probelens.state.pick.bench), pick.bench);
    await page.click('#match-btn');
    await page.waitForFunction((p) => window.__probelens.lastResult.npu.matched[p.grey] === p.bench, pick);
    assert.equal(await page.evaluate((p) => window.__probelens.lastResult.npu.matched[p.auto], pick), -1, 'the automatic partner is displaced');
    await page.click('#undo-btn');
    await page.waitForFunction((p) => window.__probelens.lastResult.npu.matched[p.auto] === p.bench, pick);
    assert.deepEqual(await snapshot(page), start, 'undo re-applies the displaced automatic match exactly');
    // Unmatch an automatic pair, then undo: same colours, numbers and details strings.
    const mlp = await indexOf(page, 'npu', 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0');
    await page.evaluate((i) => window.__probelens.select('npu', i), mlp);
    await waitDetails(page, 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0');
    const table0 = await detailsTable(page);
    await page.click('#unmatch-btn');
    await page.waitForFunction((i) => window.__probelens.lastResult.npu.matched[i] === -1, mlp);
    await page.keyboard.press('Control+z');
    await page.waitForFunction((i) => window.__probelens.lastResult.npu.matched[i] >= 0, mlp);
    assert.deepEqual(await snapshot(page), start, 'undo of an automatic unmatch');
    await page.evaluate((i) => window.__probelens.select('npu', i), mlp);
    await waitDetails(page, 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0');
    assert.deepEqual(await detailsTable(page), table0, 'the details strings are the same');
    assertClean();
    await context.close();
  });

  test('language: every marked string switches, the choice is remembered; the URL hash re-opens the view', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    assert.equal(await page.locator('#npu-pane [data-act="fit"]').textContent(), 'Fit');
    await page.click('#lang-btn');
    assert.equal(await page.locator('#npu-pane [data-act="fit"]').textContent(), '适应');
    const untranslated = await page.evaluate(() => [...document.querySelectorAll('[data-i18n]')]
      .filter((e) => e.textContent === e.dataset.i18nKey && !['NPU'].includes(e.dataset.i18nKey))
      .map((e) => e.dataset.i18nKey));
    assert.deepEqual(untranslated, [], 'every marked text has a Chinese translation');
    assert.match(await page.locator('#summary').textContent(), /个节点/);
    assert.match(await page.locator('#search-input').getAttribute('placeholder'), /节点名称/);
    assert.equal(await page.evaluate(() => document.documentElement.lang), 'zh-CN');
    // Expand two modules, select a Bench node, and take the URL.
    const fwd = await indexOf(page, 'npu', 'Module.0.module.Float16Module.forward.0');
    await page.evaluate((i) => window.__probelens.toggle('npu', i, true), fwd);
    const bsel = await indexOf(page, 'bench', BENCH_LEAF);
    await page.evaluate((j) => window.__probelens.select('bench', j), bsel);
    await waitDetails(page, BENCH_LEAF);
    await page.waitForFunction(() => location.hash.includes('sel=bench'));
    await page.screenshot({ path: path.join(OUT, 'tools-chinese.png') });
    const url = page.url();
    const view = () => page.evaluate(() => {
      const S = window.__probelens.state;
      const r = window.__probelens.lastResult;
      const open = (m) => m.g.names.filter((_, i) => m.expanded[i]);
      return { sel: S.selection && r[S.selection.side].names[S.selection.index], side: S.selection?.side, npu: open(S.models.npu), bench: open(S.models.bench), lang: document.documentElement.lang };
    });
    const v0 = await view();
    // Remembered: a reload without the hash keeps Chinese.
    await page.goto(server.url);
    await waitLoad(page, 0);
    assert.equal(await page.locator('#npu-pane [data-act="fit"]').textContent(), '适应');
    await page.click('#lang-btn');
    assert.equal(await page.locator('#npu-pane [data-act="fit"]').textContent(), 'Fit');
    await context.close();
    // A fresh browser context (no storage) with the link re-opens the same view.
    const o2 = await openPage(browser, servedAllowlist(server.url));
    await o2.page.goto(url);
    await waitLoad(o2.page, 0);
    await o2.page.waitForFunction((n) => document.getElementById('details').dataset.node === n, BENCH_LEAF);
    const v1 = await o2.page.evaluate(() => {
      const S = window.__probelens.state;
      const r = window.__probelens.lastResult;
      const open = (m) => m.g.names.filter((_, i) => m.expanded[i]);
      return { sel: S.selection && r[S.selection.side].names[S.selection.index], side: S.selection?.side, npu: open(S.models.npu), bench: open(S.models.bench), lang: document.documentElement.lang };
    });
    assert.deepEqual(v1, v0, 'the hash restores selection, expanded nodes and language');
    assert.equal(await o2.page.locator(`#bench-node-${bsel}`).getAttribute('aria-selected'), 'true');
    assertClean();
    o2.assertClean();
    await o2.context.close();
  });

  test('exports: PNG of a pane, CSV of the node table, CSV of all compared tensors', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    const png = await downloadOf(page, '#png-npu', 'tools-export-npu.png');
    assert.deepEqual([...fs.readFileSync(png.file).subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const i = await indexOf(page, 'npu', NPU_LEAF);
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await waitDetails(page, NPU_LEAF);
    const node = await downloadOf(page, '#csv-node', 'tools-export-node.csv');
    const lines = fs.readFileSync(node.file, 'utf8').trim().split(/\r\n/);
    assert.match(lines[0], /^Tensor,Side,type,dtype,shape,.*,Max,Min,Mean,Norm,.*,Result,Err_message$/);
    assert.equal(lines.length - 1, await page.locator('#details-compare tr[data-side]').count());
    const all = await downloadOf(page, '#csv-all', 'tools-export-all.csv');
    const rows = fs.readFileSync(all.file, 'utf8').trim().split(/\r\n/);
    assert.equal(rows[0], 'NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Max diff,Min diff,Mean diff,L2norm diff,'
      + 'MaxRelativeErr,MinRelativeErr,MeanRelativeErr,NormRelativeErr,NPU max,NPU min,NPU mean,NPU l2norm,Bench max,Bench min,Bench mean,Bench l2norm,'
      + 'Requires_grad Consistent,Result,Err_message');
    // One row per tensor of every matched NPU node, as in msprobe's .vis.db.
    const db = await openDb('qwen_mix_statistics', 'map');
    const res = db.exec("SELECT input_data, output_data FROM tb_nodes WHERE step = 0 AND rank = 0 AND data_source = 'NPU' AND matched_node_link != '[]'")[0].values;
    db.close();
    const tensors = res.reduce((s, [a, b]) => s + Object.keys(JSON.parse(a || '{}')).length + Object.keys(JSON.parse(b || '{}')).length, 0);
    assert.equal(rows.length - 1, tensors);
    const leafRow = rows.find((r) => r.startsWith(`${NPU_LEAF}.input.0,`));
    assert.ok(leafRow, 'the leaf input row');
    assert.match(leafRow, /,0\.32393231987953186,/);
    assertClean();
    await context.close();
  });

  test('minimap, keyboard zoom/pan, shortcut help', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    await page.click('#npu-pane [data-act="expand-all"]');
    const mm = page.locator('.minimap[data-side="npu"]');
    assert.equal(await mm.isVisible(), true);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    // Click in the minimap: the view centres on that world point.
    const box = await mm.boundingBox();
    await mm.click({ position: { x: box.width / 2, y: box.height * 0.8 } });
    const centred = await page.evaluate(([fx, fy]) => {
      const v = window.__probelens.views.npu;
      const m = window.__probelens.minimaps.npu;
      // In minimap pixels: the centre of the pane maps back to the clicked point.
      return [Math.abs(m.ox + ((v.cssW / 2 - v.tx) / v.scale) * m.k - fx), Math.abs(m.oy + ((v.cssH / 2 - v.ty) / v.scale) * m.k - fy)];
    }, [box.width / 2, box.height * 0.8]);
    assert.ok(centred[0] < 2 && centred[1] < 2, `centred ${centred}`);
    const vp = await mm.getAttribute('data-viewport');
    assert.ok(vp, 'the viewport rectangle is drawn');
    // W zooms about the pointer, A/D pan.
    const cv = await page.locator('#npu-canvas').boundingBox();
    await page.mouse.move(cv.x + 300, cv.y + 250);
    const world = () => page.evaluate(() => {
      const v = window.__probelens.views.npu;
      return { s: v.scale, tx: v.tx, x: (300 - v.tx) / v.scale, y: (250 - v.ty) / v.scale };
    });
    const w0 = await world();
    await page.keyboard.press('w');
    const w1 = await world();
    assert.ok(w1.s > w0.s * 1.2, 'W zooms in');
    assert.ok(Math.abs(w1.x - w0.x) < 0.5 && Math.abs(w1.y - w0.y) < 0.5, 'about the pointer');
    await page.keyboard.press('s');
    assert.ok(Math.abs((await world()).s - w0.s) < 1e-6, 'S zooms out');
    await page.keyboard.press('d');
    assert.ok(Math.abs((await world()).tx - (w0.tx - 80)) < 1e-6, 'D pans');
    await page.keyboard.press('?');
    assert.equal(await page.locator('#help-pop').isVisible(), true);
    await page.keyboard.press('Escape');
    assert.equal(await page.locator('#help-pop').isVisible(), false);
    await page.locator('#npu-pane').screenshot({ path: path.join(OUT, 'tools-minimap.png') });
    assertClean();
    await context.close();
  });

  test('micro steps: the selector filters the root children by micro step', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-micro-'));
    try {
      for (const side of ['npu', 'bench']) writeMicroStepDump(path.join(dir, side));
      const { page, assertClean, context } = await demoPage(browser, server);
      let n = await loads(page);
      await page.setInputFiles('#npu-dir', path.join(dir, 'npu'));
      await waitLoad(page, n);
      n = await loads(page);
      await page.setInputFiles('#bench-dir', path.join(dir, 'bench'));
      await waitLoad(page, n);
      assert.equal(await page.evaluate(() => window.__probelens.lastResult.microSteps), 2);
      assert.equal(await page.isVisible('#micro-select'), true);
      const rootKids = () => page.evaluate(() => {
        const m = window.__probelens.state.models.npu;
        return Array.from(m.childList.subarray(m.childStart[0], m.childStart[1]), (i) => m.g.names[i]);
      });
      assert.equal((await rootKids()).length, 4);
      await page.selectOption('#micro-select', '1');
      assert.deepEqual(await rootKids(), ['Module.net.Net.forward.1', 'Module.net.Net.backward.1']);
      assert.equal(await page.locator('#npu-outline').getAttribute('data-row-count'), '3');
      await page.selectOption('#micro-select', '-1');
      assert.equal((await rootKids()).length, 4);
      assertClean();
      await context.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a .vis.db written by msprobe opens with the counts of its summary.json; steps and ranks switch', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    for (const [fixture, variant, pairs] of [
      ['qwen_mix_statistics', 'map', [[0, 0], [1, 0]]],
      ['qwen_two_ranks', 'map', [[0, 1], [1, 0]]],
    ]) {
      const n = await loads(page);
      await page.setInputFiles('#vis-file', refFile(fixture, variant, '.vis.db.gz'));
      await waitLoad(page, n);
      assert.equal(await page.evaluate(() => window.__probelens.state.mode), 'vis');
      for (const [step, rank] of pairs) {
        for (const [key, v] of [['step', step], ['rank', rank]]) {
          if (await page.locator(`#${key}-select`).inputValue() !== String(v)) {
            const k = await loads(page);
            await page.selectOption(`#${key}-select`, String(v));
            await waitLoad(page, k);
          }
        }
        await assertVisSummary(page, fixture, variant, step, rank);
      }
    }
    // Details come from the file's strings.
    const n = await loads(page);
    await page.setInputFiles('#vis-file', refFile('qwen_mix_statistics', 'map', '.vis.db.gz'));
    await waitLoad(page, n);
    const i = await indexOf(page, 'npu', NPU_LEAF);
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await waitDetails(page, NPU_LEAF);
    assert.equal(await page.locator('#details-compare tr[data-side="npu"][data-section="input"] td[data-field="Max"]').first().textContent(), '0.32393231987953186');
    // Manual matching works on a .vis.db (state.test.mjs); this pair is already matched in the file.
    assert.equal(await page.locator('#match-btn').isDisabled(), true, 'the picked pair is already matched');
    assert.match(await page.textContent('#match-preview'), /already matched/);
    await page.screenshot({ path: path.join(OUT, 'tools-visdb.png') });
    // Back to dump folders: the demo runs through the core again.
    const k = await loads(page);
    await page.click('#demo-btn');
    await waitLoad(page, k);
    assert.equal(await page.evaluate(() => window.__probelens.state.mode), 'dump');
    assertClean();
    await context.close();
  });

  test('legacy .vis JSON (msprobe 8.1) opens with the counts of its summary.json', async () => {
    const { page, assertClean, context } = await demoPage(browser, server);
    for (const [fixture, variant] of [
      ['qwen_mix_statistics', 'legacy_vis_json_map_step0'],
      ['qwen_md5', 'legacy_vis_json_map_step0'],
      ['qwen_single_graph', 'legacy_vis_json_build_npu_step0'],
    ]) {
      const file = refFile(fixture, variant, '.vis.gz');
      const ref = JSON.parse(fs.readFileSync(path.join(path.dirname(file), 'summary.json'), 'utf8'))[0];
      const n = await loads(page);
      await page.setInputFiles('#vis-file', file);
      await waitLoad(page, n);
      const got = await page.evaluate(() => {
        const r = window.__probelens.lastResult;
        const side = (g) => g && ({
          nodes: g.names.length,
          matched: Array.from(g.matched).filter((m) => m >= 0).length,
          precision: Array.from(g.precision, (p) => (Number.isNaN(p) ? null : p)),
        });
        return { graphType: r.graphType, npu: side(r.npu), bench: side(r.bench), colors: Object.keys(r.nodeColors).length };
      });
      const label = `${fixture}/${variant}`;
      if (ref.Bench) {
        assert.equal(got.graphType, 'compare', label);
        for (const [s, k] of [['npu', 'NPU'], ['bench', 'Bench']]) {
          assert.equal(got[s].nodes, ref[k].nodes, `${label} ${k} nodes`);
          assert.equal(got[s].matched, ref[k].matched, `${label} ${k} matched`);
          assert.deepEqual(histogram(got[s].precision), ref[k].precision_index, `${label} ${k} precision histogram`);
        }
        assert.equal(await page.locator('#summary').getAttribute('data-npu-nodes'), String(ref.NPU.nodes));
        assert.equal(await page.locator('#summary').getAttribute('data-matched-npu'), String(ref.NPU.matched));
        assert.equal(await page.locator('#npu-outline').getAttribute('data-matched-count'), String(ref.NPU.matched));
        assert.equal(got.colors >= 3, true, 'the legend of the file');
      } else {
        assert.equal(got.graphType, 'build', label);
        assert.equal(got.npu.nodes, ref.NPU.nodes, `${label} nodes`);
        assert.equal(got.bench, null);
      }
    }
    // Legacy continuous bins: five ranged classes plus unmatched.
    const n = await loads(page);
    await page.setInputFiles('#vis-file', refFile('qwen_mix_statistics', 'legacy_vis_json_map_step0', '.vis.gz'));
    await waitLoad(page, n);
    assert.equal(await page.locator('#legend li[data-precision^="bin"]').count(), 5);
    const counts = await page.locator('#legend li').evaluateAll((ls) => ls.reduce((s, l) => s + Number(l.dataset.precision && !l.dataset.overflow ? l.dataset.count : 0), 0));
    assert.equal(counts, (await resultSummary(page)).npu.nodes, 'legend counts add up to the nodes');
    await page.screenshot({ path: path.join(OUT, 'tools-legacy-vis.png') });
    assertClean();
    await context.close();
  });
});

/** Asserts the shown result equals the summary.json of a .vis.db for (step, rank). */
async function assertVisSummary(page, fixture, variant, step, rank) {
  const all = JSON.parse(fs.readFileSync(path.join(FIX, fixture, 'reference', variant, 'summary.json'), 'utf8'));
  const graphs = (Array.isArray(all) ? all : [all]).flatMap((d) => d.graphs);
  const ref = (src) => graphs.find((g) => g.step === step && g.rank === rank && g.data_source === src);
  const sum = await resultSummary(page);
  const label = `${fixture}/${variant} step ${step} rank ${rank}`;
  for (const [s, src] of [['npu', 'NPU'], ['bench', 'Bench']]) {
    const r = ref(src);
    assert.equal(sum[s].nodes, r.nodes, `${label} ${src} nodes`);
    assert.equal(sum[s].matched, r.matched, `${label} ${src} matched`);
    if (src === 'NPU') assert.deepEqual(sum[s].precision, r.precision_index, `${label} precision histogram`);
  }
  assert.equal(await page.locator('#summary').getAttribute('data-npu-nodes'), String(ref('NPU').nodes));
  assert.equal(await page.locator('#summary').getAttribute('data-matched-npu'), String(ref('NPU').matched));
  assert.equal(await page.locator('#summary').getAttribute('data-bench-nodes'), String(ref('Bench').nodes));
}

/**
 * A tiny statistics dump whose root has forward/backward/forward/backward modules, so msprobe's
 * micro-step split gives two micro steps.
 */
function writeMicroStepDump(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const stat = (v) => ({ type: 'torch.Tensor', dtype: 'torch.float32', shape: [2, 2], Max: v, Min: -v, Mean: 0, Norm: v, requires_grad: false });
  const construct = {};
  const data = {};
  for (const [k, dir2] of [[0, 'forward'], [0, 'backward'], [1, 'forward'], [1, 'backward']]) {
    const mod = `Module.net.Net.${dir2}.${k}`;
    construct[mod] = null;
    data[mod] = { input_args: [stat(1)], input_kwargs: {}, output: [stat(2)] };
    if (dir2 === 'forward') {
      const api = `Torch.add.${k}.forward`;
      construct[api] = mod;
      data[api] = { input_args: [stat(1), stat(1)], input_kwargs: {}, output: [stat(2)] };
    }
  }
  fs.writeFileSync(path.join(dir, 'construct.json'), JSON.stringify(construct));
  fs.writeFileSync(path.join(dir, 'stack.json'), JSON.stringify({ 0: [[], ['File /x.py, line 1, in <module>, \n main()']] }));
  fs.writeFileSync(path.join(dir, 'dump.json'), JSON.stringify({ task: 'statistics', level: 'mix', framework: 'pytorch', dump_data_dir: null, data }));
}
