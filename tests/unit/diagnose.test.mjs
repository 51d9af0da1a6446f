// Unit tests of the diagnosis controller (www/controllers/diagnose.js) under `node --test`, with a
// real store and a stand-in client that answers `diagnose`/`diagnoseStep` as the core's dto has it
// (view::diagnosis_dto). The browser tests (tests/e2e/diagnose.test.mjs) compare with the CLI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStore } from '../../www/store.js';
import {
  createDiagnoseController, DIAGNOSIS_INITIAL, DIV_BINS, DIV_UNMEASURED, divClass, divergenceClasses, classCounts,
  suspectItems, heatmapMatrix, layerNode,
} from '../../www/controllers/diagnose.js';

const L1 = 'Module.0.module.module.decoder.layers.1.TransformerLayer.forward.0';
/** A diagnosis dto of (step, rank): layer 1 holds the top suspect when `diverged`. */
function dto(step, rank, diverged, layers = ['decoder.layers.0', 'decoder.layers.1']) {
  return {
    step, rank, verdict: diverged ? 'diverged' : 'agree', measured: 40,
    suspects: diverged
      ? [
        { step, rank, pass: 'forward', node: 'Torch.baddbmm.1.forward', bench_node: 'Torch.baddbmm.1.forward', score: 4.799, why: 'its output differs', npuIndex: 7, benchIndex: 8 },
        { step, rank, pass: 'forward', node: L1, bench_node: null, score: 2.0436, why: 'it holds the first difference', npuIndex: 3, benchIndex: null },
      ]
      : [],
    layers: layers.map((layer, k) => ({ layer, div: diverged && k === 1 ? 2.5 : 0, source: diverged && k === 1 })),
  };
}

test('divergence classes: within noise, a sequential scale, grey when unmeasured; Bench by its counterpart', () => {
  assert.equal(divClass(0), 0);
  assert.equal(divClass(-0.1), 0);
  assert.equal(divClass(0.3), 1);
  assert.equal(divClass(0.5), 2);
  assert.equal(divClass(1.5), 3);
  assert.equal(divClass(2.99), 4);
  assert.equal(divClass(3), 5);
  assert.equal(divClass(12), 5);
  assert.equal(divClass(NaN), DIV_UNMEASURED);
  assert.equal(divClass(null), DIV_UNMEASURED);
  assert.equal(DIV_BINS[DIV_UNMEASURED].color, '#D9D9D9');
  // The scale is sequential: each class darker (smaller sum of RGB) than the one before.
  const lum = (c) => parseInt(c.slice(1, 3), 16) + parseInt(c.slice(3, 5), 16) + parseInt(c.slice(5, 7), 16);
  for (let k = 1; k < DIV_UNMEASURED; k++) assert.ok(lum(DIV_BINS[k].color) < lum(DIV_BINS[k - 1].color), DIV_BINS[k].cls);
  const div = Float32Array.from([0, NaN, 1.2, 3.4]);
  const { npu, bench } = divergenceClasses(div, Int32Array.from([0, -1, 3, 2, 9]));
  assert.deepEqual([...npu], [0, DIV_UNMEASURED, 3, 5]);
  assert.deepEqual([...bench], [0, DIV_UNMEASURED, 5, 3, DIV_UNMEASURED], 'a Bench node takes its NPU counterpart\'s class');
  assert.equal(divergenceClasses(div, null).bench, null);
  const counts = classCounts(npu);
  assert.equal(counts.reduce((a, b) => a + b, 0), 4);
  assert.equal(counts[DIV_UNMEASURED], 1);
});

test('suspect items: the CLI\'s score text, both names and the reason in the tooltip', () => {
  const items = suspectItems(dto(0, 0, true));
  assert.equal(items.length, 2);
  assert.equal(items[0].score, '4.80');
  assert.equal(items[1].score, '2.04');
  assert.equal(items[1].bench, null);
  assert.match(items[1].title, new RegExp(`^${L1.replace(/\./g, '\\.')}\n⇄ —\nit holds`));
  assert.deepEqual([items[0].npuIndex, items[0].benchIndex], [7, 8]);
  assert.deepEqual(suspectItems(dto(0, 0, false)), []);
});

test('heatmap matrix: layers in order of first appearance, rows by step, pending rows null', () => {
  const h = {
    axis: 'step', keys: [0, 1, 2], at: 0, running: true, errors: [null, null, null],
    rows: [dto(0, 0, false), dto(1, 0, true, ['decoder.layers.0', 'decoder.layers.1', 'output_layer.x']), null],
  };
  const m = heatmapMatrix(h);
  assert.deepEqual(m.layers, ['decoder.layers.0', 'decoder.layers.1', 'output_layer.x']);
  assert.equal(m.cells[0][2], null, 'step 0 has no third layer');
  assert.equal(m.cells[1][1].source, true);
  assert.equal(m.cells[1][1].div, 2.5);
  assert.equal(m.cells[2], null);
});

