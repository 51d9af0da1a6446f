// Browser tests of the mapping panel (issue #8, page part): the layer-mapping editor (syntax errors at
// their line, valid edits re-run in the worker with a count diff and re-applied manual matches),
// match suggestions (accept one / accept all ≥ score, undoable) and the export of the hand-made
// pairs as a layer_mapping.yaml, on the served site and on the single file over file://.
// msprobe's pairs come from its own .vis.db (reference/map of the mix fixture), read with sql.js.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import initSqlJs from 'sql.js';
import {
  FIX, SINGLE_URL, requireBuild, launch, startServer, openPage, servedAllowlist, fileAllowlist, loads, waitLoad,
  resultSummary, reference,
} from './helpers.mjs';

const MIX = path.join(FIX, 'qwen_mix_statistics');
const MAPPING_TEXT = fs.readFileSync(path.join(MIX, 'layer_mapping.yaml'), 'utf8');
/** Screenshots go to a temp dir (printed), not into the repository. */
const SHOTS = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-mapping-'));
console.log(`mapping.test: screenshots in ${SHOTS}`);

/** msprobe's (NPU name → Bench name) pairs of step 0 rank 0 with the hand-written mapping. */
async function msprobePairs() {
  const dir = path.join(MIX, 'reference', 'map');
  const gz = fs.readdirSync(dir).find((f) => f.endsWith('.vis.db.gz'));
  const SQL = await initSqlJs();
  const db = new SQL.Database(zlib.gunzipSync(fs.readFileSync(path.join(dir, gz))));
  const rows = db.exec("SELECT node_name, matched_node_link FROM tb_nodes WHERE step = 0 AND rank = 0 AND data_source = 'NPU' AND matched_node_link != '[]'")[0].values;
  db.close();
  return new Map(rows.map(([n, link]) => [n, JSON.parse(link).at(-1)]));
}

/** The page's matched pairs (NPU name → Bench name). */
async function pagePairs(page) {
  const list = await page.evaluate(() => {
    const r = window.__probelens.lastResult;
    const out = [];
    for (let i = 0; i < r.npu.names.length; i++) if (r.npu.matched[i] >= 0) out.push([r.npu.names[i], r.bench.names[r.npu.matched[i]]]);
    return out;
  });
  return new Map(list);
}

/** Re-runs the shown dump folders without any layer mapping (msprobe's nomap variant). */
async function noMapping(page) {
  let n = await loads(page);
  await page.selectOption('#mapping-select', '');
  await waitLoad(page, n);
  n = await loads(page);
  await page.uncheck('#opt-lm');
  await waitLoad(page, n);
  const sum = await resultSummary(page);
  assert.equal(sum.npu.matched, reference('qwen_mix_statistics', 'nomap', 0, 0, 'NPU').matched, 'nomap NPU matched');
}

async function openPanel(page) {
  await page.click('#mapping-toggle');
  assert.equal(await page.getAttribute('#mapping-toggle', 'aria-expanded'), 'true');
  await page.waitForFunction(() => Number(document.getElementById('mp-sug').dataset.count ?? 0) > 0);
}

const panelRuns = (page) => page.evaluate(() => Number(document.getElementById('mapping-panel').dataset.runs ?? 0));
/** Waits until the panel finished a re-run after `n` runs, and no re-run is pending. */
async function waitRun(page, n) {
  await page.waitForFunction((k) => {
    const el = document.getElementById('mapping-panel');
    return Number(el.dataset.runs ?? 0) > k && el.dataset.running !== 'true' && document.body.dataset.state === 'ready';
  }, n, { timeout: 30000 });
}

/** Replaces the editor's text like typing (an input event), returns when validated. */
async function typeYaml(page, text) {
  await page.fill('#mp-text', text);
}

