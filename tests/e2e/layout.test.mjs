// The page's layout (issue 24, items 1, 2 and 10): the graph canvases are the page. Measured in the
// state a user works in (two folders compared, a node selected with its details shown, the tools
// sidebar open): canvas area over window area, and no page scroll, at 1600×1000, 1280×720 and
// 2560×1440; at 1024×768 with the Mapping panel open no pane is narrower than 320 px. The sizes are
// remembered across a reload; fit leaves the minimap's corner clear and the minimap can be
// collapsed; revealing a counterpart centres it; Expand all follows sync expand. Also a smoke run of
// the single file on file://. Screenshots of both sizes (www/screenshots/ with UPDATE_SCREENSHOTS=1, for README-page.md).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  FIX, ROOT, OUT, SINGLE_URL, requireBuild, launch, startServer, openPage, servedAllowlist, fileAllowlist, waitLoad,
  choose, assertMatchesReference, resultSummary,
} from './helpers.mjs';

const MIX = path.join(FIX, 'qwen_mix_statistics');
// README-page.md's screenshots are refreshed with UPDATE_SCREENSHOTS=1; other runs write tests/out/.
const SHOTS = process.env.UPDATE_SCREENSHOTS ? path.join(ROOT, 'www', 'screenshots') : OUT;

/** Canvas area over window area, page scroll, and the widths of the panes and panels. */
async function measure(page) {
  return page.evaluate(() => {
    const r = (id) => document.getElementById(id).getBoundingClientRect();
    const area = (id) => r(id).width * r(id).height;
    const se = document.scrollingElement ?? document.documentElement;
    const mp = document.getElementById('mapping-panel');
    return {
      ratio: (area('npu-canvas') + area('bench-canvas')) / (innerWidth * innerHeight),
      scrollY: se.scrollHeight - innerHeight,
      scrollX: se.scrollWidth - innerWidth,
      panes: [r('npu-pane').width, r('bench-pane').width],
      mapping: mp.hidden ? 0 : mp.getBoundingClientRect().width,
      sidebar: document.getElementById('sidebar').hidden ? 0 : r('sidebar').width,
      details: r('details').height,
      detailsNode: document.getElementById('details').dataset.node,
      minimaps: [...document.querySelectorAll('canvas.minimap')].map((c) => {
        const m = c.getBoundingClientRect();
        const w = c.parentElement.getBoundingClientRect();
        return { inside: m.left >= w.left - 0.5 && m.right <= w.right + 0.5 && m.top >= w.top - 0.5 && m.bottom <= w.bottom + 0.5, shown: c.style.display !== 'none' && m.width > 0 };
      }),
    };
  });
}

/** Opens the page at a size, compares the demo's two folders chosen by hand, selects a node with details. */
async function workingState(browser, server, width, height) {
  const o = await openPage(browser, servedAllowlist(server.url), { viewport: { width, height }, outlines: false });
  const { page } = o;
  await page.goto(server.url);
  assert.equal(await waitLoad(page, 0), 'ready');
  await choose(page, 'npu', path.join(MIX, 'npu', 'step0', 'proc23598'));
  await choose(page, 'bench', path.join(MIX, 'bench', 'step0', 'proc23368'));
  assertMatchesReference(await resultSummary(page), 'qwen_mix_statistics', 'nomap', 0, 0);
  // A matched API leaf with statistics: both panes show it, the details both sides.
  const { i, name } = await page.evaluate(() => {
    const g = window.__probelens.lastResult.npu;
    const k = g.names.findIndex((n, j) => g.matched[j] >= 0 && g.nodeType[j] === 1 && g.subtreeEnd[j] === j + 1 && Number.isFinite(g.precision[j]));
    return { i: k, name: g.names[k] };
  });
  assert.ok(i > 0, 'a matched leaf');
  await page.evaluate((k) => window.__probelens.select('npu', k), i);
  await page.waitForFunction((n) => document.getElementById('details').dataset.node === n, name);
  o.selected = name;
  return o;
}

/** The screen box of node i in a pane's view. */
async function screenBox(page, side, i) {
  return page.evaluate(([s, k]) => {
    const v = window.__probelens.views[s];
    const m = v.model;
    m.layout(0);
    const { x, y } = m.absPos(k);
    return { x: x * v.scale + v.tx, y: y * v.scale + v.ty, w: m.w[k] * v.scale, h: m.h[k] * v.scale, cssW: v.cssW, cssH: v.cssH };
  }, [side, i]);
}

