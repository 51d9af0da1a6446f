// The bad-input corpus (tests/bad_inputs/<case>/, the same cases tests/it/bad_inputs.rs runs on the
// CLI) in the page, through its real inputs: the folder pickers (#npu-dir, #bench-dir) and the
// mapping file input (#mapping-file).
//
// Every case starts from a page with a valid result (the bundled demo, re-run without its mapping,
// as the CLI runs without -lm), then chooses the case's npu/ folder (which replaces the demo as a
// whole: alone, a build graph), its bench/ folder if it has one and, last, its layer_mapping.yaml. `materialize.txt` cases are
// made in a temp copy as the Rust test makes them (the 10,000-deep construct.json chains; the sparse
// 4 GiB dump.json, one byte over the limit, which the page refuses from its size before reading it).
//
// How the page's text relates to the CLI's line (`expected.txt`):
// - error cases: the CLI prints `probelens: error: <expected>`; the page shows exactly `<expected>`
//   (the folder names are the chosen folders' names, `npu`/`bench`, as the CLI's paths relative to
//   the case) in one card: `#npu-error` or `#bench-error` when the message names one side's file
//   (starts with `npu/` or `bench/`), `#mapping-error` when it names layer_mapping.yaml, and, for a
//   message about both sides (`npu / bench: ...`, `npu/dump.json / bench/dump.json: ...`), the card
//   of the side chosen last (`#bench-error`). Every other error element stays hidden. The result on
//   screen before the failing choice is unchanged, still drawn, and a node's details still open.
// - `warning: ...`/`info: ...` cases: the CLI prints `probelens: <expected>`; the result renders, the
//   diagnostics list holds exactly one entry of that severity, whose text is exactly `<expected>`,
//   the same text is the only note on the card it concerns (`#npu-warn`/`#bench-warn` when it names a
//   side's file, `#mapping-warn` when it is about the layer mapping), and no error element is visible.
// - `ok`: the result renders, no warning/error diagnostic or card note, no error element visible.
// Result cases with msprobe.vis.db.gz also show msprobe's node names and match counts per side.
// Every case: no console error, no page error, no request outside the site, at most CASE_TIMEOUT.
//
// The whole corpus runs on the served site; a representative subset (FILE_CASES: one case of each
// kind of outcome and place) runs on the single file over file:// too. About 3-4 s per case, so
// about 3 minutes in all on a busy 2-core machine.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import initSqlJs from 'sql.js';
import {
  ROOT, OUT, SINGLE_URL, requireBuild, launch, startServer, openPage, servedAllowlist, fileAllowlist, loads, waitLoad,
  resultSummary,
} from './helpers.mjs';

const CORPUS = path.join(ROOT, 'tests', 'bad_inputs');
/** Per case, from opening the page to the last assertion. */
const CASE_TIMEOUT = 60000;
const FILE_CASES = [
  'dump_truncated_mid_number', 'tasks_statistics_vs_md5', 'yaml_bad_indent', 'item_type_not_string', 'file_over_4gib',
  'valid_base',
];

/** Case folders, sorted (the discovery of tests/it/bad_inputs.rs). */
function cases() {
  return fs.readdirSync(CORPUS, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

/**
 * The folder to load for a case: the case itself, or a temp copy with the files of materialize.txt
 * made as tests/it/bad_inputs.rs makes them. The copy keeps the case's name and its npu/bench names.
 * @param {string} name @param {string} tmp
 */
function materialize(name, tmp) {
  const src = path.join(CORPUS, name);
  const specFile = path.join(src, 'materialize.txt');
  if (!fs.existsSync(specFile)) return src;
  const dir = path.join(tmp, name);
  fs.cpSync(src, dir, { recursive: true });
  for (const line of fs.readFileSync(specFile, 'utf8').split('\n')) {
    const parts = line.trim().split(/\s+/).filter(Boolean);
    if (!parts.length) continue;
    const [kind, rel, n] = parts;
    const p = path.join(dir, rel);
    if (kind === 'sparse') {
      const fd = fs.openSync(p, 'w');
      fs.ftruncateSync(fd, Number(n));
      fs.closeSync(fd);
    } else if (kind === 'chain') {
      const depth = Number(n);
      const lines = ['{'];
      for (let i = 0; i < depth; i++) {
        const parent = i === 0 ? 'null' : `"Module.m${i - 1}.M.forward.0"`;
        lines.push(` "Module.m${i}.M.forward.0": ${parent}${i + 1 < depth ? ',' : ''}`);
      }
      fs.writeFileSync(p, `${lines.join('\n')}\n}`);
    } else {
      throw new Error(`${name}: bad materialize line ${line}`);
    }
  }
  return dir;
}

/** @param {string} name */
function expectedOf(name) {
  const text = fs.readFileSync(path.join(CORPUS, name, 'expected.txt'), 'utf8').replace(/\n$/, '');
  assert.ok(!text.includes('\n'), `${name}: expected.txt must be one line`);
  return text;
}

/** The error card a CLI error line belongs to on the page (see the header). @param {string} line */
function cardOf(line) {
  const head = line.slice(0, line.indexOf(': '));
  if (/(^|\/)layer_mapping\.ya?ml$/.test(head)) return 'mapping';
  const npu = /^npu(\/|$)/.test(head);
  const bench = /(^|\/ )bench(\/|$)/.test(head);
  if (npu && bench) return 'bench';
  if (npu) return 'npu';
  if (bench) return 'bench';
  throw new Error(`no card for ${line}`);
}

/** The names of the entries under `data` of every dump.json below a dump root (none without `data`). @param {string} root */
function dumpedNames(root) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(d, e.name));
      else if (e.name === 'dump.json') out.push(...Object.keys(JSON.parse(fs.readFileSync(path.join(d, e.name), 'utf8')).data ?? {}));
    }
  };
  walk(root);
  return out;
}