/** Accepts every suggestion ≥ the default score; checks the recall against msprobe's mapped pairs. */
async function acceptAllAndCheck(page, label) {
  assert.equal(await page.inputValue('#mp-score'), '0.65', 'the score input defaults to Session.defaultMinScore()');
  const undo0 = Number(await page.getAttribute('#match-tool', 'data-undo'));
  await page.click('#mp-accept-all');
  await page.waitForFunction((u) => Number(document.getElementById('match-tool').dataset.undo) > u, undo0);
  const want = await msprobePairs();
  const got = await pagePairs(page);
  let hit = 0;
  let contra = 0;
  const byBench = new Map([...want].map(([n, b]) => [b, n]));
  for (const [n, b] of want) if (got.get(n) === b) hit++;
  for (const [n, b] of got) {
    if ((want.has(n) && want.get(n) !== b) || (byBench.has(b) && byBench.get(b) !== n)) contra++;
  }
  const mapped = reference('qwen_mix_statistics', 'map', 0, 0, 'NPU').matched;
  const sum = await resultSummary(page);
  assert.match(await page.textContent('#mp-sug-msg'), new RegExp(`score ≥ 0.65: matched NPU nodes \\d+ → ${sum.npu.matched}`));
  console.log(`${label}: accept all → NPU matched ${sum.npu.matched} (msprobe with the mapping: ${mapped}); ${hit}/${want.size} of msprobe's pairs recovered, ${contra} contradicting`);
  assert.equal(want.size, mapped);
  assert.ok(hit >= 0.95 * want.size, `recall ${hit}/${want.size}`);
  assert.equal(contra, 0, 'no accepted pair contradicts msprobe');
  assert.equal(await page.getAttribute('#summary', 'data-matched-npu'), String(sum.npu.matched), 'summary count follows');
  return { got, sum };
}

/** Exports, downloads the yaml and returns {report, yaml, file}. */
async function exportAndDownload(page, tag) {
  const runs = await panelRuns(page);
  await page.click('#mp-export');
  await page.waitForFunction(() => document.getElementById('mp-report').dataset.added !== undefined);
  const report = await page.evaluate(() => window.__probelens.mappingPanel.lastExport.report);
  // The merged yaml goes into the editor, which re-runs with it.
  await waitRun(page, runs);
  assert.equal(await page.inputValue('#mp-text'), report.yaml);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#mp-download')]);
  assert.equal(dl.suggestedFilename(), 'layer_mapping.yaml');
  const file = path.join(SHOTS, `${tag}-layer_mapping.yaml`);
  await dl.saveAs(file);
  const yaml = fs.readFileSync(file, 'utf8');
  assert.equal(yaml, report.yaml, 'the download is the merged yaml');
  return { report, yaml, file };
}

/** The rules (key, src → dst) of a simple block yaml. */
function rulesOf(yaml) {
  const out = new Set();
  let key = '';
  for (const line of yaml.split('\n')) {
    if (!line.trim() || line.trim().startsWith('#')) continue;
    const unq = (s) => s.trim().replace(/^'(.*)'$/, '$1').replace(/^"(.*)"$/, '$1');
    if (!line.startsWith(' ')) key = unq(line.slice(0, line.lastIndexOf(':')));
    else {
      const k = line.indexOf(': ');
      out.add(`${key}|${unq(line.slice(0, k))}|${unq(line.slice(k + 2))}`);
    }
  }
  return out;
}

