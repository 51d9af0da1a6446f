// Browser tests of the diagnosis (issue 23, the page's half): the fixture pairs of
// tests/fixtures/diagnose are dropped into the page as a user would, the *Diagnose* tool runs, and
// the page's suspects for the shown step and rank must equal those of `probelens diagnose --json`
// (the CLI merges every step and rank; its suspects of the shown pair are compared). Then the
// suspects list, the divergence overlay, the step × layer and rank × layer heatmaps, and a file://
// smoke of the single file. Real Chromium; any console error fails.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  ROOT, FIX, OUT, SINGLE_URL, requireBuild, launch, startServer, openPage, servedAllowlist, fileAllowlist, loads, waitLoad,
  cliBinary,
} from './helpers.mjs';

const DIAG = path.join(FIX, 'diagnose');
const CASES = JSON.parse(fs.readFileSync(path.join(DIAG, 'cases.json'), 'utf8'));

/** A case of cases.json by name, with its folders and mapping as absolute paths. */
function caseOf(name) {
  const c = CASES.find((x) => x.name === name);
  assert.ok(c, `no case ${name}`);
  return { ...c, npu: path.resolve(DIAG, c.npu), bench: path.resolve(DIAG, c.bench), mapping: c.mapping ? path.join(ROOT, c.mapping) : null };
}

