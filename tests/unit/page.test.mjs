// Unit tests of the page's load, display, selection and tools controllers (www/controllers/) under
// `node --test`, with a real store. The client is a small object that answers the worker requests
// the controllers make the way the worker would for tiny inputs, and records them; the `ui` objects
// record what the controllers ask of the page. The browser tests judge the page itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStore } from '../../www/store.js';
import { CoreError } from '../../www/client.js';
import { NAME_SEP } from '../../www/protocol.js';
import { MANUAL_INITIAL, createManualController } from '../../www/controllers/manual.js';
import {
  createLoadController, LOAD_INITIAL, rankDirsOf, checkFirst, isRankFileError, several, pairKey,
} from '../../www/controllers/load.js';
import {
  createDisplayController, DISPLAY_INITIAL, legendItems, summaryOf, matchCounts, graphOfPane, paneOfGraph, matchBlockedReason, diagnoseBlocked, heatInputs, shownStepRank,
} from '../../www/controllers/display.js';
import { createSelectionController } from '../../www/controllers/selection.js';
import { createToolsController, TOOLS_INITIAL, filterKinds } from '../../www/controllers/tools.js';
import { classify } from '../../www/colors.js';
import { graph } from './graphs.mjs';
import { createHashController, parseHash, viewOf } from '../../www/controllers/hash.js';

// ---------------------------------------------------------------- small graphs (./graphs.mjs)

const ROWS = [
  ['root', -1],
  ['Module.a.Block.forward.0', 0],
  ['Module.a.fc.Linear.forward.0', 1],
  ['Torch.add.0.forward', 1],
  ['Module.b.Block.forward.0', 0],
  ['Torch.cat.0.forward', 4],
];
const COLORS = {
  '#FFFCF3': { value: [0, 0.3], description: 'pass', accuracy_level: 'pass' },
  '#FF0000': { value: [0.3, 1], description: 'error', accuracy_level: 'error' },
};

/** A compare: nodes matched by index except Torch.cat (grey); Torch.add is an error, with an overflow. */
function compareResult() {
  const npu = graph(ROWS);
  const bench = graph(ROWS);
  for (const i of [0, 1, 2, 3, 4]) {
    npu.matched[i] = i;
    bench.matched[i] = i;
    npu.precision[i] = i === 3 ? 0.9 : 0;
  }
  npu.overflow[3] = 'high';
  bench.overflow[3] = 'high';
  bench.overflow[5] = 'high';
  return { graphType: 'compare', task: 'statistics', microSteps: 1, toolTip: null, diagnostics: [], nodeColors: COLORS, npu, bench };
}

function buildResult() {
  return { graphType: 'build', task: 'statistics', microSteps: 1, toolTip: null, diagnostics: [], nodeColors: {}, npu: graph(ROWS), bench: null };
}

/** A run answer as the worker sends it: names joined. */
function packed(r) {
  const pack = (g) => {
    if (!g) return null;
    const { names, ...rest } = g;
    return { ...rest, namesJoined: names.join(NAME_SEP) };
  };
  return { ...r, npu: pack(r.npu), bench: pack(r.bench) };
}

// ---------------------------------------------------------------- load

/** Files of a source: one rank folder per name in `dirs` ('' for the root). */
function files(dirs, size = 100) {
  const out = [];
  for (const d of dirs) for (const f of ['construct.json', 'dump.json', 'stack.json']) out.push({ path: d ? `${d}/${f}` : f, file: null, size });
  return out;
}
const src = (label, dirs, extra = {}) => ({ label, root: label, files: files(dirs), ...extra });

/**
 * A stand-in of the worker for loads: records each request; `layout` lists the rank folders sent;
 * `run` answers a build or compare, or throws what `fail(options)` returns.
 */
function loadClient({ fail = () => null, ranks = [0] } = {}) {
  const calls = [];
  let sessions = 0;
  const sent = { npu: false, bench: false };
  const client = {
    generation: 1,
    calls,
    restarts: 0,
    async start() {},
    async restart() {
      client.restarts++;
      client.generation++;
    },
    async request(req, _transfer, onProgress) {
      calls.push(req);
      switch (req.type) {
        case 'newSession':
          sent.npu = sent.bench = false;
          return { session: ++sessions };
        case 'adoptSide':
          sent[req.side] = true;
          return { adopted: true, suspended: false };
        case 'fileHandles':
          sent[req.side] = true;
          return undefined;
        case 'layout': {
          const l = { kind: ranks.length > 1 ? 'ranks' : 'files', steps: [0], ranks };
          return { npu: sent.npu ? l : null, bench: sent.bench ? l : null };
        }
        case 'run': {
          onProgress?.({ id: 0, type: 'progress', stage: 'Reading NPU files', side: 'npu', path: 'dump.json', done: 50, total: 100 });
          const e = fail(req.options);
          if (e) throw e;
          return packed(sent.bench ? compareResult() : buildResult());
        }
        default:
          return undefined;
      }
    },
  };
  return client;
}

