// The browser's memory limit (issue #7: a 2 GB dump.json must not crash the tab). A wasm32 page has
// at most 4 GiB; a dump that does not fit must give a clear message naming the file, the shown
// result must stay usable and the core must work again. The real 2 GB run is a benchmark
// (bench/big.mjs, BENCHMARKS.md); here the page's `?heap=<bytes>` knob caps the core's memory, so
// small inputs reach the same paths:
// - a dump.json is never held whole: the core reads it in slices while it parses it, so one far
//   bigger than the core's memory loads when what it holds fits;
// - a file the core reads whole (stack.json, through the worker's reader while its folder is
//   parsed; a construct.json, read in slices like a dump.json, is read again whole for the message
//   when it is not a well-formed object) and cannot even reserve room for is refused before it is
//   read (no trap);
// - a dump that fits as bytes but not once parsed makes an allocation fail inside the core, which
//   aborts the wasm instance (a trap): the worker says it was the memory limit, the page replaces
//   the worker, reads the shown result's folders into the new one and re-applies its manual
//   matches, so details and matching work again, and the next load works.
// The caps are far above what the demo needs (18 MB of wasm memory) and far below what the inputs need.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSyntheticDump } from './synth.mjs';
import { FIX, requireBuild, launch, startServer, openPage, servedAllowlist, loads, waitLoad, resultSummary, reference, indexOf,
  detailsOf, visibleErrors, openInputs,
} from './helpers.mjs';

const MIX = path.join(FIX, 'qwen_mix_statistics');
const NPU_PROC = path.join(MIX, 'npu', 'step0', 'proc23598');
const NPU_STEP = path.join(MIX, 'npu', 'step0');
const BENCH_STEP = path.join(MIX, 'bench', 'step0');
const MLP = 'Module.0.module.module.decoder.layers.0.mlp.MLP.forward.0';
const MIB = 1024 * 1024;

/** The end of both memory messages (the worker's and the core's). */
const ADVICE = "a page's WebAssembly memory is at most 4 GiB): use the CLI (probelens graph_visualize) or a smaller dump";