/** `probelens diagnose --json` of a case, every suspect (`--top` large). */
function cli(c) {
  const args = ['diagnose', '-tp', c.npu, '-gp', c.bench, ...(c.mapping ? ['-lm', c.mapping] : []), '--json', '--top', '100000'];
  const r = spawnSync(cliBinary(), args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `probelens ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const KEYS = ['node', 'bench_node', 'step', 'rank', 'pass', 'score', 'why'];
const strip = (s) => Object.fromEntries(KEYS.map((k) => [k, s[k]]));
/**
 * The CLI's suspects of one step and rank, without the one its merge of all pairs prepends when a
 * step's first difference is its weights and the step before agreed (`optimizer_suspect`: that
 * earlier step's `optimizer` node, backward), which no single pair's diagnosis has.
 */
const cliOf = (d, step, rank) => d.suspects
  .filter((s) => s.step === step && s.rank === rank)
  .filter((s) => !(s.node === 'optimizer' && s.pass === 'backward' && d.suspects.some((x) => x.rank === rank && x.step > step)))
  .map(strip);

/** Drops a case's folders (and mapping) into the page as a user would; waits for the compare. */
async function loadCase(page, c) {
  let n = await loads(page);
  await page.setInputFiles('#npu-dir', c.npu);
  assert.equal(await waitLoad(page, n, 60000), 'ready');
  n = await loads(page);
  await page.setInputFiles('#bench-dir', c.bench);
  assert.equal(await waitLoad(page, n, 60000), 'ready');
  if (c.mapping) {
    n = await loads(page);
    await page.setInputFiles('#mapping-file', c.mapping);
    assert.equal(await waitLoad(page, n, 60000), 'ready');
  }
  assert.equal(await page.evaluate(() => window.__probelens.lastResult.graphType), 'compare');
  assert.equal(await page.isChecked('#opt-lm'), !!c.mapping, '-lm follows the case');
}

/** Clicks *Diagnose* and returns the page's diagnosis, after checking what the tool shows of it. */
async function diagnose(page) {
  await page.click('#diverge-btn');
  await page.waitForFunction(() => !!document.getElementById('diverge-msg').dataset.verdict, null, { timeout: 60000 });
  const got = await page.evaluate(() => {
    const d = window.__probelens.diagnosis.result;
    const msg = document.getElementById('diverge-msg');
    return {
      d,
      node: msg.dataset.node,
      text: msg.textContent,
      list: [...document.querySelectorAll('#diverge-list li')].map((li) => li.dataset.node),
      summary: document.getElementById('summary').textContent,
      matched: document.getElementById('summary').dataset.matchedNpu,
    };
  });
  assert.equal(got.node, got.d.suspects[0]?.node ?? '', 'data-node of #diverge-msg is suspects[0].node');
  assert.deepEqual(got.list, got.d.suspects.map((s) => s.node), 'the list shows the suspects in order');
  assert.match(got.summary, new RegExp(`matched ${got.matched} `), 'the summary line keeps "matched N"');
  if (got.d.verdict === 'agree') assert.match(got.text, /agree within their float noise/);
  else assert.ok(got.text.includes(`step ${got.d.step}, rank ${got.d.rank}, in ${got.node}`), got.text);
  return got.d;
}

/** Selects a step or rank in the page's selector and waits for its result. */
async function choose(page, sel, value) {
  const n = await loads(page);
  await page.selectOption(sel, String(value));
  assert.equal(await waitLoad(page, n, 60000), 'ready');
}

describe('diagnosis', () => {
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

  /** A fresh page with the demo loaded. */
  async function fresh() {
    const o = await openPage(browser, servedAllowlist(server.url));
    await o.page.goto(server.url);
    assert.equal(await waitLoad(o.page, 0), 'ready');
    return o;
  }

  // Parity: one cross-framework defect pair (with its mapping), one same-framework pair, one
  // swapped pair, a fault on the Bench side, a clean pair, and the two-rank pair on both ranks;
  // with a second step where the fixture has one.
  const PARITY = [
    ['cross_attn_scale_l1', [[0, 0]]],
    ['same_attn_scale_l1', [[0, 0], [1, 0]]],
    ['swapped_attn_scale_l0', [[0, 0]]],
    ['bench_attn_scale_l0', [[0, 0]]],
    ['clean_cross', [[0, 0], [1, 0]]],
    ['two_ranks_attn_scale_l0', [[0, 0], [0, 1]]],
    ['vl_attn_scale_v0', [[0, 0]]],
    // The learning rate differs: step 0 agrees, step 1 parts ways in its weights (the CLI names
    // step 0's optimizer first, which the test leaves out above).
    ['cross_optim_lr', [[0, 0], [1, 0]]],
  ];
  for (const [name, pairs] of PARITY) {
    test(`parity with probelens diagnose: ${name}`, async () => {
      const c = caseOf(name);
      const want = cli(c);
      assert.equal(want.verdict, c.expect, 'the CLI finds what the case expects');
      const { page, context, assertClean } = await fresh();
      await loadCase(page, c);
      for (const [step, rank] of pairs) {
        if (await page.inputValue('#step-select') !== String(step)) await choose(page, '#step-select', step);
        if (await page.inputValue('#rank-select') !== String(rank)) await choose(page, '#rank-select', rank);
        const d = await diagnose(page);
        assert.equal(d.step, step);
        assert.equal(d.rank, rank);
        const exp = cliOf(want, step, rank);
        assert.deepEqual(d.suspects.map(strip), exp, `${name} step ${step} rank ${rank}: the page's suspects equal the CLI's`);
        assert.equal(d.verdict, exp.length ? 'diverged' : 'agree');
        if (c.expect === 'agree') assert.equal(d.suspects.length, 0);
        if (name === 'cross_optim_lr') assert.equal(d.verdict, step === 0 ? 'agree' : 'diverged');
        // Each suspect's indices name its nodes in the shown graphs.
        const names = await page.evaluate((d) => {
          const r = window.__probelens.lastResult;
          return d.suspects.map((s) => [s.npuIndex === null ? null : r.npu.names[s.npuIndex], s.benchIndex === null ? null : r.bench.names[s.benchIndex]]);
        }, d);
        assert.deepEqual(names, d.suspects.map((s) => [s.node, s.bench_node]));
      }
      if (name === 'cross_attn_scale_l1') await page.screenshot({ path: path.join(OUT, 'diagnose-cross.png') });
      assertClean();
      await context.close();
    });
  }

  test('a suspect reveals both sides; the overlay recolours by divergence and back; the step heatmap', async () => {
    const c = caseOf('same_attn_scale_l1');
    const { page, context, assertClean } = await fresh();
    await loadCase(page, c);
    const d = await diagnose(page);
    assert.equal(d.verdict, 'diverged');
    // The top suspect is selected at once; a click on the second shows that pair with its reason.
    const k = d.suspects.findIndex((s, i) => i > 0 && s.benchIndex !== null);
    assert.ok(k > 0, 'a second suspect with a Bench node');
    await page.click(`#diverge-list li[data-k="${k}"]`);
    const s = d.suspects[k];
    const shown = await page.evaluate(() => {
      const st = window.__probelens.state;
      const v = window.__probelens.views;
      const why = document.getElementById('diverge-why');
      return { sel: st.selection, peer: v.bench.peer, why: why.textContent, node: why.dataset.node, bench: why.dataset.benchNode, current: document.querySelector('#diverge-list li[aria-current="true"]')?.dataset.k };
    });
    assert.deepEqual(shown.sel, { side: 'npu', index: s.npuIndex });
    assert.equal(shown.peer, s.benchIndex, 'the Bench node is shown as the counterpart');
    assert.equal(shown.node, s.node);
    assert.equal(shown.bench, s.bench_node);
    assert.ok(shown.why.endsWith(s.why), shown.why);
    assert.equal(shown.current, String(k));
    // Both nodes are revealed: their ancestors are open in their panes.
    const open = await page.evaluate(([i, j]) => {
      const m = window.__probelens.state.models;
      const up = (mm, x) => {
        for (let p = mm.g.parent[x]; p >= 0; p = mm.g.parent[p]) if (!mm.expanded[p]) return false;
        return true;
      };
      return [up(m.npu, i), up(m.bench, j)];
    }, [s.npuIndex, s.benchIndex]);
    assert.deepEqual(open, [true, true]);
    await page.waitForFunction((name) => document.getElementById('details').dataset.node === name, s.node);

    // The overlay: every node's colour is the class of its divergence (a Bench node: its
    // counterpart's), computed here from the divergence column; unchecking restores the verdicts.
    const colours = () => page.evaluate(() => {
      const v = window.__probelens.views;
      const r = window.__probelens.lastResult;
      return { npu: r.npu.names.map((_, i) => v.npu.colorOf(i)), bench: r.bench.names.map((_, i) => v.bench.colorOf(i)) };
    });
    const before = await colours();
    await page.check('#diverge-overlay');
    const after = await colours();
    const want = await page.evaluate(() => {
      const div = window.__probelens.diagnosis.divergence;
      const r = window.__probelens.lastResult;
      const scale = ['#FFF7EC', '#FDD49E', '#FDBB84', '#FC8D59', '#E34A33', '#B30000'];
      const of = (x) => (Number.isNaN(x) ? '#D9D9D9' : x <= 0 ? scale[0] : x < 0.5 ? scale[1] : x < 1 ? scale[2] : x < 2 ? scale[3] : x < 3 ? scale[4] : scale[5]);
      const npu = Array.from(div, of);
      return { n: div.length, npu, bench: Array.from(r.bench.matched, (m) => (m >= 0 ? npu[m] : '#D9D9D9')) };
    });
    assert.equal(want.n, before.npu.length, 'one divergence per NPU node');
    assert.deepEqual(after, { npu: want.npu, bench: want.bench });
    assert.notDeepEqual(after.npu, before.npu);
    assert.notEqual(after.npu[d.suspects[0].npuIndex], '#FFF7EC', 'the top suspect diverges');
    const legend = await page.evaluate(() => [...document.querySelectorAll('#div-legend li')].map((li) => Number(li.dataset.count)));
    assert.equal(legend.length, 7);
    assert.equal(legend.reduce((a, b) => a + b, 0), before.npu.length, 'the legend counts every NPU node');
    await page.screenshot({ path: path.join(OUT, 'diagnose-overlay.png') });
    await page.uncheck('#diverge-overlay');
    assert.deepEqual(await colours(), before, 'the verdict colours come back');
    assert.equal(await page.locator('#div-legend').isHidden(), true);

    // The step × layer heatmap over the two steps: the planted layer is the source of step 0; a
    // click on a step-1 cell shows step 1 and selects that layer's module.
    await page.check('#diverge-overlay');
    await page.click('#heatmap-btn');
    await page.waitForFunction(() => {
      const p = document.getElementById('heatmap-pop');
      return !p.hidden && p.dataset.running === 'false' && p.dataset.total === p.dataset.done && Number(p.dataset.total) > 0;
    }, null, { timeout: 60000 });
    const heat = await page.evaluate(() => [...document.querySelectorAll('#heatmap-tables table')].map((t) => ({
      axis: t.dataset.axis,
      rows: [...t.querySelectorAll('tbody tr')].map((tr) => ({
        key: tr.dataset.key,
        shown: tr.classList.contains('shown'),
        cells: [...tr.querySelectorAll('td')].map((td) => ({ layer: td.dataset.layer, div: td.dataset.div, source: td.dataset.source === 'true' })),
      })),
    })));
    assert.deepEqual(heat.map((h) => h.axis), ['step'], 'one rank: no rank heatmap');
    const [steps] = heat;
    assert.deepEqual(steps.rows.map((r) => r.key), ['0', '1']);
    assert.deepEqual(steps.rows.map((r) => r.shown), [true, false]);
    const layer = c.module.split('.').slice(0, 3).join('.');
    assert.equal(layer, 'decoder.layers.1');
    assert.deepEqual(steps.rows[0].cells.filter((x) => x.source).map((x) => x.layer), [layer], 'the planted layer holds the top suspect');
    assert.deepEqual(steps.rows[0].cells.map((x) => x.layer), d.layers.map((l) => l.layer));
    assert.deepEqual(steps.rows[0].cells.map((x) => Number(x.div)), d.layers.map((l) => l.div), 'the shown step\'s row is its diagnosis');
    const l0 = steps.rows[0].cells.find((x) => x.layer === 'decoder.layers.0');
    assert.equal(Number(l0.div), 0, 'the layer before the planted one agrees');
    assert.ok(Number(steps.rows[0].cells.find((x) => x.source).div) > 0);
    await page.screenshot({ path: path.join(OUT, 'diagnose-heatmap.png') });
    const n = await loads(page);
    await page.click(`#heatmap-tables table[data-axis="step"] tr[data-key="1"] td[data-layer="${layer}"]`);
    assert.equal(await waitLoad(page, n, 60000), 'ready');
    await page.waitForFunction((l) => {
      const st = window.__probelens.state;
      return st.selection && window.__probelens.lastResult.npu.names[st.selection.index].includes(`.${l}.`);
    }, layer);
    const at = await page.evaluate(() => {
      const st = window.__probelens.state;
      return { step: st.runOpts.step, name: window.__probelens.lastResult.npu.names[st.selection.index], shown: document.querySelector('#heatmap-tables tr.shown')?.dataset.key };
    });
    assert.equal(at.step, 1);
    assert.equal(await page.inputValue('#step-select'), '1');
    assert.match(at.name, /\.decoder\.layers\.1\.TransformerLayer\.forward\.0$/, 'the layer\'s module is selected');
    assert.equal(at.shown, '1', 'the heatmap stays, with step 1 marked');
    // The step-1 row equals the diagnosis of step 1 when it is shown.
    const d1 = await diagnose(page);
    assert.deepEqual(steps.rows[1].cells.map((x) => [x.layer, Number(x.div), x.source]), d1.layers.map((l) => [l.layer, l.div, l.source]));
    assertClean();
    await context.close();
  });

  test('two ranks: a rank × layer heatmap too; a click on a rank cell shows that rank', async () => {
    const c = caseOf('two_ranks_attn_scale_l0');
    const { page, context, assertClean } = await fresh();
    await loadCase(page, c);
    await diagnose(page);
    const progress = [];
    await page.exposeFunction('__heatProgress', (text) => progress.push(text));
    await page.evaluate(() => {
      new MutationObserver(() => window.__heatProgress(document.getElementById('heatmap-progress').textContent))
        .observe(document.getElementById('heatmap-progress'), { childList: true, characterData: true, subtree: true });
    });
    await page.click('#heatmap-btn');
    await page.waitForFunction(() => {
      const p = document.getElementById('heatmap-pop');
      return !p.hidden && p.dataset.running === 'false' && p.dataset.total === '4' && p.dataset.done === '4';
    }, null, { timeout: 60000 });
    assert.ok(progress.includes('step 2 of 2') && progress.includes('rank 2 of 2'), `progress: ${progress}`);
    const axes = await page.evaluate(() => [...document.querySelectorAll('#heatmap-tables table')].map((t) => [t.dataset.axis, [...t.querySelectorAll('tbody tr')].map((tr) => tr.dataset.key)]));
    assert.deepEqual(axes, [['step', ['0', '1']], ['rank', ['0', '1']]]);
    const src = await page.evaluate(() => [...document.querySelectorAll('#heatmap-tables table[data-axis="rank"] td[data-source="true"]')].map((td) => [td.closest('tr').dataset.key, td.dataset.layer]));
    assert.deepEqual(src, [['0', 'decoder.layers.0'], ['1', 'decoder.layers.0']], 'both ranks part ways in the planted layer');
    const n = await loads(page);
    await page.click('#heatmap-tables table[data-axis="rank"] tr[data-key="1"] td[data-layer="decoder.layers.0"]');
    assert.equal(await waitLoad(page, n, 60000), 'ready');
    assert.equal(await page.inputValue('#rank-select'), '1');
    await page.waitForFunction(() => {
      const st = window.__probelens.state;
      return st.selection && /\.decoder\.layers\.0\.TransformerLayer\.forward\.0$/.test(window.__probelens.lastResult.npu.names[st.selection.index]);
    });
    await page.screenshot({ path: path.join(OUT, 'diagnose-ranks.png') });
    assertClean();
    await context.close();
  });

  test('file:// single file: the diagnosis equals the CLI\'s, the overlay works', async () => {
    const c = caseOf('same_attn_scale_l1');
    const want = cliOf(cli(c), 0, 0);
    const { page, context, assertClean } = await openPage(browser, fileAllowlist);
    await page.goto(SINGLE_URL);
    await waitLoad(page, 0);
    await loadCase(page, c);
    const d = await diagnose(page);
    assert.deepEqual(d.suspects.map(strip), want);
    await page.check('#diverge-overlay');
    const top = await page.evaluate((i) => window.__probelens.views.npu.colorOf(i), d.suspects[0].npuIndex);
    assert.notEqual(top, '#FFF7EC');
    assertClean();
    await context.close();
  });
});
