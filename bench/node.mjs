#!/usr/bin/env node
// WASM-under-Node part of `npm run bench` (issue #7: "the same pipeline in WASM under Node"):
//   node bench/node.mjs NPU_DIR BENCH_DIR MAPPING
// Loads the page's own core (www/pkg, `npm run build:wasm` first) into Node with `initSync`, registers
// the two folders' files the way the page's worker does (every rank folder's JSON files as lazy files
// read through the session's reader, here `fs.readSync`: dump.json in slices, construct.json and
// stack.json whole while their folder is parsed), and
// times, as medians of BENCH_RUNS fresh sessions: the NPU side's parse (`check`), the Bench side's
// parse, the `run` (graphs, layer mapping, match, compare, the answer's JSON without the graphs'
// columns), and the answer's decoding as the worker does it (`JSON.parse` of the answer, `columns`
// per side, www/columns.js's `decodeColumns`); the wasm memory after the run. One thread, as in the
// page's worker. Then, in a child process (a fresh wasm instance: the memory never shrinks), the
// page's own order of loads (`--page-flow`): the demo pair compared, the NPU folder alone (a build),
// then the Bench folder in a session that adopts the NPU side from it (the build's graph freed,
// as the worker's adoptSide does), compared; the wasm memory after that compare is what the page
// shows (headless Chromium's figure, bench/browser.mjs, follows it within a MB or two).
// Prints Markdown on stdout. Not a test.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pageFlow = process.argv[2] === '--page-flow';
const [npuDir, benchDir, mappingPath] = process.argv.slice(pageFlow ? 3 : 2);
if (!npuDir || !benchDir || !mappingPath) {
  console.error('usage: node bench/node.mjs NPU_DIR BENCH_DIR MAPPING');
  process.exit(2);
}
const runs = Number(process.env.BENCH_RUNS ?? 3);
const pkg = process.env.BENCH_PKG ?? path.join(ROOT, 'www', 'pkg');
if (!fs.existsSync(path.join(pkg, 'probelens_bg.wasm'))) {
  console.error('bench/node.mjs: www/pkg/probelens_bg.wasm is missing: run `npm run build:wasm`');
  process.exit(2);
}
const { initSync, Session } = await import(path.join(pkg, 'probelens.js'));
const { decodeColumns } = await import(path.join(ROOT, 'www', 'columns.js'));
const exp = initSync({ module: fs.readFileSync(path.join(pkg, 'probelens_bg.wasm')) });
const memory = /** @type {WebAssembly.Memory} */ (exp.memory);

/** Every file under `dir`, as paths relative to it. */
const listFiles = (dir) => fs.readdirSync(dir, { recursive: true })
  .map(String)
  .filter((f) => fs.statSync(path.join(dir, f)).isFile());
const sides = { npu: npuDir, bench: benchDir };
const inputBytes = Object.values(sides)
  .flatMap((d) => listFiles(d).map((f) => fs.statSync(path.join(d, f)).size))
  .reduce((a, b) => a + b, 0);
const mapping = fs.readFileSync(mappingPath, 'utf8');

/**
 * A session reading the folders of `sides`, those of `register` (default: all) registered as the
 * worker registers them (a side adopted from another session is not registered again).
 */
function session(sides, register = Object.keys(sides)) {
  const s = new Session();
  const fds = new Map();
  s.setFileReader((side, rel, offset, length) => {
    const file = path.join(sides[side], rel);
    let fd = fds.get(file);
    if (fd === undefined) fds.set(file, (fd = fs.openSync(file, 'r')));
    const size = fs.fstatSync(fd).size;
    const start = offset ?? 0;
    const end = offset === undefined ? size : Math.min(size, start + (length ?? size - start));
    const buf = new Uint8Array(end - start);
    let got = 0;
    while (got < buf.length) got += fs.readSync(fd, buf, got, buf.length - got, start + got);
    return buf;
  });
  for (const [side, dir] of Object.entries(sides).filter(([side]) => register.includes(side))) {
    s.setRootName(side, path.basename(dir));
    for (const rel of listFiles(dir)) {
      const file = path.join(dir, rel);
      // As the worker: a rank folder's JSON files (and tensors) stay outside, the rest is copied in.
      if (/(^|\/)(dump|construct|stack)\.json$/.test(rel) || rel.includes('dump_tensor_data')) s.addLazyFile(side, rel, fs.statSync(file).size);
      else s.addFile(side, rel, fs.readFileSync(file));
    }
  }
  return { s, close: () => fds.forEach((fd) => fs.closeSync(fd)) };
}

/** Runs a session's first pair with the mapping; its answer's text. */
function runFirst(s) {
  const layout = JSON.parse(s.layout());
  const opts = { step: layout.npu.steps[0], rank: layout.npu.ranks[0], layerMapping: mapping, layerMappingName: path.basename(mappingPath) };
  return s.run(JSON.stringify(opts));
}

/** As the worker after a run: the answer, then each side's columns. */
function answerOf(s, text) {
  const answer = JSON.parse(text);
  const npuCols = s.columns('npu');
  const benchCols = answer.bench ? s.columns('bench') : null;
  return { answer, npuCols, benchCols };
}

