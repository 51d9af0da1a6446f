// Unit tests of the page's store and controllers (www/store.js, www/controllers/*.js) under
// `node --test`, with a real store. The client is a small stand-in that answers `match` requests
// with the change list the core would give for simple pairs; the browser tests judge the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStore } from '../../www/store.js';
import { createManualController, twinName, recursivePlan, runKey, MANUAL_INITIAL } from '../../www/controllers/manual.js';
import { createLayoutController, readLayout, defaultsFor, LAYOUT_DEFAULTS, LAYOUT_KEY } from '../../www/controllers/layout.js';
import { stackOf, templateFor, createOfferController } from '../../www/controllers/frameworks.js';
import { classify } from '../../www/colors.js';
import { graph } from './graphs.mjs';
import { parseHash, buildHash, MAX_OPEN } from '../../www/controllers/hash.js';
import { slotOf, sideOfSlot, errorPlaceOf, parallelOptionsOf } from '../../www/controllers/load.js';


const NPU = [
  ['root', -1],
  ['Module.a.Linear.forward.0', 0],
  ['Module.a.Linear.backward.0', 0],
  ['Module.b.MLP.forward.0', 0],
  ['Module.b.fc1.Linear.forward.0', 3],
  ['Module.b.fc2.Linear.forward.0', 3],
  ['Torch.cat.0.forward', 0],
];
const BENCH = [
  ['root', -1],
  ['Module.x.Linear.forward.0', 0],
  ['Module.x.Linear.backward.0', 0],
  ['Module.y.MLP.forward.0', 0],
  ['Module.y.fc1.Linear.forward.0', 3],
  ['Module.y.other.Linear.forward.0', 3],
  ['Torch.cat.0.forward', 0],
];

/** A compare result where the roots and Torch.cat are matched automatically. */
function result() {
  const npu = graph(NPU);
  const bench = graph(BENCH);
  for (const [i, j] of [[0, 0], [6, 6]]) {
    npu.matched[i] = j;
    bench.matched[j] = i;
    npu.precision[i] = 0;
  }
  const r = {
    graphType: 'compare', task: 'summary', microSteps: 1, toolTip: null, diagnostics: [], npu, bench,
    nodeColors: { '#FFFFFF': { value: [0, 0.3], description: 'pass', accuracy_level: 'pass' }, '#FF0000': { value: [0.3, 1], description: 'error', accuracy_level: 'error' } },
  };
  return r;
}

/** A stand-in of the core's `match` answering with the change list of the ops (precision 0). */
function fakeClient(store) {
  const calls = [];
  return {
    calls,
    async request(req) {
      assert.equal(req.type, 'match');
      calls.push(req.ops);
      const r = store.get().result;
      const n = Int32Array.from(r.npu.matched);
      const b = Int32Array.from(r.bench.matched);
      const touchedN = new Set();
      const touchedB = new Set();
      const link = (i, j) => {
        if (n[i] >= 0) { b[n[i]] = -1; touchedB.add(n[i]); }
        if (b[j] >= 0) { n[b[j]] = -1; touchedN.add(b[j]); }
        n[i] = j; b[j] = i; touchedN.add(i); touchedB.add(j);
      };
      for (const op of req.ops) {
        if (op.op === 'match') {
          link(op.npu, op.bench);
          if (op.recursive) for (const [c, d] of recursivePlan(r.npu, r.bench, op.npu, op.bench).paired) link(c, d);
        } else if (op.op === 'unmatch') {
          const [i, j] = op.side === 'npu' ? [op.index, n[op.index]] : [b[op.index], op.index];
          if (i >= 0) { n[i] = -1; touchedN.add(i); }
          if (j >= 0) { b[j] = -1; touchedB.add(j); }
        }
      }
      return {
        npu: [...touchedN].map((i) => [i, n[i] >= 0 ? 0 : null, n[i]]),
        bench: [...touchedB].map((j) => [j, null, b[j]]),
      };
    },
  };
}

function setup(r = result()) {
  const store = createStore({ result: r, classes: classify(r), resultVersion: 0, runKey: runKey(0, 0), matchBlocked: null, kept: new Map(), ...MANUAL_INITIAL });
  const client = fakeClient(store);
  return { store, client, mc: createManualController(store, client) };
}