/** A load controller over a real store, with a recording ui. */
function loadSetup(clientOpts) {
  const store = createStore({ ...LOAD_INITIAL, ...DISPLAY_INITIAL, ...MANUAL_INITIAL, kept: new Map(), runKey: '' });
  const client = loadClient(clientOpts);
  const seen = { selectors: [], displayed: [], cards: [], chosen: [], confirms: [], dropDemo: 0, mappings: [], cleared: 0 };
  const choice = { step: 0, rank: 0 };
  const ui = {
    selected: () => ({ ...choice }),
    flags: () => ({ lm: false, mapping: null, fuzzy: false, overflowCheck: false }),
    parallel: () => ({ rankSize: '', tp: '', pp: '', vpp: '', order: '' }),
    selectors: (layout, merge) => seen.selectors.push({ layout, merge: merge ?? null, phase: store.get().phase }),
    choose: (step, rank) => {
      seen.chosen.push([step, rank]);
      Object.assign(choice, { step, rank });
    },
    display: async (result) => {
      seen.displayed.push(result);
      store.set({ result });
    },
    clear: () => seen.cleared++,
    cards: (notes) => seen.cards.push(notes ?? null),
    cardsText: () => {},
    visText: () => {},
    loaded: () => {},
    failed: () => {},
    dropDemoMapping: () => seen.dropDemo++,
    addMapping: (m) => seen.mappings.push(m.key),
    confirm: (text) => {
      seen.confirms.push(text);
      return seen.answer ?? true;
    },
    cancelBackground: () => {},
    stopDiagnosis: () => {},
    matchBlocked: () => {},
    revived: () => {},
  };
  let forgot = 0;
  const host = {
    loadDemo: async () => ({ label: 'demo', npu: { label: 'npu', files: files(['']) }, bench: { label: 'bench', files: files(['']) }, mapping: { name: 'm.yaml', text: 'a: b' } }),
    sqlWasm: async () => new ArrayBuffer(0),
  };
  const ld = createLoadController(store, client, ui, host, { forgetManual: () => forgot++ });
  return { store, client, ui, seen, ld, choice, forgot: () => forgot };
}

const types = (calls) => calls.map((c) => (c.side ? `${c.type}:${c.side}` : c.type));

test('load: rank folders are listed from the paths alone; a single rank folder is checked first, a tree is not', () => {
  assert.deepEqual(rankDirsOf(files(['step0/rank1', 'step0/rank0'])), ['step0/rank0', 'step0/rank1']);
  assert.deepEqual(rankDirsOf(files([''])), ['']);
  assert.deepEqual(rankDirsOf([{ path: 'x/construct.json' }, { path: 'x/dump_tensor_data/a.pt' }]), []);
  assert.equal(checkFirst(files([''])), true);
  assert.equal(checkFirst(files(['rank0', 'rank1'])), false, 'a tree: only the chosen rank is parsed');
  assert.equal(checkFirst(files([''], 300 * 1024 * 1024)), false, 'too big to parse twice');
  assert.equal(several({ npu: { kind: 'ranks', steps: [0], ranks: [0, 1] }, bench: null }), true);
  assert.equal(several({ npu: { kind: 'files', steps: [0], ranks: [0] }, bench: null }), false);
  assert.equal(isRankFileError(Object.assign(new CoreError('npu/rank5/dump.json: line 1: ...', { side: 'npu', path: 'npu/rank5/dump.json' }))), true);
  assert.equal(isRankFileError(new CoreError('the two runs have no step in common')), false);
  assert.equal(isRankFileError(new Error('npu/rank5/dump.json: bad')), false);
});

