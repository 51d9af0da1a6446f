// Browser tests of issue 24 ("The page, part three"), items 6, 7, 9, 11, 12 and 13, at 1600×1000 on
// the served page (and a smoke check of the single file over file://): search Enter stepping, names
// elided in the middle, "pass" vs "no precision index" and the legend's language, the grouped compare
// table, whole-graph PNG/SVG exports, and the small things (regex message, stack order, help, welcome).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  FIX, OUT, SINGLE_URL, requireBuild, launch, startServer, openPage, servedAllowlist, fileAllowlist, waitLoad,
  indexOf, choose,
} from './helpers.mjs';

const SIZE = { width: 1600, height: 1000 };
const TOP = 'Module.0.module.Float16Module.forward.0';

/** Opens the page at 1600×1000 and waits for the demo. */
async function demo(browser, url, allowed) {
  // The outlines a little wider than their default (as a user reading deep rows drags them).
  const o = await openPage(browser, allowed, { outlineW: 260 });
  await o.page.setViewportSize(SIZE);
  await o.page.goto(url);
  assert.equal(await waitLoad(o.page, 0), 'ready');
  return o;
}

/** Saves the download a click starts; returns the file's path. */
async function download(page, selector, name) {
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
  const file = path.join(OUT, name);
  await dl.saveAs(file);
  return { file, suggested: dl.suggestedFilename() };
}