test('store: set notifies the subscribers of the changed keys only; batch notifies once', () => {
  const s = createStore({ a: 1, b: 2 });
  const seen = [];
  s.subscribe(['a'], (st, prev) => seen.push(['a', prev.a, st.a]));
  const off = s.subscribe(null, () => seen.push(['any']));
  s.set({ b: 3 });
  s.set({ a: 5 });
  s.set({ a: 5 });
  off();
  s.batch(() => {
    s.set({ a: 6 });
    s.set({ a: 7 });
  });
  assert.deepEqual(seen, [['any'], ['a', 1, 5], ['any'], ['a', 5, 7]]);
});

test('twinName: forward and backward twins of modules and APIs', () => {
  assert.equal(twinName('Module.a.Linear.forward.0'), 'Module.a.Linear.backward.0');
  assert.equal(twinName('Module.a.Linear.backward.0'), 'Module.a.Linear.forward.0');
  assert.equal(twinName('Torch.cat.0.forward'), 'Torch.cat.0.backward');
  assert.equal(twinName('Module.forward_net.Linear.forward.3'), 'Module.forward_net.Linear.backward.3');
  assert.equal(twinName('root'), null);
});

test('picks: a matched node does not replace a grey pick of the other side; keyboard moves leave the picks', () => {
  const { store, mc } = setup();
  mc.pickNode('npu', 1, 'click');
  assert.deepEqual(store.get().pick, { npu: 1, bench: -1 });
  mc.pickNode('bench', 6, 'click'); // matched Bench node: its counterpart would replace the grey NPU pick
  assert.deepEqual(store.get().pick, { npu: 1, bench: 6 }, 'the grey NPU pick stays');
  mc.pickNode('npu', 3, 'keyboard');
  assert.deepEqual(store.get().pick, { npu: 1, bench: 6 });
  mc.pickNode('npu', 6, 'click'); // matched NPU node with an empty-or-matched other pick: brings its counterpart
  assert.deepEqual(store.get().pick, { npu: 6, bench: 6 });
});

test('preview says what Match will do before it happens; a module and an API cannot pair', () => {
  const { mc } = setup();
  mc.setPicks({ npu: 1, bench: 6 });
  const bad = mc.preview(false);
  assert.equal(bad.ok, false);
  assert.match(bad.text, /Cannot match a module with a API/);
  mc.setPicks({ npu: 1, bench: 1 });
  const p = mc.preview(false);
  assert.equal(p.ok, true);
  assert.match(p.text, /Match will pair Module\.a\.Linear\.forward\.0 ⇄ Module\.x\.Linear\.forward\.0\./);
  assert.match(p.text, /backward twin Module\.a\.Linear\.backward\.0 ⇄ Module\.x\.Linear\.backward\.0 is matched too/);
  assert.equal(p.ops.length, 2);
  mc.setPicks({ npu: 6, bench: 1 });
  assert.equal(mc.preview(false).ok, false, 'API vs module');
});

test('match pairs the backward twin, and says which automatic match it displaced', async () => {
  const { store, mc, client } = setup();
  mc.setPicks({ npu: 1, bench: 1 });
  await mc.match(false);
  const r = store.get().result;
  assert.equal(r.npu.matched[1], 1);
  assert.equal(r.npu.matched[2], 2, 'the backward twin is matched too');
  assert.equal(store.get().manual.size, 2);
  assert.equal(client.calls.length, 1, 'one request, one undo step');
  assert.equal(store.get().history.undo.length, 1);
  assert.match(store.get().matchMsg.text, /Matched 2 NPU node\(s\)\. Twin matched too/);
  // Displace the automatic match of Torch.cat (an API with an API).
  const g = store.get().result;
  g.bench.nodeType[5] = 1; // make a Bench leaf an API for this check
  mc.setPicks({ npu: 6, bench: 5 });
  assert.match(mc.preview(false).text, /It replaces the automatic match Torch\.cat\.0\.forward ⇄ Torch\.cat\.0\.forward\./);
  await mc.match(false);
  assert.match(store.get().matchMsg.text, /Replaced: Torch\.cat\.0\.forward ⇄ Torch\.cat\.0\.forward\./);
});