describe('mapping panel: served site', () => {
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

  test('no mapping: accepting all suggestions recovers ≥95 % of msprobe\'s pairs, undo/redo, export reproduces them', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    assert.equal(await waitLoad(page, 0), 'ready');
    await noMapping(page);
    const before = await resultSummary(page);
    await openPanel(page);
    assert.equal(await page.inputValue('#mp-text'), '', 'no mapping chosen: the editor is empty');
    // A suggestion row shows both nodes (the NPU node selected, the Bench node picked).
    const row = page.locator('#mp-sug li').first();
    const [ni, bi] = [Number(await row.getAttribute('data-npu')), Number(await row.getAttribute('data-bench'))];
    // By keyboard: the row's show button takes the focus and Enter.
    await row.locator('button[data-act="show"]').focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction((i) => window.__probelens.state.selection?.index === i, ni);
    const st = await page.evaluate(() => ({ sel: window.__probelens.state.selection, pick: window.__probelens.state.pick }));
    assert.deepEqual(st.sel, { side: 'npu', index: ni });
    assert.equal(st.pick.bench, bi);
    assert.equal(await page.textContent('#pick-bench'), await page.evaluate((j) => window.__probelens.lastResult.bench.names[j], bi));
    await page.screenshot({ path: path.join(SHOTS, 'served-suggestions.png') });

    const { got, sum } = await acceptAllAndCheck(page, 'served');
    await page.screenshot({ path: path.join(SHOTS, 'served-accepted.png') });
    // Undo / redo like any manual match.
    await page.click('#undo-btn');
    await page.waitForFunction((m) => Number(document.getElementById('summary').dataset.matchedNpu) === m, before.npu.matched);
    await page.click('#redo-btn');
    await page.waitForFunction((m) => Number(document.getElementById('summary').dataset.matchedNpu) === m, sum.npu.matched);
    assert.deepEqual(await pagePairs(page), got, 'redo restores the accepted pairs');
    const manual = await page.evaluate(() => window.__probelens.state.manual.size);
    assert.ok(manual > 0 && Number(await page.getAttribute('#match-tool', 'data-manual')) === manual);

    // Export: the smallest rules for the hand-made pairs, merged into the (empty) editor yaml.
    const { report, yaml, file } = await exportAndDownload(page, 'served');
    console.log(`served: ${manual} pairs → ${report.added.length} rules; ${report.reproduced.length} reproduced, ${report.missed.length} not (e.g. ${JSON.stringify(report.missed[0])})`);
    assert.equal(Number(await page.getAttribute('#mp-report', 'data-pairs')), manual);
    assert.ok(report.added.length >= 5, 'rules added');
    const hand = rulesOf(MAPPING_TEXT);
    // Beyond the hand-written mapping: rules for accepted pairs it does not reproduce (parameter
    // gradients, scoped <path>.<name>; the SiLU the Bench wraps in act_fn; the loss called one
    // level up). The same rules are pinned in tests/it/export_yaml.rs.
    const beyond = new Set([
      'Float16Module|module.cross_entropy|cross_entropy', 'ColumnParallelLinear|output_layer|lm_head',
      'RMSNorm|final_layernorm|norm', 'RMSNorm|pre_mlp_layernorm|post_attention_layernorm',
      'VocabParallelEmbedding|word_embeddings|embed_tokens', 'MLP|silu|act_fn.silu',
      'RowParallelLinear|linear_fc2|down_proj', 'RowParallelLinear|linear_proj|o_proj',
    ]);
    for (const r of report.added) {
      const k = `${r.key}|${r.src}|${r.dst}`;
      assert.ok(hand.has(k) || beyond.has(k), `exported rule ${r.key}: ${r.src}: ${r.dst} is one of the hand-written mapping's or a known one beyond it`);
    }
    // Every accepted pair is expressible here, and the report says so (it used to count the
    // construct.json-only APIs, which a run matches by name, as missed).
    assert.deepEqual(report.missed, []);
    assert.equal(report.reproduced.length, manual);
    assert.equal(await page.locator('#mp-report .mp-added li').count(), report.added.length);
    assert.match(await page.textContent('#mp-report'), new RegExp(`${report.reproduced.length} of ${manual} pair`));
    // The editor re-ran with the merged yaml; the count diff is shown.
    assert.equal(await page.inputValue('#mapping-select'), 'editor');
    assert.ok(await page.isChecked('#opt-lm'));
    const diff = await page.evaluate(() => ({ ...document.getElementById('mp-diff').dataset }));
    assert.ok(diff.matchedNpu, 'count diff shown');
    console.log(`served: re-run with the exported yaml took ${diff.runMs} ms; matched NPU ${diff.matchedNpu}; re-applied ${diff.reapplied}`);

    // Round trip through the ordinary mapping input: a run with the downloaded yaml. The hand-made
    // pairs of this step and rank are re-applied by name after any re-run (issue 24, item 4), as one
    // undo step: undoing it leaves the yaml's result alone, which is what is checked here.
    const n = await loads(page);
    await page.setInputFiles('#mapping-file', file);
    await waitLoad(page, n);
    const reapplied = await page.evaluate(() => window.__probelens.state.history.undo.at(-1)?.label);
    if (reapplied === 're-apply manual matches') {
      const undos = await page.evaluate(() => window.__probelens.state.history.undo.length);
      await page.click('#undo-btn');
      await page.waitForFunction((k) => window.__probelens.state.history.undo.length === k - 1, undos);
    }
    assert.equal(await page.evaluate(() => window.__probelens.state.manual.size), 0);
    const again = await pagePairs(page);
    for (const [a, b] of report.reproduced) assert.equal(again.get(a), b, `the exported yaml reproduces ${a} → ${b}`);
    let held = 0;
    for (const [a, b] of got) if (again.get(a) === b) held++;
    const want = await msprobePairs();
    let hit = 0;
    for (const [a, b] of want) if (again.get(a) === b) hit++;
    console.log(`served: re-run with the downloaded yaml: NPU matched ${again.size}; ${held}/${got.size} pairs of the accept-all result held; ${hit}/${want.size} of msprobe's pairs`);
    assert.ok(hit >= 0.95 * want.size, `the exported yaml alone recovers ≥95 % of msprobe's pairs (${hit}/${want.size})`);
    assert.equal(await page.inputValue('#mp-text'), yaml, 'the editor shows the loaded file');
    await page.screenshot({ path: path.join(SHOTS, 'served-exported.png') });
    assertClean();
    await context.close();
  });

  test('editor: the loaded yaml is seeded; a syntax error is marked at its line and the result stays; a valid edit re-runs with a count diff and keeps manual matches', async () => {
    const { page, assertClean, context } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(server.url);
    assert.equal(await waitLoad(page, 0), 'ready');
    // Keyboard: the toolbar toggle opens the panel.
    await page.focus('#mapping-toggle');
    await page.keyboard.press('Enter');
    assert.equal(await page.getAttribute('#mapping-toggle', 'aria-expanded'), 'true');
    assert.ok(await page.isVisible('#mp-text'));
    await page.waitForFunction(() => Number(document.getElementById('mp-sug').dataset.count ?? -1) >= 0 && document.getElementById('mp-status').textContent !== '');
    assert.equal(await page.inputValue('#mp-text'), MAPPING_TEXT, 'the demo\'s layer_mapping.yaml is in the editor');
    assert.match(await page.textContent('#mp-status'), /Valid: 6 keys, 12 rules/);
    const mapped = reference('qwen_mix_statistics', 'map', 0, 0, 'NPU').matched;
    assert.equal((await resultSummary(page)).npu.matched, mapped);

    // A manual match (accepting one suggestion) to be re-applied after the edit.
    await page.waitForFunction(() => Number(document.getElementById('mp-sug').dataset.count) > 0);
    const row = page.locator('#mp-sug li').first();
    const pair = await page.evaluate(([i, j]) => [window.__probelens.lastResult.npu.names[i], window.__probelens.lastResult.bench.names[j]],
      [Number(await row.getAttribute('data-npu')), Number(await row.getAttribute('data-bench'))]);
    await row.locator('button[data-act="accept"]').click();
    await page.waitForFunction(() => document.getElementById('match-tool').dataset.manual === '1');
    assert.equal((await pagePairs(page)).get(pair[0]), pair[1]);
    const withManual = (await resultSummary(page)).npu.matched;

    // A valid edit: drop the SelfAttention rule (linear_proj → o_proj).
    const edited = MAPPING_TEXT.replace('SelfAttention:\n  linear_proj: o_proj\n', '');
    assert.notEqual(edited, MAPPING_TEXT);
    let runs = await panelRuns(page);
    const t0 = Date.now();
    await typeYaml(page, edited);
    await waitRun(page, runs);
    const wall = Date.now() - t0;
    const after = await resultSummary(page);
    const diff = await page.evaluate(() => ({ ...document.getElementById('mp-diff').dataset }));
    console.log(`editor: edit → re-run ${diff.runMs} ms in the page (${wall} ms wall incl. the 300 ms debounce and re-applying manual matches); NPU matched ${withManual} → ${after.npu.matched}`);
    assert.ok(Number(diff.runMs) < 10000, 'sanity: the re-run does not take ages');
    assert.equal(diff.matchedNpu, `${withManual},${after.npu.matched}`);
    assert.equal(diff.matchedBench, `${withManual},${after.bench.matched}`);
    assert.equal(diff.unmatchedNpu, `${after.npu.nodes - withManual},${after.npu.nodes - after.npu.matched}`);
    assert.ok(after.npu.matched < withManual, 'dropping a rule loses matches');
    const d = withManual - after.npu.matched;
    assert.match(await page.textContent('#mp-diff'), new RegExp(`matched NPU nodes${withManual} → ${after.npu.matched}\\(−${d}\\)`));
    assert.equal(await page.getAttribute('#summary', 'data-matched-npu'), String(after.npu.matched));
    assert.equal(await page.inputValue('#mapping-select'), 'editor');
    assert.equal((await pagePairs(page)).get(pair[0]), pair[1], 'the manual match is re-applied by name');
    assert.equal(await page.evaluate(() => window.__probelens.state.manual.size), 1);
    await page.screenshot({ path: path.join(SHOTS, 'served-edit-diff.png') });

    // A syntax error: marked at its line, the previous result stays usable, no re-run.
    const lines = edited.split('\n');
    const at = lines.indexOf('MLP:') + 2; // 1-based line of the rule after "MLP:"
    lines.splice(at - 1, 0, '  linear_fc1: up_proj: x');
    const shown = await page.evaluate(() => window.__probelens.lastResult);
    const loadsBefore = await loads(page);
    runs = await panelRuns(page);
    await typeYaml(page, lines.join('\n'));
    await page.waitForFunction((l) => document.getElementById('mp-editor').dataset.errorLine === String(l), at);
    assert.equal(await page.getAttribute('#mp-gutter .ln.err', 'data-line'), String(at));
    assert.equal(await page.locator('#mp-gutter .ln.err').count(), 1);
    assert.match(await page.textContent('#mp-status'), new RegExp(`line ${at}, column \\d+: invalid YAML`));
    assert.equal(await page.getAttribute('#mp-text', 'aria-invalid'), 'true');
    assert.ok(await page.isVisible('#mp-band'));
    await page.screenshot({ path: path.join(SHOTS, 'served-syntax-error.png') });
    await page.waitForTimeout(600);
    assert.equal(await loads(page), loadsBefore, 'no run for an invalid yaml');
    assert.equal(await panelRuns(page), runs);
    assert.ok(await page.evaluate((r) => window.__probelens.lastResult === r || window.__probelens.lastResult.npu.names.length === r.npu.names.length, shown));
    assert.equal((await resultSummary(page)).npu.matched, after.npu.matched);
    // Still usable: selecting a node shows its details.
    const leaf = 'Module.0.module.module.decoder.layers.0.mlp.linear_fc2.RowParallelLinear.forward.0';
    const li = await page.evaluate((n) => window.__probelens.lastResult.npu.names.indexOf(n), leaf);
    await page.evaluate((i) => window.__probelens.select('npu', i), li);
    await page.waitForFunction((n) => document.getElementById('details').dataset.node === n && document.querySelectorAll('#details-compare tr[data-side]').length > 0, leaf);
    // Fixing it re-runs nothing new (same text as the shown result) and clears the marker.
    await typeYaml(page, edited);
    await page.waitForFunction(() => !document.getElementById('mp-editor').dataset.errorLine);
    assert.equal(await page.locator('#mp-gutter .ln.err').count(), 0);
    // Choosing another mapping on the card re-seeds the editor; choosing the editor's entry brings its text back.
    let n = await loads(page);
    await page.selectOption('#mapping-select', '');
    await waitLoad(page, n);
    assert.equal(await page.inputValue('#mp-text'), '');
    assert.match(await page.textContent('#mp-status'), /Empty mapping/);
    n = await loads(page);
    await page.selectOption('#mapping-select', 'editor');
    await waitLoad(page, n);
    assert.equal(await page.inputValue('#mp-text'), edited);
    assert.equal((await resultSummary(page)).npu.matched, after.npu.matched, 'the editor mapping again, with the manual match re-applied by name (kept for this step and rank)');
    // Chinese.
    await page.click('#lang-btn');
    assert.equal(await page.textContent('#mapping-toggle'), '映射');
    assert.match(await page.textContent('#mp-status'), /有效/);
    assert.equal(await page.textContent('#mp-sug-h'), '匹配建议');
    await page.waitForFunction(() => /建议/.test(document.getElementById('mp-sug-count').textContent));
    await page.screenshot({ path: path.join(SHOTS, 'served-chinese.png') });
    await page.click('#lang-btn');
    assertClean();
    await context.close();
  });
});