test('load: a rank folder is sent by handle, checked, laid out and run; the result is shown and the load counted', async () => {
  const { store, client, seen, ld } = loadSetup();
  store.set({ sources: { npu: src('npu', ['']), bench: null } });
  const phases = [];
  store.subscribe(['phase'], (s) => phases.push(s.phase));
  await ld.load(['npu']);
  assert.deepEqual(types(client.calls), ['newSession', 'fileHandles:npu', 'check:npu', 'layout', 'run']);
  const s = store.get();
  assert.equal(s.applied.npu, s.sources.npu);
  assert.equal(s.sessionId, 1);
  assert.equal(s.sessionGen, 1);
  assert.deepEqual([s.phase, s.loads, s.running, s.progress], ['ready', 1, false, null]);
  assert.deepEqual(phases, ['loading', 'ready']);
  assert.equal(seen.displayed.length, 1);
  assert.equal(seen.displayed[0].npu.names[1], 'Module.a.Block.forward.0', 'the names are unpacked');
  assert.equal(seen.displayed[0].graphType, 'build');
});

test('load: a tree of 16 rank folders lists its ranks before any parse and runs only the chosen rank', async () => {
  const ranks = [...Array(16).keys()];
  const { store, client, seen, ld, choice } = loadSetup({ ranks });
  store.set({ sources: { npu: src('npu', ranks.map((r) => `rank${r}`)), bench: null } });
  choice.rank = 5;
  await ld.load(['npu']);
  assert.deepEqual(types(client.calls), ['newSession', 'fileHandles:npu', 'layout', 'run'], 'no check: nothing is parsed before the run');
  assert.deepEqual(seen.selectors[0].layout.npu.ranks, ranks);
  assert.equal(seen.selectors[0].phase, 'loading', 'the selectors are filled while the load runs');
  assert.equal(client.calls.at(-1).options.rank, 5);
  assert.equal(store.get().runOpts.rank, 5);
});

test('load: the Bench folder joins; the NPU side is adopted from the shown session, not sent again', async () => {
  const { store, client, ld } = loadSetup();
  store.set({ sources: { npu: src('npu', ['']), bench: null } });
  await ld.load(['npu']);
  client.calls.length = 0;
  store.set((s) => ({ sources: { ...s.sources, bench: src('bench', ['']) } }));
  await ld.load(['bench']);
  assert.deepEqual(types(client.calls), ['newSession', 'adoptSide:npu', 'fileHandles:bench', 'check:bench', 'layout', 'run']);
  assert.equal(client.calls[1].from, 1, 'adopted from the shown session');
  assert.equal(store.get().result.graphType, 'compare');
  assert.equal(store.get().sessionId, 2);
});

test('load: a broken rank of a tree marks its entry, keeps the tree listed, and another rank then loads', async () => {
  const ranks = [...Array(16).keys()];
  const broken = new CoreError('npu/rank3/dump.json: line 1, column 9: unexpected end of input', { side: 'npu', path: 'npu/rank3/dump.json' });
  const { store, client, seen, ld, choice } = loadSetup({ ranks, fail: (o) => (o.rank === 3 ? broken : null) });
  store.set({ sources: { npu: src('npu', ranks.map((r) => `rank${r}`)), bench: null } });
  choice.rank = 3;
  await ld.load(['npu']);
  let s = store.get();
  assert.equal(s.result, null, 'nothing shown');
  assert.equal(s.errors.npu, broken.message, 'the message on the NPU card');
  assert.deepEqual([...s.rankErrors], [[pairKey(0, 3), broken.message]]);
  assert.equal(seen.selectors.length, 1, 'the tree stays listed (no older layout put back)');
  assert.ok(client.calls.some((c) => c.type === 'discardStaging'));
  assert.deepEqual([s.phase, s.loads], ['empty', 1]);
  // Another rank: the files are sent again (nothing is shown to adopt from) and it loads.
  choice.rank = 7;
  client.calls.length = 0;
  await ld.rerun();
  s = store.get();
  assert.deepEqual(types(client.calls), ['newSession', 'fileHandles:npu', 'layout', 'run']);
  assert.equal(s.result.graphType, 'build');
  assert.equal(s.runOpts.rank, 7);
  assert.equal(s.errors.npu ?? '', '');
  assert.deepEqual([...s.rankErrors], [[pairKey(0, 3), broken.message]], 'rank 3 stays marked');
  // A re-run on the shown session that reaches the broken rank: marked, the selectors back on the shown rank.
  choice.rank = 3;
  await ld.rerun();
  s = store.get();
  assert.equal(client.calls.at(-1).session, 'current');
  assert.equal(s.runOpts.rank, 7, 'rank 7 stays shown');
  assert.deepEqual(seen.chosen.at(-1), [0, 7]);
  assert.equal(s.errors.npu, broken.message);
  // A newly chosen folder starts without the old folder's marks.
  store.set((st) => ({ sources: { ...st.sources, npu: src('npu2', ['rank0', 'rank1']) } }));
  await ld.load(['npu']);
  assert.equal(store.get().rankErrors.size, 0);
});