test('unmatch removes the twin pair too', async () => {
  const { store, mc } = setup();
  mc.setPicks({ npu: 1, bench: 1 });
  await mc.match(false);
  await mc.unmatch('bench', 1);
  const r = store.get().result;
  assert.equal(r.npu.matched[1], -1);
  assert.equal(r.npu.matched[2], -1, 'the backward twin is unmatched too');
  assert.equal(store.get().manual.size, 0);
  assert.match(store.get().matchMsg.text, /Unmatched, with its twin Module\.a\.Linear\.backward\.0 ⇄ Module\.x\.Linear\.backward\.0/);
  await mc.undoRedo(false);
  assert.equal(r.npu.matched[2], 2, 'undo brings both back');
});

test('a recursive match explains the descendants it could not pair', async () => {
  const { store, mc } = setup();
  mc.setPicks({ npu: 3, bench: 3 });
  assert.match(mc.preview(true).text, /Recursive: 1 of 2 descendants/);
  await mc.match(true);
  const r = store.get().result;
  assert.equal(r.npu.matched[4], 4, 'fc1 pairs by the swapped module path');
  assert.equal(r.npu.matched[5], -1);
  assert.match(store.get().matchMsg.text, /1 of 2 descendants matched; 1 have no Bench node of the same name below Module\.y\.MLP\.forward\.0 \(e\.g\. Module\.b\.fc2\.Linear\.forward\.0: no Module\.y\.fc2\.Linear\.forward\.0\)/);
});

test('undo and redo restore the exact state, displaced automatic matches included', async () => {
  const { store, mc } = setup();
  mc.setPicks({ npu: 1, bench: 1 });
  await mc.match(false);
  await mc.undoRedo(false);
  const r = store.get().result;
  assert.equal(r.npu.matched[1], -1);
  assert.equal(r.npu.matched[2], -1);
  assert.equal(store.get().manual.size, 0);
  assert.match(store.get().matchMsg.text, /Undone: match/);
  await mc.undoRedo(true);
  assert.equal(r.npu.matched[1], 1);
  assert.equal(store.get().manual.size, 2);
});

test('manual pairs are kept per (step, rank) by name and re-applied to the next result of that key', async () => {
  const { store, mc, client } = setup();
  mc.setPicks({ npu: 1, bench: 1 });
  await mc.match(false);
  assert.deepEqual(store.get().kept.get('0:0'), [['Module.a.Linear.forward.0', 'Module.x.Linear.forward.0'], ['Module.a.Linear.backward.0', 'Module.x.Linear.backward.0']]);
  // Another step: a fresh result, nothing kept for it.
  store.set({ result: result() });
  let got = await mc.resultShown('1:0');
  assert.deepEqual(got, { reapplied: 0, already: 0, missing: 0 });
  assert.equal(store.get().manual.size, 0);
  // Back to step 0 (or the same step after -oc): the pairs come back by name, one undo step.
  const n = client.calls.length;
  const r2 = result();
  store.set({ result: r2, classes: classify(r2) });
  got = await mc.resultShown('0:0');
  assert.equal(got.reapplied, 2);
  assert.equal(client.calls.length, n + 1);
  assert.equal(r2.npu.matched[1], 1);
  assert.equal(store.get().manual.size, 2);
  assert.equal(store.get().history.undo.length, 1);
  assert.match(store.get().matchMsg.text, /Re-applied 2 manual pair\(s\) by name/);
  // A result the pairs do not fit: counted as missing, said.
  const r3 = result();
  r3.npu.names[1] = 'Module.z.Linear.forward.0';
  r3.npu.names[2] = 'Module.z.Linear.backward.0';
  store.set({ result: r3, classes: classify(r3) });
  got = await mc.resultShown('0:0');
  assert.equal(got.missing, 2);
  assert.equal(store.get().matchMsg.err, true);
});

test('matching blocked: the reason is the preview, in place', () => {
  const { store, mc } = setup();
  store.set({ matchBlocked: 'Manual matching needs the dump folders.' });
  mc.setPicks({ npu: 1, bench: 1 });
  assert.deepEqual(mc.preview(false), { ok: false, text: 'Manual matching needs the dump folders.', ops: [] });
});