test('layer node: the layer\'s module, not a longer layer number nor a backward node', () => {
  const names = [
    'root',
    'Module.0.module.module.decoder.layers.10.TransformerLayer.backward.0',
    'Module.0.module.module.decoder.layers.10.TransformerLayer.forward.0',
    'Module.0.module.module.decoder.layers.1.TransformerLayer.backward.0',
    L1,
    'Module.0.module.module.decoder.layers.1.self_attention.SelfAttention.forward.0',
  ];
  assert.equal(layerNode(names, 'decoder.layers.1'), 4);
  assert.equal(layerNode(names, 'decoder.layers.10'), 2);
  assert.equal(layerNode(names, 'decoder.layers.2'), -1);
});

test('controller: diagnose, overlay, heatmaps row by row (the shown one without a request), cancel, a new result', async () => {
  const store = createStore({ diagnosis: DIAGNOSIS_INITIAL });
  const asked = [];
  /** @type {(() => void)[]} */
  const waiting = [];
  let hold = false;
  const client = {
    async request(req) {
      asked.push(req);
      if (hold) await new Promise((r) => waiting.push(r));
      if (req.type === 'diagnose') return { diagnosis: dto(req.step, req.rank, true), divergence: Float32Array.from([0, 2]) };
      if (req.type === 'diagnoseStep') {
        if (req.options.rank === 9) throw new Error('step 0 rank 9 is not in the loaded dumps');
        return dto(req.options.step, req.options.rank, req.options.step > 0);
      }
      throw new Error(`unexpected ${req.type}`);
    },
  };
  const dc = createDiagnoseController(store, client);
  dc.resultShown('0:0');
  dc.setOverlay(true);
  assert.equal(store.get().diagnosis.overlay, false, 'no overlay before a diagnosis');
  const d = await dc.diagnose(0, 0);
  assert.equal(d.suspects[0].node, 'Torch.baddbmm.1.forward');
  assert.equal(store.get().diagnosis.result, d);
  assert.equal(store.get().diagnosis.divergence.length, 2);
  dc.setOverlay(true);
  assert.equal(store.get().diagnosis.overlay, true);

  // Heatmaps: steps 0..2 of rank 0 (step 0 is the shown one: no request), then ranks 0 and 9 of step 0.
  const seen = [];
  const ok = await dc.heatmaps(
    [{ axis: 'step', keys: [0, 1, 2], at: 0 }, { axis: 'rank', keys: [0, 9], at: 0 }],
    (axis, key, at) => ({ step: axis === 'step' ? key : at, rank: axis === 'rank' ? key : at, layerMapping: null, fuzzy: false, overflowCheck: false }),
    { step: 0, rank: 0, diagnosis: d },
    (done, total, axis, key) => seen.push([done, total, axis, key]),
  );
  assert.equal(ok, true);
  const steps = asked.filter((r) => r.type === 'diagnoseStep').map((r) => [r.options.step, r.options.rank]);
  assert.deepEqual(steps, [[1, 0], [2, 0], [0, 9]], 'the shown step and rank are not asked again');
  assert.deepEqual(seen.map((x) => x.slice(0, 2)), [[0, 5], [1, 5], [2, 5], [3, 5], [4, 5], [5, 5]]);
  const [hs, hr] = store.get().diagnosis.heatmaps;
  assert.equal(hs.rows[0], d);
  assert.equal(hs.rows[2].verdict, 'diverged');
  assert.equal(hr.rows[1], null);
  assert.match(hr.errors[1], /rank 9 is not in the loaded dumps/);
  assert.equal(store.get().diagnosis.running, false);

  // A cancel stops after the row being diagnosed; its answer is dropped.
  hold = true;
  const run = dc.heatmaps([{ axis: 'step', keys: [1, 2], at: 0 }], (a, key) => ({ step: key, rank: 0 }), { step: 0, rank: 0, diagnosis: null });
  await new Promise((r) => setTimeout(r, 0));
  dc.cancel();
  waiting.splice(0).forEach((r) => r());
  assert.equal(await run, false);
  const h = store.get().diagnosis.heatmaps[0];
  assert.deepEqual(h.rows, [null, null]);
  assert.equal(h.running, false);
  hold = false;

  // A new result: no diagnosis, the overlay off; the heatmaps stay only when asked to.
  dc.resultShown('1:0', true);
  assert.equal(store.get().diagnosis.result, null);
  assert.equal(store.get().diagnosis.overlay, false);
  assert.equal(store.get().diagnosis.heatmaps.length, 1);
  dc.resultShown('1:0');
  assert.deepEqual(store.get().diagnosis.heatmaps, []);

  // An error of the core shows as the slice's error; a stale answer is dropped.
  const bad = createDiagnoseController(store, { request: async () => { throw new Error('the diagnosis compares two runs'); } });
  assert.equal(await bad.diagnose(0, 0), null);
  assert.equal(store.get().diagnosis.error, 'the diagnosis compares two runs');
  hold = true;
  const late = dc.diagnose(0, 0);
  await new Promise((r) => setTimeout(r, 0));
  dc.resultShown('2:0');
  waiting.splice(0).forEach((r) => r());
  assert.equal(await late, null);
  assert.equal(store.get().diagnosis.result, null, 'an answer for an older result is dropped');
});