test('load: a message that is not a rank folder\'s leaves the shown result and its selectors', async () => {
  const { store, seen, ld } = loadSetup({ fail: (o) => (o.fuzzy ? null : new CoreError('npu / bench: the two runs have no step in common')) });
  store.set({ sources: { npu: src('npu', ['']), bench: null }, runLayout: { npu: { kind: 'files', steps: [0], ranks: [0] }, bench: null } });
  await ld.load(['npu']);
  assert.equal(store.get().errors.npu, 'npu / bench: the two runs have no step in common', 'the side chosen in this load');
  assert.equal(store.get().rankErrors.size, 0);
  assert.equal(seen.selectors.at(-1).layout, store.get().runLayout, 'the shown layout is listed again');
  assert.deepEqual(seen.cards.at(-1), { npu: 'not shown: see the error', bench: undefined });
});

test('load: a newer load makes an older one stale; the worker is restarted when one is running', async () => {
  const { store, client, seen, ld } = loadSetup();
  store.set({ sources: { npu: src('npu', ['']), bench: null } });
  const first = ld.load(['npu']);
  const second = ld.load(['npu']);
  await Promise.all([first, second]);
  assert.equal(client.restarts, 1);
  assert.equal(seen.displayed.length, 1, 'only the newer load shows its result');
  assert.equal(store.get().loads, 1);
});

test('load: a folder chosen over the demo replaces it as a whole; the demo\'s mapping leaves', async () => {
  const { store, seen, ld } = loadSetup();
  await ld.loadDemo();
  assert.deepEqual(seen.mappings, ['demo']);
  assert.equal(store.get().result.graphType, 'compare');
  assert.ok(store.get().sources.bench.demo);
  await ld.setSource('npu', src('mine', ['']));
  assert.equal(seen.dropDemo, 1);
  assert.equal(store.get().sources.bench, null, 'the demo\'s other side is cleared');
  assert.equal(store.get().result.graphType, 'build');
  assert.equal(ld.setSource('bench', { label: 'x', root: 'x', files: [] }), null);
  assert.match(store.get().errors.bench, /no msprobe \.json files/);
});

test('load: an action that drops the hand-made pairs asks first, naming how many', () => {
  const { store, seen, ld, forgot } = loadSetup();
  assert.equal(ld.confirmDiscard('Demo'), true);
  assert.equal(seen.confirms.length, 0, 'nothing to lose: no question');
  store.set({ manual: new Map([[1, 1]]), kept: new Map([['0:0', [['a', 'b']]], ['1:0', [['c', 'd'], ['e', 'f']]]]), runKey: '0:0' });
  seen.answer = false;
  assert.equal(ld.confirmDiscard('Demo'), false);
  assert.match(seen.confirms[0], /Demo discards your 3 manual match/);
  assert.equal(forgot(), 0);
  seen.answer = true;
  assert.equal(ld.confirmDiscard('Demo'), true);
  assert.equal(forgot(), 1);
});

test('load: progress of a run shows the side\'s reading with the file\'s bytes', async () => {
  const { store, ld } = loadSetup();
  store.set({ sources: { npu: src('npu', ['']), bench: null } });
  const seen = [];
  store.subscribe(['progress'], (s) => s.progress && seen.push(s.progress));
  await ld.load(['npu']);
  assert.ok(seen.some((p) => p.stage === 'Reading NPU files' && p.done === 50 && p.total === 100), JSON.stringify(seen));
  assert.ok(seen.some((p) => p.stage === 'Checking folder layout'));
});

// ---------------------------------------------------------------- display