test('.vis.config: saved by names, loaded by names', async () => {
  const { store, mc } = setup();
  mc.setPicks({ npu: 3, bench: 3 });
  await mc.match(false);
  const text = mc.configText();
  assert.deepEqual(JSON.parse(text), { 'Module.b.MLP.forward.0': 'Module.y.MLP.forward.0' });
  await mc.undoRedo(false);
  await mc.loadConfig(JSON.parse(text), 'x.vis.config');
  assert.equal(store.get().result.npu.matched[3], 3);
  assert.match(store.get().matchMsg.text, /Applied 1 pair\(s\) from x\.vis\.config; 0 not found/);
});

test('layout: sizes clamp, persist in the storage, and come back; broken storage gives the defaults', () => {
  const mem = new Map();
  const storage = { getItem: (k) => mem.get(k) ?? null, setItem: (k, v) => mem.set(k, v) };
  const store = createStore({ layout: readLayout(storage) });
  assert.deepEqual(store.get().layout, LAYOUT_DEFAULTS);
  const lc = createLayoutController(store, storage);
  lc.set({ detailsH: 5, sidebarW: 300 });
  lc.toggle('minimapOpen');
  assert.equal(store.get().layout.detailsH, 80, 'clamped');
  const again = readLayout(storage);
  assert.equal(again.sidebarW, 300);
  assert.equal(again.minimapOpen, false);
  mem.set(LAYOUT_KEY, '{nope');
  assert.deepEqual(readLayout(storage), LAYOUT_DEFAULTS);
  mem.set(LAYOUT_KEY, JSON.stringify({ split: 'x', outlineW: 1e9 }));
  assert.equal(readLayout(storage).split, 50);
  assert.equal(readLayout(storage).outlineW, 420);
  // The folded load bar is not remembered (it folds after each load); the window decides the defaults.
  mem.set(LAYOUT_KEY, JSON.stringify({ loadOpen: false }));
  assert.equal(readLayout(storage).loadOpen, true);
  assert.equal(defaultsFor(1600, 1000).outlineOpen, false);
  assert.equal(defaultsFor(2560, 1440).outlineOpen, true);
  assert.equal(readLayout({ getItem: () => null }, defaultsFor(1280, 720)).detailsH, 144);
});

test('frameworks: the stacks are recognised from module names and the fitting template offered', () => {
  const llm = ['Module.0.module.module.GPTModel.forward.0', 'Module.0.module.module.decoder.layers.0.TransformerLayer.forward.0'];
  const hf = ['Module.module.Qwen2ForCausalLM.forward.0', 'Module.module.model.layers.0.Qwen2DecoderLayer.forward.0'];
  const mm = ['Module.module.module.image_encoder.VisionModel.forward.0', 'Module.module.module.text_decoder.MMGPTModel.forward.0'];
  const hfvl = ['Module.model.Qwen2_5_VLForConditionalGeneration.forward.0', 'Module.model.visual.blocks.0.Qwen2_5_VLVisionBlock.forward.0'];
  assert.equal(stackOf(llm), 'mindspeed-llm');
  assert.equal(stackOf(hf), 'hf');
  assert.equal(stackOf(mm), 'mindspeed-mm');
  assert.equal(stackOf(hfvl), 'hf-vl');
  assert.equal(stackOf(['Torch.cat.0.forward']), null);
  const all = ['qwen2.5_mindspeed-llm_to_llamafactory.yaml', 'qwen2.5-vl_mindspeed-mm_to_llamafactory.yaml', 'qwen2.5_llamafactory_to_mindspeed-llm.yaml'];
  assert.equal(templateFor(llm, hf, all)?.template, 'qwen2.5_mindspeed-llm_to_llamafactory.yaml');
  assert.equal(templateFor(hf, llm, all)?.template, 'qwen2.5_llamafactory_to_mindspeed-llm.yaml');
  assert.equal(templateFor(mm, hfvl, all)?.template, 'qwen2.5-vl_mindspeed-mm_to_llamafactory.yaml');
  assert.equal(templateFor(hf, hf, all), null, 'the same stack needs no template');
  assert.equal(templateFor(llm, hf, []), null, 'only bundled templates');
});