describe('the browser memory limit', () => {
  let server;
  let browser;
  let dir;
  before(async () => {
    requireBuild();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-mem-'));
    server = await startServer();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a 400 MB dump.json under a 128 MiB memory cap is read in 4 MiB slices and loads', async () => {
    // The fixture's dump.json with 1 MB of blanks before each of its 401 entries (400 MB of valid
    // JSON; the parser drops each run of blanks once the entry after it arrives), the core capped at 128 MiB.
    const npu = path.join(dir, 'padded', 'npu');
    fs.mkdirSync(npu, { recursive: true });
    fs.copyFileSync(path.join(NPU_PROC, 'construct.json'), path.join(npu, 'construct.json'));
    fs.copyFileSync(path.join(NPU_PROC, 'stack.json'), path.join(npu, 'stack.json'));
    const dump = path.join(npu, 'dump.json');
    const blanks = Buffer.alloc(1e6, 0x20);
    const fd = fs.openSync(dump, 'w');
    let entries = 0;
    for (const line of fs.readFileSync(path.join(NPU_PROC, 'dump.json'), 'utf8').split(/(?<=\n)/)) {
      if (/^ {2}"[^"]+": \{$/.test(line.trimEnd())) {
        fs.writeSync(fd, blanks);
        entries++;
      }
      fs.writeSync(fd, line);
    }
    fs.closeSync(fd);
    assert.equal(entries, 401);
    const size = fs.statSync(dump).size;
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(`${server.url}?heap=${128 * MIB}`);
    assert.equal(await waitLoad(page, 0), 'ready', 'the demo loads under the cap');
    let n = await loads(page);
    await openInputs(page); // the inputs fold into one bar once something is shown
    await page.click('#bench-clear');
    await waitLoad(page, n);
    n = await loads(page);
    await page.setInputFiles('#npu-dir', npu);
    assert.equal(await waitLoad(page, n, 60000), 'ready');
    assert.deepEqual(await visibleErrors(page), []);
    const r = await page.evaluate(() => {
      const x = window.__probelens.lastResult;
      return { type: x.graphType, nodes: x.npu.names.length, reads: x.jsonReads, wasm: x.timings.wasmBytes };
    });
    assert.equal(r.type, 'build');
    assert.equal(r.nodes, reference('qwen_mix_statistics', 'map', 0, 0, 'NPU').nodes, 'the fixture\'s graph');
    const SLICE = 4 * MIB;
    const whole = (f) => ({ file: `npu/${f}`, offset: 0, length: fs.statSync(path.join(npu, f)).size });
    assert.deepEqual(r.reads, [whole('construct.json'), ...Array.from({ length: Math.ceil(size / SLICE) }, (_, k) => (
      { file: 'npu/dump.json', offset: k * SLICE, length: Math.min(SLICE, size - k * SLICE) })), whole('stack.json')]);
    assert.ok(r.wasm <= 128 * MIB && r.wasm < size / 3, `wasm memory ${r.wasm} B for a ${size} B dump.json`);
    assertClean();
    await context.close();
  });

  test('a construct.json the tab cannot hold is refused before reading, naming the file; the result stays usable', async () => {
    // 200 MB of construct.json (sparse: nothing is written: NUL bytes, so not JSON: its first
    // slice says so, and it is read again whole for the message), the core capped at 48 MiB.
    const npu = path.join(dir, 'big', 'npu');
    fs.mkdirSync(npu, { recursive: true });
    fs.copyFileSync(path.join(NPU_PROC, 'dump.json'), path.join(npu, 'dump.json'));
    fs.copyFileSync(path.join(NPU_PROC, 'stack.json'), path.join(npu, 'stack.json'));
    const fd = fs.openSync(path.join(npu, 'construct.json'), 'w');
    fs.ftruncateSync(fd, 200e6);
    fs.closeSync(fd);
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(`${server.url}?heap=${48 * MIB}`);
    assert.equal(await waitLoad(page, 0), 'ready', 'the demo loads under the cap');
    const demo = await resultSummary(page);
    const n = await loads(page);
    await page.setInputFiles('#npu-dir', npu);
    assert.equal(await waitLoad(page, n), 'ready');
    assert.deepEqual(await visibleErrors(page), [
      `npu-error: npu/construct.json: the browser's memory limit was reached while reading it (200.0 MB more could not be allocated; ${ADVICE}`,
    ]);
    assert.deepEqual(await resultSummary(page), demo, 'the demo is still shown');
    const mlp = await indexOf(page, 'npu', MLP);
    assert.equal((await detailsOf(page, 'npu', mlp)).node, MLP, 'its details still open (same worker)');
    assertClean();
    await context.close();
  });

  test('running out of memory while parsing: a clear message, the shown result restored with its manual unmatch, the next load works', async () => {
    // ~44 MB of dump.json: read in slices under a 40 MiB cap, too big once parsed. (It was ~11 MB
    // until the parsed values took 8 bytes instead of 16, then ~22 MB until a tensor kept only its
    // numbers (json.rs templates): those now fit.)
    const npu = path.join(dir, 'parse', 'npu');
    writeSyntheticDump(npu, { modules: 2000, apisPerModule: 49 });
    const { page, context, assertClean } = await openPage(browser, servedAllowlist(server.url));
    await page.goto(`${server.url}?heap=${40 * MIB}`);
    assert.equal(await waitLoad(page, 0), 'ready', 'the demo loads under the cap');
    // A manual change the restored session must have too: unmatch the MLP of layer 0.
    const demo = await resultSummary(page);
    const mlp = await indexOf(page, 'npu', MLP);
    await page.evaluate((i) => window.__probelens.select('npu', i), mlp);
    await page.click('#unmatch-btn');
    await page.waitForFunction((i) => window.__probelens.lastResult.npu.matched[i] === -1, mlp);
    const shown = await resultSummary(page);
    assert.notDeepEqual(shown, demo);

    let n = await loads(page);
    await page.setInputFiles('#npu-dir', npu);
    assert.equal(await waitLoad(page, n), 'ready');
    const errors = await visibleErrors(page);
    assert.equal(errors.length, 1, errors.join('\n'));
    assert.match(
      errors[0],
      /^npu-error: npu\/dump\.json: the browser's memory limit was reached while parsing it \(\d+ MB in use, \d+\.\d MB more could not be allocated; /,
    );
    assert.ok(errors[0].endsWith(ADVICE), errors[0]);
    assert.deepEqual(await resultSummary(page), shown, 'the shown result is unchanged (MLP still unmatched)');
    // The worker was replaced and the result's session rebuilt in it: details and matching work,
    // and undoing the unmatch gives the demo's numbers back.
    const d = await detailsOf(page, 'npu', mlp);
    assert.equal(d.node, MLP, `details after the restart: ${d.text}`);
    await page.click('#undo-btn');
    await page.waitForFunction((i) => window.__probelens.lastResult.npu.matched[i] >= 0, mlp);
    assert.deepEqual(await resultSummary(page), demo, 'undo in the restored session');
    // The new worker loads the next folders: the fixture's NPU side (alone: the first choice replaced
    // the demo, its Bench side cleared), then its Bench side.
    n = await loads(page);
    await page.setInputFiles('#npu-dir', NPU_STEP);
    assert.equal(await waitLoad(page, n), 'ready');
    assert.deepEqual(await visibleErrors(page), []);
    assert.equal((await resultSummary(page)).graphType, 'build');
    n = await loads(page);
    await page.setInputFiles('#bench-dir', BENCH_STEP);
    assert.equal(await waitLoad(page, n), 'ready');
    assert.deepEqual(await visibleErrors(page), []);
    const sum = await resultSummary(page);
    // The user's folders run without the demo's mapping (issue 24, item 3): msprobe's numbers without one.
    assert.equal(sum.npu.nodes, reference('qwen_mix_statistics', 'nomap', 0, 0, 'NPU').nodes);
    assert.equal(sum.npu.matched, reference('qwen_mix_statistics', 'nomap', 0, 0, 'NPU').matched, 'a fresh run: the unmatch is gone');
    assertClean();
    await context.close();
  });
});