function displaySetup(extra = {}) {
  const store = createStore({
    ...LOAD_INITIAL, ...DISPLAY_INITIAL, ...MANUAL_INITIAL, kept: new Map(), runKey: '', matchBlocked: null, resultVersion: 0, ...extra,
  });
  const seen = { render: [], shown: [], manual: [], diag: [] };
  const disp = createDisplayController(store, {
    ui: { render: (r, c, compare) => seen.render.push({ r, compare }), shown: (r) => seen.shown.push(r) },
    manual: { resultShown: async (key) => (seen.manual.push(key), { reapplied: 0, already: 0, missing: 0 }) },
    diagnosis: { resultShown: (key, keep) => seen.diag.push([key, !!keep]) },
    generation: () => 1,
    visPair: () => ({ step: 2, rank: 3 }),
  });
  return { store, disp, seen };
}

test('display: a result gets its classes and tree models, nothing selected; the kept pairs of its step and rank come back', async () => {
  const { store, disp, seen } = displaySetup({ runOpts: { step: 1, rank: 4 }, sessionGen: 1, selection: { side: 'npu', index: 2 } });
  const r = compareResult();
  await disp.show(r);
  const s = store.get();
  assert.equal(s.result, r);
  assert.equal(s.models.npu.n, 6);
  assert.equal(s.models.npu.matchedCount, 5);
  assert.equal(s.selection, null);
  assert.equal(s.buildSide, 'npu');
  assert.deepEqual(s.details, { text: 'Select a node to compare its tensors.' });
  assert.equal(s.matchBlocked, null);
  assert.deepEqual(seen.manual, ['1:4']);
  assert.deepEqual(seen.render.map((x) => x.compare), [true]);
  assert.deepEqual(seen.shown, [r]);
  assert.deepEqual(seen.diag, [['1:4', false]]);
  // Only the step changed: the heatmaps of these inputs stay.
  disp.heatmapsOfShown();
  store.set({ runOpts: { step: 0, rank: 4 } });
  await disp.show(compareResult());
  assert.deepEqual(seen.diag.at(-1), ['0:4', true]);
  store.set({ runOpts: { step: 0, rank: 4, fuzzy: true } });
  await disp.show(compareResult());
  assert.deepEqual(seen.diag.at(-1), ['0:4', false], 'another option: the heatmaps go');
  // An opened msprobe file: its step and rank key the kept pairs.
  store.set({ mode: 'vis' });
  await disp.show(compareResult());
  assert.equal(seen.manual.at(-1), '2:3');
  disp.clear();
  assert.equal(store.get().result, null);
  assert.equal(seen.manual.at(-1), '');
  assert.deepEqual(store.get().details, { text: 'Load a dump folder on each side.' });
});

test('display: a Bench folder alone is built in the npu slot and shown in the Bench pane', async () => {
  const { store, disp } = displaySetup({ applied: { npu: null, bench: src('bench', ['']) } });
  const r = buildResult();
  await disp.show(r);
  assert.equal(store.get().buildSide, 'bench');
  assert.deepEqual(store.get().details, { text: 'Select a node to see its tensors.' });
  assert.equal(graphOfPane(r, 'bench'), 'npu');
  assert.equal(paneOfGraph(r, 'bench'), 'npu');
  assert.equal(graphOfPane(compareResult(), 'bench'), 'bench');
});

test('display: the legend, the summary and the match counts come from the result\'s columns', async () => {
  const { store, disp } = displaySetup();
  const r = compareResult();
  await disp.show(r);
  const c = classify(r);
  const items = legendItems(r, c, true);
  const byCls = Object.fromEntries(items.bins.map((b) => [b.cls, b.count]));
  assert.equal(byCls.pass, 4);
  assert.equal(byCls.error, 1);
  assert.equal(byCls.unmatched, 1);
  assert.deepEqual(items.overflow, [{ level: 'high', npu: 1, bench: 2 }]);
  assert.deepEqual(summaryOf(r, c, store.get().models), { n: 6, nb: 6, mN: 5, mB: 5, errors: 1, warnings: 0 });
  assert.deepEqual(matchCounts(store.get()), { matchedNpu: 5, matchedBench: 5, unmatchedNpu: 1, unmatchedBench: 1 });
  const build = buildResult();
  assert.ok(legendItems(build, classify(build), false).bins.every((b) => b.cls === 'none'));
});