test('hash: the view state round-trips through the URL hash', () => {
  const h = buildHash({ lang: 'zh', step: '1', rank: '0', micro: 2, sel: { side: 'bench', name: 'Module.a,b.forward.0' }, open: { npu: ['A', 'B'], bench: ['X'] }, all: { bench: true } });
  assert.deepEqual(parseHash(h), { lang: 'zh', step: 1, rank: 0, micro: 2, sel: { side: 'bench', name: 'Module.a,b.forward.0' }, open: { npu: ['A', 'B'], bench: '*' } });
  assert.equal(parseHash(''), null);
  assert.deepEqual(parseHash('#lang=en&step=x&sel=nope:1').step, undefined);
  assert.equal(parseHash('#lang=en&sel=nope:1').sel, undefined);
  const many = Array.from({ length: MAX_OPEN + 1 }, (_, k) => `n${k}`);
  assert.equal(parseHash(buildHash({ lang: 'en', open: { npu: many } })).open.npu, undefined, 'too many names are not written');
  assert.equal(buildHash({ lang: 'en', micro: -1 }), '#lang=en');
});

test('load: slots, where a message belongs, the parallel options as the CLI takes them', () => {
  const alone = { npu: null, bench: { root: 'b' } };
  assert.equal(slotOf('bench', alone), 'npu', 'a lone Bench folder sits in the npu slot');
  assert.equal(sideOfSlot('npu', alone), 'bench');
  assert.equal(slotOf('bench', { npu: { root: 'a' }, bench: { root: 'b' } }), 'bench');
  const src = { npu: { root: 'npu' }, bench: { root: 'bench' } };
  assert.equal(errorPlaceOf('npu/dump.json: line 3, column 1: expected value', src, ['npu', 'bench']), 'npu');
  assert.equal(errorPlaceOf('bench/construct.json: not an object', src, []), 'bench');
  assert.equal(errorPlaceOf('layer_mapping.yaml: line 2: mapping values are not allowed', src, []), 'mapping');
  assert.equal(errorPlaceOf('argument --tp: invalid int value: \'x\'', src, []), 'parallel');
  assert.equal(errorPlaceOf('npu / bench: the two runs have no step in common', src, ['bench']), 'bench');
  assert.equal(errorPlaceOf('something else', src, []), 'load');
  assert.deepEqual(parallelOptionsOf({ rankSize: '', tp: '2', pp: '', vpp: '', order: '' }, true, 0, null), {});
  assert.deepEqual(parallelOptionsOf({ rankSize: '2', tp: '2', pp: '1', vpp: '', order: '' }, true, 0, [0]),
    { rankSize: [2, 2], tp: [2, 2], pp: [1, 1], vpp: [], order: [], mergedRank: 0 });
  assert.deepEqual(parallelOptionsOf({ rankSize: '2 4', tp: '2', pp: '1', vpp: '', order: 'tp-dp-pp' }, false, 3, [0]).rankSize, [2, 4]);
  assert.throws(() => parallelOptionsOf({ rankSize: '2', tp: 'x', pp: '', vpp: '', order: '' }, true, 0, null), /argument --tp: invalid int value: 'x'/);
});