/** Width and height of a PNG file (its IHDR chunk). */
function pngSize(file) {
  const b = fs.readFileSync(file);
  assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

/** The visible rows of a virtualised list: label text, title and the node's full name. */
async function listRows(page, id, side) {
  return page.evaluate(([id, side]) => [...document.querySelectorAll(`#${id}-list [role=option]:not([hidden])`)].map((r) => ({
    text: r.querySelector('.olabel').textContent,
    title: r.title,
    name: window.__probelens.lastResult[side].names[Number(r.dataset.nodeIndex)],
    fits: r.querySelector('.olabel').scrollWidth <= r.querySelector('.olabel').clientWidth + 1,
  })), [id, side]);
}

/**
 * An elided label is pieces of the name in order, "…" between them: its start, and a tail that
 * keeps more than the `.forward.0` every name ends with.
 */
function assertElided(text, full, what, minTail = 12) {
  assert.ok(text.includes('…'), `${what}: "${text}" is elided`);
  // Only the `.0.forward` every name ends with may be cut at the end (when there is very little room).
  const boring = /(\.(\d+|forward|backward|parameters_grad))+$/.exec(full)?.[0] ?? '';
  if (text.endsWith('…')) {
    assert.ok(boring, `${what}: "${text}" is not cut at its end`);
    full = full.slice(0, full.length - boring.length);
    text = text.slice(0, -1);
  }
  // A shortened pass word (`….bwd.0`) stands for the full one.
  const WORDS = { bwd: 'backward', grad: 'parameters_grad' };
  const pieces = text.split('…');
  const end = pieces.length - 1;
  pieces[end] = pieces[end].replace(/^\.(bwd|grad)(?=\.|$)/, (_, w) => `.${WORDS[/** @type {'bwd'|'grad'} */ (w)]}`);
  assert.ok(full.startsWith(pieces[0]), `${what}: "${pieces[0]}" is the start of ${full}`);
  let at = pieces[0].length;
  for (const p of pieces.slice(1)) {
    const k = full.indexOf(p, at);
    assert.ok(k >= at, `${what}: "${p}" follows in ${full}`);
    at = k + p.length;
  }
  // It ends as the name does, or, short of room, with the call index of its `.0.forward` tail.
  const last = pieces[pieces.length - 1];
  const index = /^(\.\d+)+$/.test(last) && boring.replace(/\.(forward|backward)/g, '') === last;
  assert.ok(full.endsWith(last) || index, `${what}: "${last}" is the end of ${full}`);
  // More than the first segment (`Tensor.…`) and the `.forward.0` every name ends with is shown.
  const said = text.replace(/…/g, '').replace(/\.(forward|backward|\d+)(?=\.|$)/g, '');
  const first = `${full.split('.')[0]}.`;
  assert.ok((said.startsWith(first) ? said.slice(first.length) : said).length >= minTail, `${what}: "${text}" says more than its first segment`);
}

describe('page, part three (issue 24: 6, 7, 9, 11, 12, 13)', () => {
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

  test('6: Enter in the search steps to the next hit (Shift+Enter back), it does not re-run the search', async () => {
    const { page, assertClean, context } = await demo(browser, server.url, servedAllowlist(server.url));
    await page.keyboard.press('/');
    await page.keyboard.type('linear_proj');
    const hits = await page.evaluate(() => window.__probelens.lastResult.npu.names
      .map((n, i) => [n, i]).filter(([n]) => n.toLowerCase().includes('linear_proj')).map(([, i]) => i));
    assert.ok(hits.length >= 4, `${hits.length} hits`);
    await page.waitForFunction((n) => document.getElementById('search-list').dataset.count === String(n), hits.length);
    const selected = () => page.evaluate(() => window.__probelens.state.selection?.index);
    for (let k = 0; k < 3; k++) {
      await page.keyboard.press('Enter');
      await page.waitForFunction((t) => document.getElementById('search-count').textContent === t, `${k + 1} of ${hits.length}`);
      assert.equal(await selected(), hits[k], `Enter ${k + 1} selects hit ${k + 1}`);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'search-input', 'the focus stays in the search box');
    }
    await page.keyboard.press('Shift+Enter');
    await page.waitForFunction((t) => document.getElementById('search-count').textContent === t, `2 of ${hits.length}`);
    assert.equal(await selected(), hits[1]);
    // Typing another query starts over at its first hit.
    await page.fill('#search-input', 'linear_qkv');
    const q = await page.evaluate(() => window.__probelens.lastResult.npu.names.filter((n) => n.includes('linear_qkv')).length);
    await page.waitForFunction((n) => document.getElementById('search-list').dataset.count === String(n), q);
    await page.keyboard.press('Enter');
    await page.waitForFunction((t) => document.getElementById('search-count').textContent === t, `1 of ${q}`);
    await page.screenshot({ path: path.join(OUT, 'page3-search-enter.png') });
    assertClean();
    await context.close();
  });

  test('7: long names are elided in the middle (distinct tails), the full name is the title', async () => {
    const { page, assertClean, context } = await demo(browser, server.url, servedAllowlist(server.url));
    // Search: every hit of `layers.0.self_attention` starts with the same 40-odd characters.
    await page.fill('#search-input', 'decoder.layers.0.self_attention');
    await page.waitForFunction(() => Number(document.getElementById('search-list').dataset.count) > 4);
    const rows = await listRows(page, 'search', 'npu');
    assert.ok(rows.length > 4);
    let elided = 0;
    for (const r of rows) {
      assert.equal(r.title, r.name, 'the row title is the full name');
      assert.ok(r.fits, `"${r.text}" fits its row`);
      if (r.text !== r.name) {
        assertElided(r.text, r.name, 'search row');
        elided++;
      }
    }
    assert.ok(elided >= 4, `${elided} elided rows`);
    assert.equal(new Set(rows.map((r) => r.text)).size, rows.length, 'rows of different names read differently');
    // Filter list: the same.
    await page.selectOption('#filter-kind', 'matched');
    await page.waitForFunction(() => Number(document.getElementById('filter-list').dataset.count) > 10);
    const frows = await listRows(page, 'filter', 'npu');
    for (const r of frows) {
      assert.equal(r.title, r.name);
      if (r.text !== r.name) assertElided(r.text, r.name, 'filter row');
    }
    assert.equal(new Set(frows.map((r) => r.text)).size, frows.length, 'filter rows read differently');
    // Outline: deep rows keep the end of their label.
    await page.click('#npu-pane [data-act="expand-all"]');
    const deep = await page.evaluate(async () => {
      const el = document.getElementById('npu-outline');
      const m = window.__probelens.views.npu.model;
      const out = [];
      for (let top = 0; top < el.scrollHeight && out.length < 40; top += el.clientHeight) {
        el.scrollTop = top;
        el.dispatchEvent(new Event('scroll'));
        await new Promise((r) => requestAnimationFrame(r));
        for (const row of el.querySelectorAll('[role=treeitem]:not([hidden])')) {
          const i = Number(row.dataset.nodeIndex);
          const lab = row.querySelector('.olabel');
          if (lab.textContent !== m.label(i)) out.push({ text: lab.textContent, label: m.label(i), title: row.title, name: m.g.names[i], fits: lab.scrollWidth <= lab.clientWidth + 1 });
        }
      }
      el.scrollTop = 0;
      return out;
    });
    assert.ok(deep.length > 5, `${deep.length} elided outline rows`);
    for (const r of deep) {
      assert.equal(r.title, r.name, 'outline row title is the full name');
      assert.ok(r.fits, `"${r.text}" fits`);
      assertElided(r.text, r.label, 'outline row', 1);
    }
    // The deepest rows keep the op's name, not just `Tensor.…` or `…0.forward`.
    assert.ok(deep.some((r) => /(add|mul)__/.test(r.text)), JSON.stringify(deep.map((r) => r.text)));
    assert.ok(!deep.some((r) => /^…(forward|backward)$/.test(r.text)), JSON.stringify(deep.map((r) => r.text)));
    await page.screenshot({ path: path.join(OUT, 'page3-elided-names.png') });
    assertClean();
    await context.close();
  });

  test('9: "no precision index" is hatched, "pass" is not; legend tooltips in English, msprobe\'s Chinese in 中文', async () => {
    const { page, assertClean, context } = await demo(browser, server.url, servedAllowlist(server.url));
    const legend = () => page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#legend li[data-precision]')]
      .map((li) => [li.dataset.precision, { title: li.title, bg: getComputedStyle(li.querySelector('.sw')).backgroundImage, color: li.querySelector('.sw').style.backgroundColor }])));
    let lg = await legend();
    assert.ok(lg.pass && lg.none, `legend classes: ${Object.keys(lg)}`);
    assert.match(lg.none.bg, /repeating-linear-gradient/, 'the "no precision index" swatch is hatched');
    assert.equal(lg.pass.bg, 'none', 'the "pass" swatch is plain');
    assert.match(lg.pass.title, /^Error of the statistics of all inputs and outputs of this node.*\[0, 0\.3\)$/);
    assert.match(lg.unmatched.title, /^The node was not matched/);
    for (const v of Object.values(lg)) assert.doesNotMatch(v.title, /[\u4e00-\u9fff]/, `English tooltip: ${v.title}`);
    // The stored colours are untouched.
    const colors = await page.evaluate(() => window.__probelens.lastResult.nodeColors);
    assert.deepEqual(Object.keys(colors).sort(), ['#C7C7C7', '#FF704D', '#FFDC7F', '#FFFCF3']);
    // In the graph: the box of a "none" node has hatch pixels, the box of a "pass" node is one colour.
    const px = await page.evaluate(async () => {
      const S = window.__probelens.state;
      const v = window.__probelens.views.npu;
      const m = v.model;
      const bins = S.classes.bins;
      const k = (c) => bins.findIndex((b) => b.cls === c);
      const find = (c) => { for (let i = 1; i < m.n; i++) if (m.cls[i] === k(c) && !m.hasChildren(i)) return i; return -1; };
      const out = {};
      for (const c of ['pass', 'none']) {
        const i = find(c);
        if (i < 0) { out[c] = null; continue; }
        window.__probelens.select('npu', i);
        await new Promise((r) => setTimeout(r, 50));
        v.scale = 2;
        m.reveal(i);
        m.layout(0);
        const p = m.absPos(i);
        v.tx = 40 - p.x * v.scale;
        v.ty = 40 - p.y * v.scale;
        v.selected = -1; v.peer = -1; v.pick = -1;
        v.draw();
        const ctx = v.canvas.getContext('2d');
        const d = v.dpr;
        const w = Math.floor((m.w[i] * v.scale - 16) * d);
        const h = Math.floor((m.h[i] * v.scale - 8) * d);
        const img = ctx.getImageData(Math.floor(48 * d), Math.floor(44 * d), Math.min(w, 60), Math.max(1, Math.min(h, 20))).data;
        const seen = new Set();
        let hatch = 0;
        for (let q = 0; q < img.length; q += 4) {
          seen.add(`${img[q]},${img[q + 1]},${img[q + 2]}`);
          if (img[q + 2] - img[q] >= 10) hatch++;
        }
        out[c] = { hatch, colors: [...seen] };
      }
      return out;
    });
    assert.ok(px.pass && px.none, JSON.stringify(px));
    // Hatch lines are blue-grey (#aab2c0); the fills and the label's anti-aliasing are not.
    const bluish = (c) => { const [r, , b] = c.split(',').map(Number); return b - r >= 10; };
    assert.ok(px.none.hatch > 10, `hatch lines in the none box: ${JSON.stringify(px.none)}`);
    assert.equal(px.pass.hatch, 0, `no hatch in the pass box: ${JSON.stringify(px.pass)}`);
    assert.ok(px.pass.colors.includes('255,252,243') && !px.pass.colors.some(bluish));
    await page.click('#lang-btn');
    lg = await legend();
    assert.equal(lg.pass.title, '此节点所有输入输出的统计量误差, 颜色越深代表调试侧与标杆侧的偏差越大 [0, 0.3)');
    assert.equal(lg.unmatched.title, '比对过程中节点未匹配上');
    await page.click('#lang-btn');
    await page.locator('header').screenshot({ path: path.join(OUT, 'page3-legend.png') });
    assertClean();
    await context.close();
  });

  test('11: compare table: NPU and Bench rows of a pair grouped, differing cells marked, Result and Err_message in view', async () => {
    const { page, assertClean, context } = await demo(browser, server.url, servedAllowlist(server.url));
    const i = await indexOf(page, 'npu', TOP);
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await page.waitForFunction((n) => document.getElementById('details').dataset.node === n
      && document.querySelectorAll('#details-compare tr[data-side]').length > 0, TOP);
    const t = await page.evaluate(() => {
      const groups = [...document.querySelectorAll('#details-compare tbody.dpair')].map((b) => ({
        sides: [...b.querySelectorAll('tr[data-side]')].map((r) => r.dataset.side),
        keys: [...b.querySelectorAll('tr[data-side] td.dkey')].map((td) => td.textContent),
        renamed: b.classList.contains('renamed'),
        diffs: [...b.querySelectorAll('td.ddiff')].map((td) => `${td.closest('tr').dataset.side}:${td.dataset.field}`),
      }));
      const wrap = document.querySelector('#details-compare .dtable-wrap');
      const wr = wrap.getBoundingClientRect();
      const vis = (sel) => [...document.querySelectorAll(sel)].map((e) => {
        const r = e.getBoundingClientRect();
        return r.left >= wr.left - 1 && r.right <= wr.right + 1;
      });
      return { groups, wide: wrap.scrollWidth > wrap.clientWidth, result: vis('#details-compare td[data-field="Result"]'), msg: vis('#details-compare td[data-field="Err_message"]') };
    });
    assert.ok(t.groups.length >= 4, `${t.groups.length} pairs`);
    for (const g of t.groups) assert.deepEqual(g.sides, ['npu', 'bench'], `each pair holds its NPU row, then its Bench row: ${g.keys}`);
    // msprobe pairs by position: the NPU's input.2 goes with the Bench's input.labels, and the NPU's
    // input.labels has no Bench tensor; each shows in its own group.
    const labels = t.groups.find((g) => g.keys[1] === 'input.labels');
    assert.ok(labels, JSON.stringify(t.groups.map((g) => g.keys)));
    assert.equal(labels.keys[0], 'input.2');
    assert.equal(labels.renamed, true);
    const npuLabels = t.groups.find((g) => g.keys[0] === 'input.labels');
    assert.deepEqual(npuLabels.keys, ['input.labels', '—']);
    // Differing cells: the fixture's layouts differ ([s, b, h] vs [b, s, h]): a layer's output shapes.
    const leaf = 'Module.0.module.module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0';
    await page.evaluate((i) => window.__probelens.select('npu', i), await indexOf(page, 'npu', leaf));
    await page.waitForFunction((n) => document.getElementById('details').dataset.node === n
      && document.querySelectorAll('#details-compare tr[data-side]').length > 0, leaf);
    const out0 = await page.evaluate(() => {
      const b = [...document.querySelectorAll('#details-compare tbody.dpair')].find((x) => x.querySelector('td.dkey').textContent === 'output.0');
      return {
        diffs: [...b.querySelectorAll('td.ddiff')].map((td) => `${td.closest('tr').dataset.side}:${td.dataset.field}`),
        shapes: [...b.querySelectorAll('td[data-field="shape"]')].map((td) => td.textContent),
        dtypes: [...b.querySelectorAll('td[data-field="dtype"]')].map((td) => td.textContent),
      };
    });
    assert.notEqual(out0.shapes[0], out0.shapes[1], JSON.stringify(out0));
    assert.ok(out0.diffs.includes('npu:shape') && out0.diffs.includes('bench:shape'), JSON.stringify(out0));
    assert.equal(out0.dtypes[0], out0.dtypes[1]);
    assert.ok(!out0.diffs.some((d) => d.endsWith(':dtype')), 'equal dtypes are not marked');
    await page.evaluate((i) => window.__probelens.select('npu', i), i);
    await page.waitForFunction((n) => document.getElementById('details').dataset.node === n
      && document.querySelectorAll('#details-compare tr[data-side]').length > 0, TOP);
    // Result and Err_message stay in view although the table is wider than its panel.
    assert.equal(t.wide, true, 'the table scrolls sideways at 1600 px');
    assert.ok(t.result.length && t.result.every(Boolean), `Result cells in view: ${t.result}`);
    assert.ok(t.msg.length && t.msg.every(Boolean), `Err_message cells in view: ${t.msg}`);
    await page.locator('#details').screenshot({ path: path.join(OUT, 'page3-compare-table.png') });
    // The CSV of the node keeps msprobe's column order and one line per row.
    const csv = await download(page, '#csv-node', 'page3-node.csv');
    const lines = fs.readFileSync(csv.file, 'utf8').trim().split(/\r\n/);
    assert.match(lines[0], /^Tensor,Side,type,dtype,shape,.*,Result,Err_message$/);
    assert.equal(lines.length - 1, t.groups.reduce((s, g) => s + g.sides.length, 0));
    assertClean();
    await context.close();
  });

  test('12: PNG of the whole graph at a chosen scale, every node expanded too, and SVG', async () => {
    const { page, assertClean, context } = await demo(browser, server.url, servedAllowlist(server.url));
    // Open one layer so the graph is larger than the pane.
    const layer = await indexOf(page, 'npu', 'Module.0.module.module.decoder.layers.0.TransformerLayer.forward.0');
    await page.evaluate((i) => window.__probelens.select('npu', i), layer);
    await page.click('#npu-pane [data-act="expand-all"]');
    const dims = await page.evaluate(() => {
      const v = window.__probelens.views.npu;
      v.model.layout(0);
      return { w: v.model.w[0], h: v.model.h[0], rows: v.model.rows().length, paneW: v.cssW, paneH: v.cssH };
    });
    assert.ok(dims.w > dims.paneW || dims.h > dims.paneH, 'the expanded graph is larger than the pane');
    await page.selectOption('#export-scale', '2');
    const png = await download(page, '#png-npu', 'page3-npu-2x.png');
    assert.equal(png.suggested, 'probelens_npu.png');
    const sz = pngSize(png.file);
    const scale = Number(await page.locator('#export-msg').getAttribute('data-scale'));
    assert.ok(scale > 1 && scale <= 2, `scale ${scale}`);
    assert.equal(sz.width, Math.ceil((dims.w + 24) * scale), 'the whole width, not the viewport');
    assert.equal(sz.height, Math.ceil((dims.h + 24) * scale), 'the whole height');
    await page.selectOption('#export-scale', '1');
    const png1 = pngSize((await download(page, '#png-npu', 'page3-npu-1x.png')).file);
    assert.equal(png1.width, Math.ceil(dims.w + 24));
    // SVG: one group per visible node, each with its full name.
    const svg = await download(page, '#svg-npu', 'page3-npu.svg');
    const text = fs.readFileSync(svg.file, 'utf8');
    assert.match(text, /^<\?xml[^>]*>\n<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.equal((text.match(/<g>/g) ?? []).length, dims.rows, 'every visible node');
    assert.ok(text.includes('<title>Module.0.module.module.decoder.layers.0.TransformerLayer.forward.0</title>'));
    assert.ok(text.endsWith('</svg>'));
    // Every node expanded: collapse the pane first; the export still has every node.
    await page.click('#npu-pane [data-act="collapse-all"]');
    await page.selectOption('#export-scope', 'all');
    const all = fs.readFileSync((await download(page, '#svg-bench', 'page3-bench-all.svg')).file, 'utf8');
    const nb = await page.evaluate(() => window.__probelens.lastResult.bench.names.length);
    assert.equal((all.match(/<g>/g) ?? []).length, nb, 'every Bench node');
    const pngAll = pngSize((await download(page, '#png-bench', 'page3-bench-all.png')).file);
    assert.ok(pngAll.width > 0 && pngAll.height > 2000, `${pngAll.width}×${pngAll.height}`);
    assertClean();
    await context.close();
  });

  test('13: regex message once, the user\'s stack frames first, Esc in the help, a welcome line on the demo', async () => {
    const { page, assertClean, context } = await demo(browser, server.url, servedAllowlist(server.url));
    // Welcome on the demo.
    assert.equal(await page.locator('#welcome').isVisible(), true);
    assert.match(await page.locator('#welcome').textContent(), /Demo: .*choose a dump folder per side/);
    await page.screenshot({ path: path.join(OUT, 'page3-welcome.png') });
    // Bad regex.
    await page.check('#search-regex');
    await page.fill('#search-input', 'layers.(0');
    await page.waitForFunction(() => document.getElementById('search-msg').textContent.includes('Invalid regular expression'));
    const msg = await page.locator('#search-msg').textContent();
    assert.equal(msg.split('Invalid regular expression').length - 1, 1, msg);
    assert.match(msg, /^Invalid regular expression: \/layers\.\(0\/i: Unterminated group$/);
    // Help lists Esc.
    await page.click('#help-btn');
    assert.match(await page.locator('#help-pop').textContent(), /Esc.*close this help/s);
    await page.keyboard.press('Escape');
    assert.equal(await page.locator('#help-pop').isVisible(), false, 'Esc closes the help');
    // Stack: a Bench node called through torch and transformers: the user's frames come first.
    const name = 'Module.module.model.layers.0.mlp.down_proj.Linear.forward.0';
    const b = await indexOf(page, 'bench', name);
    await page.evaluate((i) => window.__probelens.select('bench', i), b);
    await page.waitForFunction((n) => document.getElementById('details').dataset.node === n, name);
    await page.click('#tab-stack');
    const st = await page.evaluate(() => {
      const pre = document.querySelector('#details-stack pre[data-side="bench"]');
      return [...pre.querySelectorAll('.frame')].map((f) => ({ lib: f.classList.contains('lib'), index: Number(f.dataset.index), text: f.textContent }));
    });
    assert.ok(st.some((f) => f.lib) && st.some((f) => !f.lib), JSON.stringify(st));
    const firstLib = st.findIndex((f) => f.lib);
    assert.ok(st.slice(firstLib).every((f) => f.lib), 'library frames after all the user frames');
    assert.ok(st.filter((f) => !f.lib).every((f) => /\/home\/user\/train\//.test(f.text)));
    assert.ok(st.filter((f) => f.lib).every((f) => /site-packages/.test(f.text)));
    assert.ok(st[firstLib].index < st[0].index, 'in the stored stack torch came before the user\'s code');
    await page.locator('#details').screenshot({ path: path.join(OUT, 'page3-stack.png') });
    // Choosing one's own folder hides the welcome.
    await choose(page, 'npu', path.join(FIX, 'qwen_mix_statistics', 'npu', 'step0', 'proc23598'));
    assert.equal(await page.locator('#welcome').isVisible(), false);
    assertClean();
    await context.close();
  });

  test('file:// smoke: the single file has the welcome, Enter stepping, hatched legend and the exports', async () => {
    const { page, assertClean, context } = await demo(browser, SINGLE_URL, fileAllowlist);
    assert.equal(await page.locator('#welcome').isVisible(), true);
    await page.fill('#search-input', 'linear_proj');
    await page.waitForFunction(() => Number(document.getElementById('search-list').dataset.count) > 2);
    await page.focus('#search-input');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /^2 of \d+$/.test(document.getElementById('search-count').textContent));
    assert.match(await page.evaluate(() => getComputedStyle(document.querySelector('#legend li[data-precision="none"] .sw')).backgroundImage), /repeating-linear-gradient/);
    const png = pngSize((await download(page, '#png-npu', 'page3-file-npu.png')).file);
    assert.ok(png.width > 100);
    const svg = fs.readFileSync((await download(page, '#svg-npu', 'page3-file-npu.svg')).file, 'utf8');
    assert.match(svg, /<\/svg>$/);
    assertClean();
    await context.close();
  });
});
