// The page's state in use (issue 24, items 3, 4, 5 and 8): the demo is labelled as the demo and its
// mapping never applies to the user's folders, a fitting bundled template is offered with its gain;
// manual matches survive re-runs per (step, rank) and an action that would drop them asks first;
// what Match will do is said before it happens (displaced matches, the backward twin, recursive
// results), a grey pick is not replaced by a matched node's counterpart, keyboard moves pick nothing;
// on an opened .vis.db every matching control says why it cannot work, in place.
// Real wasm core in Chromium; the numbers are msprobe's reference summaries.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import initSqlJs from 'sql.js';
import {
  FIX, OUT, requireBuild, launch, startServer, openPage, servedAllowlist, loads, waitLoad, resultSummary,
  choose, assertMatchesReference, reference, indexOf,
} from './helpers.mjs';

const MIX = path.join(FIX, 'qwen_mix_statistics');
const TWO = path.join(FIX, 'qwen_two_ranks');
const NPU_LEAF = 'Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0';
const BENCH_LEAF = 'Module.module.model.layers.0.self_attn.o_proj.Linear.forward.0';
const NPU_LAYER = 'Module.0.module.module.decoder.layers.0.TransformerLayer.forward.0';
const BENCH_LAYER = 'Module.module.model.layers.0.Qwen2DecoderLayer.forward.0';
const TEMPLATE = 'qwen2.5_mindspeed-llm_to_llamafactory.yaml';

/** Loads the demo and waits for it. */
async function demoPage(browser, server) {
  const o = await openPage(browser, servedAllowlist(server.url));
  await o.page.goto(server.url);
  assert.equal(await waitLoad(o.page, 0), 'ready');
  return o;
}

/** Re-runs without the layer mapping and waits. */
async function noMapping(page) {
  const n = await loads(page);
  await page.uncheck('#opt-lm');
  await waitLoad(page, n);
}

const manualCount = (page) => page.evaluate(() => window.__probelens.state.manual.size);
const matchedOf = (page, side, i) => page.evaluate(([s, k]) => window.__probelens.lastResult[s].matched[k], [side, i]);