describe('layout: the graphs are the page', () => {
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

  for (const [w, h, min] of [[1600, 1000, 0.55], [1280, 720, 0.45], [2560, 1440, 0.55]]) {
    test(`item 1: at ${w}×${h} the canvases take ≥ ${min * 100} % of the window, with no page scroll`, async () => {
      const o = await workingState(browser, server, w, h);
      const { page, context, assertClean } = o;
      const m = await measure(page);
      console.log(`${w}×${h}: canvases ${(m.ratio * 100).toFixed(1)} % of the window; sidebar ${m.sidebar} px, details ${m.details} px`);
      assert.ok(m.sidebar > 0, 'the tools sidebar is open');
      assert.ok(m.details > 100, 'the details are shown');
      assert.equal(m.detailsNode, o.selected);
      assert.ok(m.ratio >= min, `canvas area ${(m.ratio * 100).toFixed(1)} % < ${min * 100} %`);
      assert.ok(m.scrollY <= 0 && m.scrollX <= 0, `no page scroll (${m.scrollX}, ${m.scrollY})`);
      assert.equal(await page.locator('#loadbar.compact').count(), 1, 'the inputs folded into one bar');
      // The top bar's summary gives way first: the legend (every class and its count) stays whole.
      const clipped = await page.evaluate(() => { const l = /** @type {HTMLElement} */ (document.getElementById('legend')); return l.scrollWidth - l.clientWidth; });
      assert.ok(clipped <= 0, `the legend is clipped by ${clipped} px`);
      if (w !== 2560) await page.screenshot({ path: path.join(SHOTS, `page-${w}x${h}.png`) });
      // One click opens the inputs (folders, mapping, options) again.
      await page.click('#load-toggle');
      assert.equal(await page.isVisible('#npu-card'), true);
      assertClean();
      await context.close();
    });
  }

  test('item 1: at 1024×768 with the Mapping panel open no pane is narrower than 320 px; the minimaps stay inside their canvases', async () => {
    const { page, context, assertClean } = await workingState(browser, server, 1024, 768);
    await page.click('#mapping-toggle');
    await page.waitForSelector('#mapping-panel:not([hidden])');
    const m = await measure(page);
    console.log(`1024×768 + Mapping: panes ${m.panes.map(Math.round).join(' / ')} px, panel ${Math.round(m.mapping)} px, canvases ${(m.ratio * 100).toFixed(1)} %`);
    for (const p of m.panes) assert.ok(p >= 320, `pane ${p} px`);
    assert.ok(m.mapping >= 320, `mapping panel ${m.mapping} px`);
    for (const mm of m.minimaps) assert.ok(mm.inside, 'minimap inside its canvas');
    assert.ok(m.scrollY <= 0 && m.scrollX <= 0, 'no page scroll');
    await page.screenshot({ path: path.join(SHOTS, 'page-1024x768-mapping.png') });
    assertClean();
    await context.close();
  });

  test('item 1: the details drawer, the sidebar and the outlines hide and resize, and the sizes survive a reload', async () => {
    const { page, context, assertClean } = await workingState(browser, server, 1600, 1000);
    const before = await measure(page);
    // The details drawer: keyboard resize on its bar, then hide.
    await page.focus('#hsplit');
    for (let k = 0; k < 3; k++) await page.keyboard.press('ArrowUp');
    const taller = await measure(page);
    assert.equal(Math.round(taller.details - before.details), 90);
    await page.click('#details-toggle');
    const hidden = await measure(page);
    assert.ok(hidden.details < 40 && hidden.ratio > taller.ratio, 'hiding the details gives the canvases the room');
    // The sidebar narrower, the outlines shown.
    await page.focus('#sidebar-resize');
    await page.keyboard.press('ArrowLeft');
    await page.keyboard.press('ArrowLeft');
    await page.click('#npu-pane [data-act="outline"]');
    const narrow = await measure(page);
    assert.equal(Math.round(before.sidebar - narrow.sidebar), 40);
    assert.equal(await page.isVisible('#npu-outline'), true);
    const outlineW = async () => page.evaluate(() => document.getElementById('npu-outline').getBoundingClientRect().width);
    const w0 = await outlineW();
    await page.focus('.oresize[data-side="npu"]');
    await page.keyboard.press('ArrowRight');
    const w1 = await outlineW();
    assert.equal(Math.round(w1 - w0), 20, 'the outline resizes');
    // Reload: the same layout.
    await page.reload();
    await waitLoad(page, 0);
    const again = await measure(page);
    assert.equal(again.sidebar, narrow.sidebar);
    assert.equal(await page.isVisible('#npu-outline'), true);
    assert.equal(await outlineW(), w1);
    assert.equal(await page.getAttribute('#details-toggle', 'aria-expanded'), 'false');
    assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('probelens.layout.v1')).detailsH), Math.round(taller.details));
    assertClean();
    await context.close();
  });

  test('item 2: fit leaves the minimap clear; the minimap collapses and fit then uses its corner', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url), { viewport: { width: 1600, height: 1000 }, outlines: false });
    await page.goto(server.url);
    await waitLoad(page, 0);
    for (const side of ['npu', 'bench']) {
      const b = await screenBox(page, side, 0);
      const mini = await page.evaluate((s) => {
        const c = document.querySelector(`canvas.minimap[data-side="${s}"]`);
        const m = c.getBoundingClientRect();
        const w = c.parentElement.getBoundingClientRect();
        return { left: m.left - w.left, bottom: m.bottom - w.top };
      }, side);
      const clear = b.x + b.w <= mini.left || b.y >= mini.bottom;
      assert.ok(clear, `${side}: the root box (${JSON.stringify(b)}) is clear of the minimap (${JSON.stringify(mini)})`);
    }
    const withMini = await screenBox(page, 'npu', 0);
    await page.click('#npu-pane button.minimap-toggle');
    assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('probelens.layout.v1')).minimapOpen), false);
    assert.equal(await page.isVisible('canvas.minimap[data-side="npu"]'), false);
    const without = await screenBox(page, 'npu', 0);
    assert.ok(without.w * without.h >= withMini.w * withMini.h, 'fit uses the corner once the minimap is collapsed');
    await page.click('#npu-pane button.minimap-toggle');
    assert.equal(await page.isVisible('canvas.minimap[data-side="npu"]'), true);
    assertClean();
    await context.close();
  });

  test('item 10: selecting a node centres its counterpart; Expand all follows sync expand', async () => {
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url), { viewport: { width: 1600, height: 1000 }, outlines: false });
    await page.goto(server.url);
    await waitLoad(page, 0);
    // A matched module deep in the graph: its counterpart's box is centred in the Bench pane.
    const { i, peer } = await page.evaluate(() => {
      const r = window.__probelens.lastResult;
      const k = r.npu.names.findIndex((n) => /layers\.1\..*mlp\.MLP\.forward/.test(n) && true);
      return { i: k, peer: r.npu.matched[k] };
    });
    assert.ok(i > 0 && peer > 0);
    await page.evaluate((k) => window.__probelens.select('npu', k), i);
    const b = await screenBox(page, 'bench', peer);
    assert.ok(b.w <= b.cssW, 'the counterpart fits');
    assert.ok(Math.abs(b.x + b.w / 2 - b.cssW / 2) <= 2, `centred horizontally (${b.x + b.w / 2} vs ${b.cssW / 2})`);
    assert.ok(b.x >= 0 && b.x + b.w <= b.cssW, 'nothing of it cut off');
    // Expand all on the NPU pane with sync expand: the Bench pane expands too.
    await page.click('#npu-pane [data-act="expand-all"]');
    const open = await page.evaluate(() => ['npu', 'bench'].map((s) => {
      const m = window.__probelens.views[s].model;
      let closed = 0;
      for (let k = 0; k < m.n; k++) if (m.hasChildren(k) && !m.expanded[k]) closed++;
      return closed;
    }));
    assert.deepEqual(open, [0, 0]);
    await page.click('#bench-pane [data-act="collapse-all"]');
    const closed = await page.evaluate(() => ['npu', 'bench'].map((s) => Array.from(window.__probelens.views[s].model.expanded).filter(Boolean).length));
    assert.ok(closed[0] <= 1 && closed[1] <= 1, `both collapsed (${closed})`);
    assertClean();
    await context.close();
  });

  test('smoke: the single file on file:// at 1280×720 folds its inputs and keeps its layout', async () => {
    const { page, context, assertClean } = await openPage(browser, fileAllowlist, { viewport: { width: 1280, height: 720 }, outlines: false });
    await page.goto(SINGLE_URL);
    assert.equal(await waitLoad(page, 0), 'ready');
    assert.equal(await page.locator('#loadbar.compact').count(), 1);
    const m = await measure(page);
    assert.ok(m.scrollY <= 0 && m.scrollX <= 0, 'no page scroll');
    await page.evaluate(() => window.__probelens.select('npu', 3));
    await page.click('#details-toggle');
    await page.reload();
    await waitLoad(page, 0);
    assert.equal(await page.getAttribute('#details-toggle', 'aria-expanded'), 'false', 'remembered on file:// too');
    assertClean();
    await context.close();
  });
});