/** Node names and match counts per side of msprobe's db of a case. */
let SQL = null;
async function msprobeGraphs(name) {
  SQL ??= await initSqlJs();
  const db = new SQL.Database(zlib.gunzipSync(fs.readFileSync(path.join(CORPUS, name, 'msprobe.vis.db.gz'))));
  try {
    const out = {};
    for (const [side, src] of [['npu', 'NPU'], ['bench', 'Bench']]) {
      const r = db.exec("SELECT node_name, matched_node_link FROM tb_nodes WHERE data_source = ? ORDER BY node_name", [src]);
      const rows = r.length ? r[0].values : [];
      out[side] = { names: rows.map((x) => x[0]), matched: rows.filter((x) => x[1] && x[1] !== '[]').length };
    }
    return out;
  } finally {
    db.close();
  }
}

const ERROR_CARDS = ['npu', 'bench', 'mapping', 'load', 'vis'];
const NOTE_CARDS = ['npu', 'bench', 'mapping'];

/** The card a diagnostic line belongs to on the page (see the header). @param {string} line */
function noteCardOf(line) {
  const text = line.slice(line.indexOf(': ') + 2);
  if (/^npu\//.test(text)) return 'npu';
  if (/^bench\//.test(text)) return 'bench';
  if (/^the layer mapping\b/.test(text)) return 'mapping';
  throw new Error(`no card for ${line}`);
}

/** Visible notes on the cards. @param {import('playwright-core').Page} page */
async function shownNotes(page) {
  return page.evaluate((ids) => {
    const out = {};
    for (const id of ids) {
      const el = document.getElementById(`${id}-warn`);
      if (el && !el.hidden) out[id] = el.textContent;
    }
    return out;
  }, NOTE_CARDS);
}

/** Visible error elements and their texts. @param {import('playwright-core').Page} page */
async function shownErrors(page) {
  return page.evaluate((ids) => {
    const out = {};
    for (const id of ids) {
      const el = document.getElementById(`${id}-error`);
      if (el && !el.hidden) out[id] = el.textContent;
    }
    return out;
  }, ERROR_CARDS);
}

/**
 * Opens the page (its demo loads), re-runs the demo without a mapping, then loads the case's folders
 * and yaml through the page's inputs. Returns the state before the last choice.
 * @param {import('playwright-core').Page} page @param {string} url @param {string} dir
 */
async function loadCase(page, url, dir) {
  await page.goto(url);
  assert.equal(await waitLoad(page, 0, CASE_TIMEOUT), 'ready', 'the demo is loaded first');
  let n = await loads(page);
  await page.uncheck('#opt-lm');
  assert.equal(await waitLoad(page, n, CASE_TIMEOUT), 'ready');
  // The NPU folder replaces the demo (its Bench side is cleared): without a Bench folder it stays alone.
  /** @type {(() => Promise<void>)[]} */
  const steps = [() => page.setInputFiles('#npu-dir', path.join(dir, 'npu'))];
  if (fs.existsSync(path.join(dir, 'bench'))) steps.push(() => page.setInputFiles('#bench-dir', path.join(dir, 'bench')));
  const yaml = path.join(dir, 'layer_mapping.yaml');
  if (fs.existsSync(yaml)) steps.push(() => page.setInputFiles('#mapping-file', yaml));
  let before = null;
  for (let k = 0; k < steps.length; k++) {
    if (k === steps.length - 1) before = await resultSummary(page);
    n = await loads(page);
    await steps[k]();
    await waitLoad(page, n, CASE_TIMEOUT);
  }
  return before;
}

/**
 * Runs one case and asserts what the page shows.
 * @param {import('playwright-core').Browser} browser @param {string} url @param {(u: string) => boolean} allowed
 * @param {string} name @param {string} tmp @param {string} tag
 */
async function runCase(browser, url, allowed, name, tmp, tag) {
  const expected = expectedOf(name);
  const dir = materialize(name, tmp);
  const { page, assertClean, context } = await openPage(browser, allowed);
  try {
    const before = await loadCase(page, url, dir);
    const isResult = expected === 'ok' || /^(warning|info): /.test(expected);
    const errors = await shownErrors(page);
    if (!isResult) {
      const card = cardOf(expected);
      assert.deepEqual(errors, { [card]: expected }, `${name}: the message, exactly, on the ${card} card only`);
      // The previous result is still on screen and usable.
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready');
      assert.deepEqual(await resultSummary(page), before, `${name}: the previous result is kept`);
      const shown = await page.evaluate(() => {
        const r = window.__probelens.lastResult;
        const v = window.__probelens.views.npu;
        return { outline: Number(document.getElementById('npu-outline').dataset.nodeCount), nodes: r.npu.names.length, drawn: v.stats?.drawn ?? -1 };
      });
      assert.equal(shown.outline, shown.nodes, `${name}: the outline shows the previous graph`);
      assert.ok(shown.drawn > 0, `${name}: the previous graph is drawn (${shown.drawn} boxes)`);
      // A node's details still open. On a compare (the demo), a matched leaf, with its tensors. On the
      // case's NPU folder alone (a build: it loaded alone, only its compare with the Bench folder
      // failed), the last node its dump.json has data for, with its tensors; when the dump has none
      // (no `data`), the root, whose details say it has no tensor data.
      const dumped = before.bench ? [] : dumpedNames(path.join(dir, 'npu'));
      const pick = await page.evaluate((dumped) => {
        const r = window.__probelens.lastResult;
        const g = r.npu;
        const has = new Set(dumped);
        let i = g.names.length - 1;
        if (r.bench) while (i > 0 && g.matched[i] < 0) i--;
        else while (i > 0 && !has.has(g.names[i])) i--;
        return { i, name: g.names[i], tensors: !!r.bench || has.has(g.names[i]) };
      }, dumped);
      assert.ok(pick.tensors || !dumped.length, `${name}: a node with data in the shown build`);
      await page.evaluate((i) => window.__probelens.select('npu', i), pick.i);
      await page.waitForFunction((nm) => document.getElementById('details').dataset.node === nm, pick.name, { timeout: 10000 });
      if (pick.tensors) {
        await page.waitForFunction(() => document.querySelectorAll('#details-compare tr[data-side="npu"]').length > 0, null, { timeout: 10000 });
      } else {
        assert.equal(await page.locator('#details-compare').textContent(), 'This node has no tensor data.');
      }
    } else {
      assert.deepEqual(errors, {}, `${name}: no error shown`);
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready');
      const sum = await resultSummary(page);
      assert.ok(sum && sum.npu.nodes > 0, `${name}: a result is shown`);
      const diags = await page.locator('#diagnostics li').evaluateAll((ls) => ls.map((l) => ({ cls: l.className, text: l.textContent })));
      const complaints = diags.filter((d) => d.cls === 'warning' || d.cls === 'error');
      if (expected === 'ok') {
        assert.deepEqual(complaints, [], `${name}: no warning`);
        assert.deepEqual(await shownNotes(page), {}, `${name}: no note on a card`);
      } else {
        const sev = expected.slice(0, expected.indexOf(':'));
        assert.deepEqual(diags.filter((d) => d.cls === sev).map((d) => d.text), [expected], `${name}: the diagnostic, exactly`);
        if (sev === 'info') assert.deepEqual(complaints, []);
        const card = noteCardOf(expected);
        assert.deepEqual(await shownNotes(page), { [card]: expected }, `${name}: the diagnostic on the ${card} card only`);
      }
      if (fs.existsSync(path.join(CORPUS, name, 'msprobe.vis.db.gz'))) {
        const ref = await msprobeGraphs(name);
        const got = await page.evaluate(() => {
          const r = window.__probelens.lastResult;
          const side = (g) => ({ names: [...g.names].sort(), matched: Array.from(g.matched).filter((m) => m >= 0).length });
          return { npu: side(r.npu), bench: r.bench ? side(r.bench) : null };
        });
        const byCodeUnit = (a) => [...a].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
        for (const side of ['npu', 'bench']) {
          assert.deepEqual(byCodeUnit(got[side].names), byCodeUnit(ref[side].names), `${name}: ${side} node names as msprobe's`);
          assert.equal(got[side].matched, ref[side].matched, `${name}: ${side} matched as msprobe's`);
        }
      }
    }
    await page.screenshot({ path: path.join(OUT, `bad-inputs-${tag}-${name}.png`) });
    assertClean();
  } finally {
    await context.close();
  }
}

const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'probelens-bad-inputs-e2e-'));
process.on('exit', () => fs.rmSync(TMP, { recursive: true, force: true }));

describe('bad-input corpus in the served page', () => {
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

  test('the corpus is the one the CLI test runs', () => {
    const all = cases();
    assert.ok(all.length >= 22, `only ${all.length} cases`);
    for (const c of FILE_CASES) assert.ok(all.includes(c), `${c} is a case`);
  });

  for (const name of cases()) {
    test(name, { timeout: CASE_TIMEOUT }, async () => {
      await runCase(browser, server.url, servedAllowlist(server.url), name, TMP, 'served');
    });
  }
});

describe('bad-input corpus in the single file over file:// (a subset)', () => {
  let browser;
  before(async () => {
    requireBuild();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  for (const name of FILE_CASES) {
    test(name, { timeout: CASE_TIMEOUT }, async () => {
      await runCase(browser, SINGLE_URL, fileAllowlist, name, TMP, 'file');
    });
  }
});