test('display: why matching and the diagnosis cannot work on the shown result', () => {
  const base = { result: compareResult(), mode: 'dump', vis: null, sessionGen: 1 };
  assert.equal(matchBlockedReason(/** @type {any} */ (base), 1, (k) => k), null);
  assert.match(matchBlockedReason(/** @type {any} */ (base), 2, (k) => k), /core was restarted/);
  assert.equal(matchBlockedReason(/** @type {any} */ ({ ...base, mode: 'vis', vis: { whyNotMatch: 'legacy' } }), 1, (k) => k), 'legacy');
  assert.equal(matchBlockedReason(/** @type {any} */ ({ ...base, result: buildResult() }), 2, (k) => k), null);
  assert.equal(diagnoseBlocked(/** @type {any} */ (base), 1, (k) => k), '');
  assert.match(diagnoseBlocked(/** @type {any} */ ({ ...base, result: buildResult() }), 1, (k) => k), /compare result/);
  assert.match(diagnoseBlocked(/** @type {any} */ ({ ...base, mode: 'vis' }), 1, (k) => k), /dump folders/);
  assert.deepEqual(shownStepRank({ runOpts: /** @type {any} */ ({ step: 2, rank: 1, mergedRank: 4 }) }), { step: 2, rank: 4 });
  const a = { npu: {}, bench: {} };
  assert.deepEqual(heatInputs({ applied: /** @type {any} */ (a), runOpts: /** @type {any} */ ({ step: 1, rank: 2, fuzzy: true }) }), { npu: a.npu, bench: a.bench, opts: '{"fuzzy":true}' });
});

// ---------------------------------------------------------------- selection