if (pageFlow) {
  // As the page: the demo pair (the Qwen2.5 fixture) compared, then the NPU folder alone, then the
  // Bench folder in a new session adopting the NPU side (the worker frees the demo after the
  // build's answer, and the build's graph when the next session adopts from it).
  // The demo is this fixture with its own layer_mapping.yaml (the scale pair's mapping, too).
  const demoDir = path.join(ROOT, 'tests', 'fixtures', 'qwen_mix_statistics');
  const demo = session({ npu: path.join(demoDir, 'npu'), bench: path.join(demoDir, 'bench') });
  demo.s.check('npu');
  demo.s.check('bench');
  answerOf(demo.s, runFirst(demo.s));
  const built = session({ npu: npuDir });
  built.s.check('npu');
  answerOf(built.s, runFirst(built.s));
  demo.s.free();
  demo.close();
  const afterBuild = memory.buffer.byteLength;
  const next = session(sides, ['bench']);
  next.s.adoptSide(built.s, 'npu');
  if (!built.s.suspend()) throw new Error('the build view did not free its graph (suspend)');
  next.s.check('bench');
  if (next.s.parsedRanks() !== 1) throw new Error(`the adopting session parsed ${next.s.parsedRanks()} rank folders, not only the Bench one`);
  answerOf(next.s, runFirst(next.s));
  const afterCompare = memory.buffer.byteLength;
  built.s.free();
  built.close();
  next.s.free();
  next.close();
  process.stdout.write(JSON.stringify({ afterBuild, afterCompare, inputBytes }));
  process.exit(0);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const samples = [];
let nodes = 0;
let matched = 0;
for (let k = 0; k < runs; k++) {
  const { s, close } = session(sides);
  // The heap's live bytes at the peak of each phase and after it (Session.heapStats), beside the
  // memory's size: what is data and what is holes of a heap that never shrinks.
  const heap = {};
  const phase = (name) => {
    const [live, peak] = Session.heapStats();
    heap[`${name}Peak`] = peak;
    heap[`${name}Live`] = live;
    Session.resetHeapPeak();
  };
  phase('files');
  const t0 = performance.now();
  s.check('npu');
  phase('npu');
  const t1 = performance.now();
  s.check('bench');
  phase('bench');
  const t2 = performance.now();
  const text = runFirst(s);
  phase('run');
  const t3 = performance.now();
  // As the worker: the answer, then each side's columns, decoded.
  const { answer, npuCols, benchCols } = answerOf(s, text);
  const npu = decodeColumns(npuCols, answer.npu.nodes).graph;
  if (benchCols) decodeColumns(benchCols, answer.bench.nodes);
  const t4 = performance.now();
  nodes = npu.parent.length;
  matched = npu.matched.filter((m) => m >= 0).length;
  const columnBytes = npuCols.byteLength + (benchCols?.byteLength ?? 0);
  samples.push({ npu: t1 - t0, bench: t2 - t1, run: t3 - t2, answer: t4 - t3, total: t4 - t0, answerBytes: text.length, columnBytes, wasm: memory.buffer.byteLength, ...heap });
  s.free();
  close();
}
const col = (k) => median(samples.map((x) => x[k]));
const all = (k, f) => samples.map((x) => f(x[k])).join(', ');
const sec = (ms) => `${(ms / 1000).toFixed(2)} s`;
const sec3 = (ms) => `${(ms / 1000).toFixed(3)} s`;
const mb = (b) => `${(b / 1e6).toFixed(0)} MB`;
const kb = (b) => `${(b / 1e3).toFixed(0)} kB`;
console.log(`WASM under Node ${process.version} (the page's core, www/pkg, one thread), median of ${runs} fresh session(s); input ${mb(inputBytes)}, NPU graph ${nodes} nodes, ${matched} matched.`);
console.log('');
console.log('| measure | median | runs |');
console.log('| --- | --- | --- |');
console.log(`| end to end (both parses + run + the answer's decoding) | ${sec(col('total'))} | ${all('total', sec)} |`);
console.log(`| parse NPU folder (\`check\`) | ${sec(col('npu'))} | ${all('npu', sec)} |`);
console.log(`| parse Bench folder (\`check\`) | ${sec(col('bench'))} | ${all('bench', sec)} |`);
console.log(`| \`run\`: graphs, layer mapping, match, compare, answer JSON (no columns) | ${sec(col('run'))} | ${all('run', sec)} |`);
console.log(`| the answer's decoding: JSON.parse (${kb(col('answerBytes'))}) + \`columns\` (${mb(col('columnBytes'))}) + decodeColumns, both sides | ${sec3(col('answer'))} | ${all('answer', sec3)} |`);
console.log(`| wasm memory after the run | ${mb(col('wasm'))} (${(col('wasm') / inputBytes).toFixed(2)}x input) | ${all('wasm', mb)} |`);
const phases = ['npu', 'bench', 'run'];
const trio = (suffix) => phases.map((p) => mb(col(p + suffix))).join(' / ');
console.log(`| heap live at the peak of NPU \`check\` / Bench \`check\` / \`run\` (${mb(col('filesLive'))} before the first) | ${trio('Peak')} | |`);
console.log(`| heap live after each (the rest of the memory is free space of a heap that never shrinks) | ${trio('Live')} | |`);

// The page's order of loads, in a fresh process (see the header).
const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--page-flow', npuDir, benchDir, mappingPath], { encoding: 'utf8', env: process.env });
/** @type {{afterBuild: number, afterCompare: number} | null} */
let flow = null;
try {
  if (child.status === 0) flow = JSON.parse(child.stdout);
} catch {
  flow = null;
}
if (flow) {
  console.log(`| the page's order of loads (demo, NPU folder alone, then the Bench folder adopting it; fresh instance, once): wasm memory after the NPU build / after the compare | ${mb(flow.afterBuild)} / ${mb(flow.afterCompare)} (${(flow.afterCompare / inputBytes).toFixed(2)}x input) | |`);
} else {
  console.error(child.stderr || child.stdout);
  console.log(`| the page's order of loads | failed (exit ${child.status}) | |`);
}