test('.vis.db recompare (tb-graph-ascend\'s maths, msprobe\'s column names and number text)', async () => {
  const { pyFloat, recompareStats } = await import('../../www/visfile.js');
  assert.deepEqual([0, -8.149072527885437e-10, 4.193218475488332e-05, 1e16, 123.5, 1e-4, 2, NaN, -Infinity].map(pyFloat),
    ['0.0', '-8.149072527885437e-10', '4.193218475488332e-05', '1e+16', '123.5', '0.0001', '2.0', 'nan', '-inf']);
  const t = (max, mean, extra = {}) => ({ type: 'torch.Tensor', Max: String(max), Min: '0.0', Mean: String(mean), Norm: '2.0', ...extra });
  const npuIn = { 'A.forward.0.input.0': t(0.5, -0.0019433940760791302, { Result: 'old', 'Max diff': 'old' }) };
  const npuOut = { 'A.forward.0.output.0': t(1.5, 1) };
  const benchIn = { 'B.forward.0.input.0': t(0.5, -0.0019433932611718774) };
  const benchOut = { 'B.forward.0.output.0': t(1.0, 0) };
  const c = recompareStats(npuIn, npuOut, benchIn, benchOut, 'summary');
  const i = c.input['A.forward.0.input.0'];
  assert.equal(i.Result, undefined, 'the old compare fields are replaced');
  assert.equal(i['Max diff'], '0.0');
  assert.equal(i['Mean diff'], '-8.149072527885437e-10');
  assert.equal(i.MeanRelativeErr, '4.193218475488332e-05%', 'as msprobe writes it for this pair');
  const o = c.output['A.forward.0.output.0'];
  assert.equal(o['Max diff'], '0.5');
  assert.equal(o.MaxRelativeErr, '50.0%');
  assert.equal(o['Mean diff'], '1.0');
  assert.equal(o.MeanRelativeErr, '100.0%', 'Bench 0: the difference itself');
  assert.equal(c.precision, 1, 'min(1, the largest relative error of the outputs)');
  assert.equal(npuIn['A.forward.0.input.0'].Result, 'old', 'the input is not changed in place');
  const md5 = recompareStats({ 'a.input.0': { md5: 'x' } }, { 'a.output.0': { md5: 'y' } }, { 'b.input.0': { md5: 'x' } }, { 'b.output.0': { md5: 'y' } }, 'md5');
  assert.equal(md5.precision, 0);
  assert.equal(md5.output['a.output.0'].Result, 'pass');
  assert.equal(recompareStats({ 'a.input.0': { md5: 'x' } }, {}, { 'b.input.0': { md5: 'z' } }, {}, 'md5').precision, 1);
});

test('offer: at once, the gain counted in the background; a newer result drops a pending count; dismissed stays dismissed', async () => {
  const store = createStore({ offer: null });
  const asked = [];
  let release;
  const client = { request: (req) => { asked.push(req); return new Promise((res) => { release = () => res({ npu: 329, bench: 329 }); }); } };
  const oc = createOfferController(store, client, async (name) => `# ${name}`);
  const names = {
    npu: ['Module.0.module.module.GPTModel.forward.0', 'Module.0.module.module.decoder.layers.0.TransformerLayer.forward.0'],
    bench: ['Module.module.Qwen2ForCausalLM.forward.0'],
  };
  const at = { names, unmapped: true, matchedNow: 138, templates: ['qwen2.5_mindspeed-llm_to_llamafactory.yaml'], runOptions: { step: 0, rank: 0, layerMapping: null, fuzzy: false, overflowCheck: false } };
  const pending = oc.consider(at);
  assert.deepEqual(store.get().offer, { template: 'qwen2.5_mindspeed-llm_to_llamafactory.yaml', npu: 'MindSpeed-LLM', bench: 'HF transformers', now: 138, gain: null }, 'the offer does not wait for the count');
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(asked.length, 1);
  assert.equal(asked[0].type, 'probeRun');
  assert.equal(asked[0].options.layerMapping, '# qwen2.5_mindspeed-llm_to_llamafactory.yaml');
  release();
  await pending;
  assert.equal(store.get().offer.gain, 329);
  // A newer action drops the pending count.
  const again = oc.consider(at);
  await new Promise((r) => setTimeout(r, 0));
  oc.cancel();
  release();
  await again;
  assert.equal(store.get().offer.gain, null, 'the dropped count is not shown');
  // A mapped run, the demo (no names) or a dismissed template: no offer.
  await oc.consider({ ...at, unmapped: false });
  assert.equal(store.get().offer, null);
  oc.consider(at);
  oc.dismiss();
  await oc.consider(at);
  assert.equal(store.get().offer, null, 'dismissed');
  // A large pair: offered without the count.
  const big = createOfferController(store, client, async () => '', 2);
  await big.consider(at);
  assert.equal(store.get().offer.gain, -1);
  assert.equal(big.accept(), 'qwen2.5_mindspeed-llm_to_llamafactory.yaml');
  assert.equal(store.get().offer, null);
});