async function selectionSetup(r = compareResult(), generation = 1) {
  const { store, disp } = displaySetup({ sessionGen: 1 });
  await disp.show(r);
  const requests = [];
  const client = {
    generation,
    async request(req) {
      requests.push(req);
      return { npu: { name: r.npu.names[req.index] }, bench: null };
    },
  };
  const seen = { refresh: [], selected: [], peer: [], reveal: [], fit: [], micro: [], view: 0 };
  let sync = true;
  const mc = createManualController(store, client);
  const sel = createSelectionController(store, client, {
    manual: mc,
    ui: {
      refresh: (pane) => seen.refresh.push(pane),
      showSelected: (pane, i, from) => seen.selected.push([pane, i, from]),
      showPeer: (pane, peer) => seen.peer.push([pane, peer]),
      reveal: (pane, i) => seen.reveal.push([pane, i]),
      fit: (pane) => seen.fit.push(pane),
      microShown: (k, changed) => seen.micro.push([k, changed]),
      sync: () => sync,
      viewChanged: () => seen.view++,
    },
  });
  return { store, sel, seen, requests, setSync: (v) => (sync = v) };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test('selection: a node is selected, its ancestors open, its counterpart is shown, its details read', async () => {
  const { store, sel, seen, requests } = await selectionSetup();
  sel.select('npu', 2, 'canvas');
  const s = store.get();
  assert.deepEqual(s.selection, { side: 'npu', index: 2 });
  assert.equal(s.models.npu.expanded[1], 1, 'the parent opened');
  assert.equal(s.models.bench.expanded[1], 1, 'the counterpart\'s parent opened');
  assert.deepEqual(s.pick, { npu: 2, bench: 2 }, 'the pick follows (a matched node brings its counterpart)');
  assert.deepEqual(seen.selected, [['npu', 2, 'canvas']]);
  assert.deepEqual(seen.peer, [['bench', 2]]);
  assert.deepEqual(seen.refresh, ['npu', 'bench']);
  assert.equal(seen.view, 1);
  await tick();
  assert.deepEqual(requests, [{ type: 'nodePair', side: 'npu', index: 2 }]);
  assert.deepEqual(store.get().details, { pair: { npu: { name: ROWS[2][0] }, bench: null }, side: 'npu', toolTip: null, build: null });
  // A grey node: no counterpart shown.
  sel.select('npu', 5, 'api');
  assert.deepEqual(seen.peer.at(-1), ['bench', -1]);
  // Ctrl-click only picks.
  sel.select('bench', 3, 'canvas', { ctrlKey: true });
  assert.deepEqual(store.get().selection, { side: 'npu', index: 5 });
  assert.equal(store.get().pick.bench, 3);
  // Out of range: nothing.
  sel.select('npu', 99, 'api');
  assert.deepEqual(store.get().selection, { side: 'npu', index: 5 });
});

test('selection: the details of a session lost to a restart ask for the folders; a build names its side', async () => {
  let { store, sel } = await selectionSetup(compareResult(), 2);
  sel.select('npu', 1, 'api');
  await tick();
  assert.match(store.get().details.text, /core was restarted/);
  ({ store, sel } = await selectionSetup(buildResult()));
  sel.select('npu', 1, 'api');
  await tick();
  assert.equal(store.get().details.build, 'NPU');
});

test('selection: expanding follows in the other pane with sync expand, not without; the root stays open', async () => {
  const { store, sel, setSync } = await selectionSetup();
  sel.toggle('npu', 1);
  assert.equal(store.get().models.npu.expanded[1], 1);
  assert.equal(store.get().models.bench.expanded[1], 1);
  sel.toggle('npu', 1, false);
  assert.equal(store.get().models.bench.expanded[1], 0);
  setSync(false);
  sel.toggle('npu', 4, true);
  assert.equal(store.get().models.bench.expanded[4], 0);
  sel.toggle('npu', 0, false);
  assert.equal(store.get().models.npu.expanded[0], 1);
  setSync(true);
  sel.expandAll('bench', true);
  assert.ok([1, 4].every((i) => store.get().models.npu.expanded[i] === 1 && store.get().models.bench.expanded[i] === 1));
  sel.expandAll('npu', false);
  assert.ok([1, 4].every((i) => store.get().models.bench.expanded[i] === 0));
});

test('selection: revealing opens the ancestors without selecting; a micro step shows only its root children', async () => {
  const r = compareResult();
  r.microSteps = 2;
  r.npu.microStep = Int32Array.from([0, 0, 0, 0, 1, 1]);
  const { store, sel, seen } = await selectionSetup(r);
  sel.revealNode('bench', 5);
  assert.equal(store.get().models.bench.expanded[4], 1);
  assert.equal(store.get().selection, null);
  assert.deepEqual(seen.reveal, [['bench', 5]]);
  assert.equal(sel.setMicroStep(0), true);
  assert.equal(store.get().models.npu.inStep(4), false);
  assert.deepEqual(seen.micro.at(-1), [0, true]);
  // Selecting a node of another micro step shows them all again.
  sel.select('npu', 5, 'api');
  assert.equal(store.get().models.npu.micro, -1);
});

// ---------------------------------------------------------------- tools

async function toolsSetup(r = compareResult(), extra = {}) {
  const { store, disp } = displaySetup({ ...TOOLS_INITIAL, ...extra });
  await disp.show(r);
  const requests = [];
  const client = {
    async request(req) {
      requests.push(req);
      if (req.type === 'exportCsv') return { csv: 'a,b\n', rows: 1 };
      if (req.type === 'exportVis') return { bytes: new ArrayBuffer(3) };
      throw new Error('unexpected');
    },
  };
  return { store, tools: createToolsController(store, client), requests };
}

test('tools: search by substring or expression in the shown micro step; an invalid expression says why, once', async () => {
  const { store, tools } = await toolsSetup();
  assert.deepEqual([...tools.search('npu', 'BLOCK', false).hits], [1, 4]);
  assert.deepEqual([...tools.search('npu', '^torch\\.(add|cat)', true).hits], [3, 5]);
  const bad = tools.search('npu', '(', true);
  assert.equal(bad.hits.length, 0);
  assert.match(bad.error, /^Invalid regular expression: /);
  assert.equal(bad.error.match(/Invalid regular expression/g).length, 1);
  store.get().models.npu.setMicroStep(0);
  store.get().models.npu.g.microStep[4] = 1;
  store.get().models.npu.setMicroStep(-1);
  store.get().models.npu.setMicroStep(0);
  assert.deepEqual([...tools.search('npu', 'block', false).hits], [1]);
});

test('tools: the filter choices with their counts, and the nodes each keeps', async () => {
  const { store, tools } = await toolsSetup();
  const kinds = tools.filterKinds('npu');
  const count = Object.fromEntries(kinds.map((k) => [k.value, k.count]));
  const bins = store.get().classes.bins;
  const k = (cls) => bins.findIndex((b) => b.cls === cls);
  assert.equal(count[`cls:${k('pass')}`], 4);
  assert.equal(count[`cls:${k('error')}`], 1);
  assert.equal(count.unmatched, 1);
  assert.equal(count.matched, 5);
  assert.equal(count['overflow:high'], 1);
  assert.deepEqual([...tools.filter('npu', 'unmatched')], [5]);
  assert.deepEqual([...tools.filter('bench', 'overflow:high')], [3, 5]);
  assert.deepEqual([...tools.filter('npu', '')], []);
  const b = await toolsSetup(buildResult());
  assert.deepEqual(filterKinds(b.store.get(), 'npu', (x) => x), [], 'a build without overflow has no filter');
});

test('tools: names index per result; the hand-made pairs in order; exports and .vis.config', async () => {
  const { store, tools, requests } = await toolsSetup(compareResult(), { vis: null });
  const idx = tools.nameIndex();
  assert.equal(idx.bench.get('Torch.cat.0.forward'), 5);
  assert.equal(tools.nameIndex(), idx, 'built once per result');
  store.set({ manual: new Map([[4, 4], [1, 1]]) });
  assert.deepEqual([...tools.pairItems()], [1, 4]);
  assert.equal(await tools.compareCsv(), 'a,b\n');
  assert.deepEqual(store.get().exportMsg, { text: '1 compared tensors exported.', err: false });
  assert.equal(await tools.visDb(), null, 'not a .vis.db');
  store.set({ mode: 'vis', vis: /** @type {any} */ ({ kind: 'db', name: 'compare_1.vis.db.gz' }) });
  assert.deepEqual(await tools.visDb(), { bytes: new ArrayBuffer(3), name: 'compare_1.matched.vis.db' });
  assert.deepEqual(requests.map((r) => r.type), ['exportCsv', 'exportVis']);
  assert.deepEqual(tools.parseConfig('{"a": "b"}', 'x.vis.config'), { pairs: { a: 'b' } });
  assert.match(tools.parseConfig('{', 'x.vis.config').error, /^x\.vis\.config: not a JSON file/);
  const b = await toolsSetup(buildResult());
  assert.equal(await b.tools.compareCsv(), null);
  assert.deepEqual(b.store.get().exportMsg, { text: 'The compare table needs a compare result (two sides).', err: true });
});

// ---------------------------------------------------------------- URL hash

test('hash: the view is written after changes settle; a view from the URL switches rank first, then opens and selects', async () => {
  const { store, disp } = displaySetup();
  await disp.show(compareResult());
  const timers = [];
  const seen = { written: [], chosen: [], reruns: 0, selected: [], refreshed: [] };
  const listed = { step: '0', rank: '0' };
  const hash = createHashController(store, {
    lang: () => 'en',
    chosen: () => ({ ...listed }),
    choose: (key, want) => {
      if (listed[key] === String(want) || want > 3) return false;
      listed[key] = String(want);
      seen.chosen.push([key, want]);
      return true;
    },
    rerun: () => seen.reruns++,
    replace: (h) => seen.written.push(h),
    setMicroStep: () => {},
    refresh: (side) => seen.refreshed.push(side),
    select: (side, i) => {
      seen.selected.push([side, i]);
      store.set({ selection: { side, index: i } });
    },
    nameIndex: () => ({ npu: new Map(ROWS.map(([n], i) => [n, i])), bench: new Map(ROWS.map(([n], i) => [n, i])) }),
    later: (fn) => timers.push(fn),
    cancel: () => timers.splice(0),
  });
  const flush = () => timers.splice(0).forEach((f) => f());
  hash.write();
  hash.write();
  assert.equal(timers.length, 1, 'debounced');
  flush();
  assert.deepEqual(seen.written, ['#lang=en&step=0&rank=0']);
  // A link: rank 2, Module.a open, Torch.add selected on the Bench side.
  const h = parseHash('#lang=en&rank=2&on=Module.a.Block.forward.0&sel=bench:Torch.add.0.forward');
  hash.setPending(h);
  hash.apply();
  assert.deepEqual(seen.chosen, [['rank', 2]]);
  flush();
  assert.equal(seen.reruns, 1, 'the other rank is run first');
  assert.deepEqual(seen.selected, []);
  await disp.show(compareResult()); // the re-run's result
  hash.apply();
  assert.deepEqual(seen.selected, [['bench', 3]]);
  assert.equal(store.get().models.npu.expanded[1], 1);
  flush();
  assert.equal(seen.written.at(-1), '#lang=en&step=0&rank=2&sel=bench%3ATorch.add.0.forward&on=Module.a.Block.forward.0');
  assert.deepEqual(viewOf({ result: null, models: { npu: null, bench: null }, selection: null }, 'zh', {}), { lang: 'zh', open: {}, all: {} });
});