describe('mapping panel: single file over file://', () => {
  let browser;
  before(async () => {
    requireBuild();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  test('accept all, export and download the yaml, a syntax error marker, from file://', async () => {
    const { page, assertClean, context } = await openPage(browser, fileAllowlist);
    await page.goto(SINGLE_URL);
    assert.equal(await waitLoad(page, 0), 'ready');
    await noMapping(page);
    await openPanel(page);
    // The bundled templates are listed.
    assert.ok(await page.locator('#mp-template option').count() > 1);
    await acceptAllAndCheck(page, 'file://');
    const manual = await page.evaluate(() => window.__probelens.state.manual.size);
    const { report } = await exportAndDownload(page, 'single');
    assert.ok(report.added.length >= 5);
    assert.equal(Number(await page.getAttribute('#mp-report', 'data-pairs')), manual);
    const diff = await page.evaluate(() => ({ ...document.getElementById('mp-diff').dataset }));
    console.log(`file://: export → ${report.added.length} rules; re-run ${diff.runMs} ms`);
    // The editor's re-run with the merged yaml keeps every reproduced pair matched.
    const now = await pagePairs(page);
    for (const [a, b] of report.reproduced) assert.equal(now.get(a), b);
    // Syntax error at line 2.
    await typeYaml(page, 'TopLayer:\n  0.module: module: x\n');
    await page.waitForFunction(() => document.getElementById('mp-editor').dataset.errorLine === '2');
    assert.equal(await page.getAttribute('#mp-gutter .ln.err', 'data-line'), '2');
    await page.screenshot({ path: path.join(SHOTS, 'single-syntax-error.png') });
    assertClean();
    await context.close();
  });
});