describe('the page\'s state: demo, mapping offer, manual matches', () => {
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

  test('item 3: the demo is labelled; the user\'s pair runs without the demo\'s mapping (msprobe\'s counts) and the fitting template is offered with its gain; accepting it gives the counts of -lm <template>', async () => {
    const { page, context, assertClean } = await demoPage(browser, server);
    assert.match(await page.textContent('#npu-src'), /the bundled demo/);
    assert.match(await page.textContent('#load-compact'), /demo/);
    assert.equal(await page.isVisible('#template-offer'), false, 'no offer for the demo');
    // The user's two folders: the demo's mapping is not applied, -lm is off, nothing is chosen.
    assert.equal(await choose(page, 'npu', path.join(MIX, 'npu', 'step0', 'proc23598')), 'ready');
    assert.equal(await choose(page, 'bench', path.join(MIX, 'bench', 'step0', 'proc23368')), 'ready');
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0);
    assert.equal(await page.inputValue('#mapping-select'), '');
    assert.equal(await page.isChecked('#opt-lm'), false);
    assert.equal(await page.locator('#mapping-select option[value="demo"]').count(), 0, 'the demo\'s mapping left the choices');
    assert.doesNotMatch(await page.textContent('#npu-src'), /demo/);
    // The offer, at once; its gain counted in the background.
    await page.waitForSelector('#template-offer:not([hidden])');
    assert.equal(await page.getAttribute('#template-offer', 'data-template'), TEMPLATE);
    const map = reference('qwen_mix_statistics', 'map', 0, 0, 'NPU').matched;
    const nomap = reference('qwen_mix_statistics', 'nomap', 0, 0, 'NPU').matched;
    await page.waitForFunction(() => document.getElementById('template-offer').dataset.gain !== '');
    assert.equal(Number(await page.getAttribute('#template-offer', 'data-gain')), map);
    assert.equal(Number(await page.getAttribute('#template-offer', 'data-now')), nomap);
    assert.match(await page.textContent('#template-offer'), new RegExp(`MindSpeed-LLM.*HF transformers.*${TEMPLATE.replace(/\./g, '\\.')}.*would match ${map} NPU nodes instead of ${nomap}`));
    await page.screenshot({ path: path.join(OUT, 'state-offer.png') });
    // One click: the template, -lm on, the counts `probelens graph_visualize -lm <template>` gives
    // (tests/fidelity.rs: the bundled template gives msprobe's `map` result on this fixture).
    const n = await loads(page);
    await page.click('#offer-accept');
    await waitLoad(page, n);
    assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'map', 0, 0);
    assert.equal(await page.inputValue('#mapping-select'), `tpl:${TEMPLATE}`);
    assert.equal(await page.isChecked('#opt-lm'), true);
    assert.equal(await page.isVisible('#template-offer'), false);
    assertClean();
    await context.close();
  });

  test('item 4: manual matches are kept per (step, rank) across -oc and step/rank changes; Demo and a .vis.db ask first', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    await waitLoad(page, 0);
    // A step/rank tree without a mapping.
    await choose(page, 'npu', path.join(TWO, 'npu'));
    await choose(page, 'bench', path.join(TWO, 'bench'));
    assertMatchesReference(await resultSummary(page), 'qwen_two_ranks', 'nomap', 0, 0);
    const i = await indexOf(page, 'npu', NPU_LEAF);
    const j = await indexOf(page, 'bench', BENCH_LEAF);
    assert.equal(await matchedOf(page, 'npu', i), -1);
    await page.evaluate(([a, b]) => {
      window.__probelens.select('npu', a);
      window.__probelens.select('bench', b);
    }, [i, j]);
    await page.click('#match-btn');
    await page.waitForFunction(([a, b]) => window.__probelens.lastResult.npu.matched[a] === b, [i, j]);
    const pairs = await manualCount(page);
    assert.equal(pairs, 2, 'the pair and its backward twin');
    // -oc re-runs: the pairs come back by name.
    let n = await loads(page);
    await page.check('#opt-oc');
    await waitLoad(page, n);
    assert.equal(await manualCount(page), pairs);
    assert.equal(await matchedOf(page, 'npu', await indexOf(page, 'npu', NPU_LEAF)), await indexOf(page, 'bench', BENCH_LEAF));
    assert.match(await page.textContent('#match-msg'), /Re-applied 2 manual pair\(s\) by name/);
    // Another rank has its own (none); back to rank 0, they return.
    n = await loads(page);
    await page.selectOption('#rank-select', '1');
    await waitLoad(page, n);
    assert.equal(await manualCount(page), 0);
    n = await loads(page);
    await page.selectOption('#rank-select', '0');
    await waitLoad(page, n);
    assert.equal(await manualCount(page), pairs);
    // Demo would discard them: it asks; "no" keeps everything as it is.
    const asked = [];
    page.once('dialog', (d) => {
      asked.push(d.message());
      d.dismiss();
    });
    await page.click('#demo-btn');
    await page.waitForTimeout(300);
    assert.equal(asked.length, 1);
    assert.match(asked[0], /Demo discards your 2 manual match\(es\)/);
    assert.equal(await manualCount(page), pairs);
    assert.equal((await resultSummary(page)).npu.nodes, reference('qwen_two_ranks', 'nomap', 0, 0, 'NPU').nodes);
    // Opening a .vis.db asks too; "yes" opens it, and the cards say the folders are not in use.
    page.once('dialog', (d) => {
      asked.push(d.message());
      d.accept();
    });
    const dir = path.join(MIX, 'reference', 'map');
    n = await loads(page);
    await page.setInputFiles('#vis-file', path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith('.vis.db.gz'))));
    await waitLoad(page, n);
    assert.match(asked[1], /Opening a \.vis\.db discards your 2 manual match\(es\)/);
    assert.equal(await manualCount(page), 0);
    assert.match(await page.textContent('#npu-src'), /not used/);
    assert.match(await page.textContent('#load-compact'), /msprobe output/);
    assertClean();
    await context.close();
  });

  test('item 8: Match says what it will do, keeps a grey pick, matches the backward twin, explains a recursive result; keyboard moves pick nothing', async () => {
    const { page, context, assertClean } = await demoPage(browser, server);
    await noMapping(page);
    const i = await indexOf(page, 'npu', NPU_LEAF);
    const j = await indexOf(page, 'bench', BENCH_LEAF);
    // A grey NPU pick, then a matched Bench node: the grey pick stays.
    const matchedBench = await page.evaluate(() => Array.from(window.__probelens.lastResult.bench.matched).findIndex((m, k) => m >= 0 && k > 0));
    await page.evaluate((a) => window.__probelens.select('npu', a), i);
    await page.evaluate((b) => window.__probelens.select('bench', b), matchedBench);
    assert.equal(await page.textContent('#pick-npu'), NPU_LEAF, 'the grey NPU pick is not replaced');
    // The preview before Match: the pair, and the automatic match it would displace.
    const benchName = await page.evaluate((b) => window.__probelens.lastResult.bench.names[b], matchedBench);
    const preview = await page.textContent('#match-preview');
    assert.ok(preview.includes(`Match will pair ${NPU_LEAF} ⇄ ${benchName}.`) || /Cannot match a module with a API|Cannot match a API with a module/.test(preview), preview);
    // Keyboard moves in the outline do not pick.
    await page.evaluate((b) => window.__probelens.select('bench', b), j);
    await page.locator(`#bench-node-${j}`).click();
    assert.equal(await page.textContent('#pick-bench'), BENCH_LEAF);
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowDown');
    assert.equal(await page.textContent('#pick-bench'), BENCH_LEAF, 'the Bench pick did not follow the keyboard');
    assert.equal(await page.textContent('#pick-npu'), NPU_LEAF);
    // The preview names the backward twin; Match pairs both.
    const twinN = NPU_LEAF.replace('.forward.0', '.backward.0');
    const twinB = BENCH_LEAF.replace('.forward.0', '.backward.0');
    assert.match(await page.textContent('#match-preview'), new RegExp(`backward twin ${twinN.replace(/\./g, '\\.')} ⇄ ${twinB.replace(/\./g, '\\.')} is matched too`));
    await page.evaluate(() => document.activeElement?.blur());
    await page.keyboard.press('m');
    await page.waitForFunction(([a, b]) => window.__probelens.lastResult.npu.matched[a] === b, [i, j]);
    assert.equal(await matchedOf(page, 'npu', await indexOf(page, 'npu', twinN)), await indexOf(page, 'bench', twinB));
    assert.match(await page.textContent('#match-msg'), /Matched 2 NPU node\(s\)\. Twin matched too/);
    // A module with an API: refused before anything happens, with the reason (also on M).
    await page.evaluate((a) => window.__probelens.select('npu', a), await indexOf(page, 'npu', NPU_LAYER));
    const api = await page.evaluate(() => window.__probelens.lastResult.bench.nodeType.findIndex((t) => t === 1));
    await page.evaluate((b) => window.__probelens.select('bench', b), api);
    assert.match(await page.textContent('#match-preview'), /Cannot match a module with a API/);
    assert.equal(await page.locator('#match-btn').isDisabled(), true);
    await page.keyboard.press('m');
    assert.match(await page.textContent('#match-msg'), /Cannot match a module with a API/);
    // Recursive on the decoder layers: which descendants could not pair, and why.
    const li = await indexOf(page, 'npu', NPU_LAYER);
    const lj = await indexOf(page, 'bench', BENCH_LAYER);
    await page.evaluate(([a, b]) => {
      window.__probelens.select('npu', a);
      window.__probelens.select('bench', b);
    }, [li, lj]);
    assert.ok(await page.isChecked('#match-recursive'));
    assert.match(await page.textContent('#match-preview'), /Recursive: \d+ of \d+ descendants have a Bench node of the same name below it/);
    await page.click('#match-btn');
    await page.waitForFunction(([a, b]) => window.__probelens.lastResult.npu.matched[a] === b, [li, lj]);
    const msg = await page.textContent('#match-msg');
    assert.match(msg, /Recursive: (\d+) of (\d+) descendants matched; (\d+) have no Bench node of the same name below Module\.module\.model\.layers\.0\.Qwen2DecoderLayer\.forward\.0 \(e\.g\. .+: no .+\)/);
    await page.locator('#match-tool').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(OUT, 'state-match.png') });
    assertClean();
    await context.close();
  });

  test('item 5: matching works on an opened .vis.db (re-compared from its statistics), saved as .vis.config and as an updated .vis.db; a legacy .vis says why not', async () => {
    const { page, context, assertClean } = await demoPage(browser, server);
    const refDir = (v) => path.join(MIX, 'reference', v);
    const dbOf = (v) => path.join(refDir(v), fs.readdirSync(refDir(v)).find((f) => f.endsWith('.vis.db.gz')));
    let n = await loads(page);
    await page.setInputFiles('#vis-file', dbOf('nomap'));
    await waitLoad(page, n);
    assert.equal(await page.isVisible('#match-hint'), true);
    const i = await indexOf(page, 'npu', NPU_LEAF);
    const j = await indexOf(page, 'bench', BENCH_LEAF);
    assert.equal(await matchedOf(page, 'npu', i), -1, 'grey in the file without a mapping');
    await page.evaluate(([a, b]) => {
      window.__probelens.select('npu', a);
      window.__probelens.select('bench', b);
    }, [i, j]);
    assert.equal(await page.locator('#match-btn').isDisabled(), false);
    await page.click('#match-btn');
    await page.waitForFunction(([a, b]) => window.__probelens.lastResult.npu.matched[a] === b, [i, j]);
    // The re-compared statistics equal what msprobe wrote for this pair with the mapping.
    const SQL = await initSqlJs();
    const ref = new SQL.Database(zlib.gunzipSync(fs.readFileSync(dbOf('map'))));
    const want = JSON.parse(ref.exec(`SELECT input_data FROM tb_nodes WHERE step = 0 AND rank = 0 AND data_source = 'NPU' AND node_name = '${NPU_LEAF}'`)[0].values[0][0]);
    ref.close();
    await page.evaluate((a) => window.__probelens.select('npu', a), i);
    await page.waitForFunction((name) => document.getElementById('details').dataset.node === name && document.querySelectorAll('#details-compare tr[data-side="npu"]').length > 0, NPU_LEAF);
    const key = `${NPU_LEAF}.input.0`;
    const got = await page.evaluate((k) => {
      const tr = [...document.querySelectorAll('#details-compare tr[data-side="npu"]')].find((r) => r.querySelector('td.dkey')?.title === k);
      const f = {};
      for (const td of tr?.querySelectorAll('td[data-field]') ?? []) f[td.dataset.field] = td.textContent;
      return f;
    }, key);
    for (const field of ['Max diff', 'Min diff', 'Mean diff', 'L2norm diff', 'MaxRelativeErr', 'MinRelativeErr', 'MeanRelativeErr', 'NormRelativeErr']) {
      assert.equal(got[field], want[key][field], `${field} of ${key}`);
    }
    // Saved as a .vis.config and as the updated .vis.db (its rows changed and marked modified).
    const [cfg] = await Promise.all([page.waitForEvent('download'), page.click('#match-save')]);
    const cfgFile = path.join(OUT, 'state-visdb.vis.config');
    await cfg.saveAs(cfgFile);
    assert.equal(JSON.parse(fs.readFileSync(cfgFile, 'utf8'))[NPU_LEAF], BENCH_LEAF);
    assert.equal(await page.isVisible('#match-save-db'), true);
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#match-save-db')]);
    const dbFile = path.join(OUT, 'state-visdb.matched.vis.db');
    await dl.saveAs(dbFile);
    assert.match(dl.suggestedFilename(), /\.matched\.vis\.db$/);
    const saved = new SQL.Database(fs.readFileSync(dbFile));
    const row = saved.exec(`SELECT matched_node_link, modified, precision_index FROM tb_nodes WHERE step = 0 AND rank = 0 AND data_source = 'NPU' AND node_name = '${NPU_LEAF}'`)[0].values[0];
    assert.equal(JSON.parse(row[0]).at(-1), BENCH_LEAF);
    assert.equal(row[1], 1);
    assert.equal(row[2], await page.evaluate((a) => window.__probelens.lastResult.npu.precision[a], i));
    saved.close();
    // The saved file opens with the pair matched.
    n = await loads(page);
    page.once('dialog', (d) => d.accept());
    await page.setInputFiles('#vis-file', dbFile);
    await waitLoad(page, n);
    assert.equal(await matchedOf(page, 'npu', await indexOf(page, 'npu', NPU_LEAF)), await indexOf(page, 'bench', BENCH_LEAF));
    // A legacy .vis cannot be matched: the reason, in place.
    n = await loads(page);
    await page.setInputFiles('#vis-file', path.join(refDir('legacy_vis_json_nomap_step0'), fs.readdirSync(refDir('legacy_vis_json_nomap_step0')).find((f) => /\.vis(\.gz)?$/.test(f))));
    await waitLoad(page, n);
    const why = /a legacy \.vis is read as it is; manual matching works on a \.vis\.db or the dump folders/;
    assert.equal(await page.isVisible('#match-hint'), false, 'no "Click a grey node" hint');
    assert.match(await page.textContent('#match-preview'), why);
    assert.equal(await page.locator('#match-btn').isDisabled(), true);
    await page.evaluate(() => window.__probelens.select('npu', 3));
    await page.evaluate(() => document.activeElement?.blur());
    await page.keyboard.press('m');
    assert.match(await page.textContent('#match-msg'), why);
    await page.click('#mapping-toggle');
    assert.match(await page.getAttribute('#mp-accept-all', 'title'), why);
    assertClean();
    await context.close();
  });
});
