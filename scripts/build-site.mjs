#!/usr/bin/env node
// Builds dist/ (the static site) and dist/probelens.html (one self-contained file) from www/,
// www/pkg (the wasm-bindgen output of `npm run build:wasm`), the demo fixture and mappings/*.yaml.
// No dependencies: the "bundler" below concatenates our ES modules, which follow two conventions:
// imports are single-line `import { a, b } from './x.js';`, and top-level names are unique across files.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WWW = path.join(ROOT, 'www');
const DIST = path.join(ROOT, 'dist');
const PKG = path.join(WWW, 'pkg');
const DEMO_CASE = path.join(ROOT, 'tests', 'fixtures', 'qwen_mix_statistics');
const DEMO = {
  label: 'demo: qwen_mix_statistics step 0 (Megatron NPU vs HF Bench)',
  npu: path.join(DEMO_CASE, 'npu', 'step0'),
  bench: path.join(DEMO_CASE, 'bench', 'step0'),
  mapping: path.join(DEMO_CASE, 'layer_mapping.yaml'),
};
const MAPPINGS = path.join(ROOT, 'mappings');
/** sql.js (npm), the browser build: reads msprobe's .vis.db files in the worker. */
const SQLJS = path.join(ROOT, 'node_modules', 'sql.js', 'dist');
const SQLJS_JS = path.join(SQLJS, 'sql-wasm-browser.js');
const SQLJS_WASM = path.join(SQLJS, 'sql-wasm-browser.wasm');
/** The import path of sql.js in worker.js; the file exists only in dist/ (generated below). */
const SQLJS_IMPORT = './vendor/sql-wasm.js';

/** Single-file CSP: everything inline; the inline module is allowed by its hash. */
const singleCsp = (hash) =>
  `default-src 'none'; script-src '${hash}' 'wasm-unsafe-eval'; worker-src blob:; connect-src 'none'; ` +
  `img-src data: blob:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'`;

function fail(msg) {
  console.error(`build-site: ${msg}`);
  process.exit(1);
}

/** @param {string} dir @returns {string[]} '/'-separated paths relative to dir, sorted */
function listFiles(dir) {
  const out = [];
  const walk = (d, rel) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(path.join(d, e.name), r);
      else if (e.isFile()) out.push(r);
    }
  };
  walk(dir, '');
  return out;
}

function copy(src, dst) {
  fs.mkdirSync(path.dirname(dst), { recursive: true });
  fs.copyFileSync(src, dst);
}

// ------------------------------------------------------------------ module concatenation
const IMPORT_RE = /^import\s+(.+?)\s+from\s+'(\.{1,2}\/[^']+)';[ \t]*$/gm;
const DECL_RE = /^(?:export\s+)?(?:async\s+)?(?:function\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)/gm;

/**
 * Reads a module and its relative imports, depth first; returns files in dependency order.
 * @param {string} entry absolute path
 * @param {Set<string>} [skip] absolute paths provided some other way (not inlined)
 */
function collect(entry, skip = new Set()) {
  /** @type {string[]} */
  const order = [];
  const state = new Map();
  const visit = (file, from) => {
    if (skip.has(file)) return;
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'active') fail(`import cycle through ${path.relative(ROOT, file)}`);
    if (!fs.existsSync(file)) fail(`${path.relative(ROOT, from ?? file)} imports missing ${path.relative(ROOT, file)}`);
    state.set(file, 'active');
    const src = fs.readFileSync(file, 'utf8');
    for (const m of src.matchAll(IMPORT_RE)) visit(path.resolve(path.dirname(file), m[2]), file);
    state.set(file, 'done');
    order.push(file);
  };
  visit(entry);
  return order;
}

/** Strips imports/exports of one of our modules, checking the conventions. */
function stripModule(file, allowedDefaultImports = new Set()) {
  let src = fs.readFileSync(file, 'utf8');
  const rel = path.relative(ROOT, file);
  src = src.replace(IMPORT_RE, (_all, spec, from) => {
    const named = /^\{\s*[\w$]+(?:\s*,\s*[\w$]+)*\s*,?\s*\}$/.test(spec);
    const withDefault = /^[\w$]+(\s*,\s*\{\s*[\w$]+(?:\s*,\s*[\w$]+)*\s*,?\s*\})?$/.test(spec);
    if (!named && !(withDefault && allowedDefaultImports.has(from))) fail(`${rel}: unsupported import form: import ${spec}`);
    return `// (bundled) import ${spec.replace(/\s+/g, ' ')} from '${from}'`;
  });
  if (/^\s*import[\s{(]/m.test(src.replace(/^\s*\/\/.*$/gm, ''))) fail(`${rel}: an import the bundler cannot inline`);
  if (/^export\s+(default|\{|\*)/m.test(src)) fail(`${rel}: only 'export function|class|const' are supported`);
  src = src.replace(/^export\s+(?=(?:async\s+)?(?:function|class|const|let)\b)/gm, '');
  return src;
}

/** @param {{file: string, src: string}[]} parts */
function checkUniqueNames(parts) {
  const seen = new Map();
  for (const { file, src } of parts) {
    for (const m of src.matchAll(DECL_RE)) {
      const prev = seen.get(m[1]);
      if (prev && prev !== file) fail(`top-level name '${m[1]}' is declared in both ${path.relative(ROOT, prev)} and ${path.relative(ROOT, file)}`);
      seen.set(m[1], file);
    }
  }
}

/** The wasm-bindgen `--target web` glue, wrapped so it defines only Session, initSync and init. */
function wrappedGlue() {
  let glue = fs.readFileSync(path.join(PKG, 'probelens.js'), 'utf8');
  // The default export (the async init) is either `export default X;` or `export { ..., X as default };`.
  let initName = null;
  glue = glue.replace(/^export\s+default\s+([\w$]+);?[ \t]*$/m, (_a, name) => {
    initName = name;
    return '';
  });
  glue = glue.replace(/^export\s*\{([^}]*)\};?[ \t]*$/gm, (_a, list) => {
    for (const part of list.split(',')) {
      const m = /^\s*([\w$]+)\s+as\s+default\s*$/.exec(part);
      if (m) initName = m[1];
    }
    return '';
  });
  if (!initName) fail('www/pkg/probelens.js: no default export (not a --target web build?)');
  glue = glue.replace(/^export\s+(?=(?:async\s+)?(?:function|class|const|let)\b)/gm, '');
  if (/^\s*(import|export)\s/m.test(glue)) fail('www/pkg/probelens.js: unexpected import/export left in the glue');
  // The worker bundle is a classic script (module workers from blob: URLs do not start under file://);
  // import.meta only serves init() without bytes, which the single file never calls.
  glue = glue.replace(/import\.meta\.url/g, 'self.location.href');
  return `const { Session, initSync, init } = (() => {\n${glue}\nreturn { Session, initSync, init: ${initName} };\n})();\n`;
}

/**
 * sql.js is a classic script that defines `initSqlJs` (and assigns the undeclared `module`, which a
 * module's strict mode refuses): declare `module` locally and hand `initSqlJs` out.
 * @param {'module' | 'classic'} kind ES module for the served site, or an expression for the worker bundle
 */
function wrappedSqlJs(kind) {
  const src = fs.readFileSync(SQLJS_JS, 'utf8');
  if (/\bimport\.meta\b|^\s*(import|export)\s/m.test(src)) fail('sql.js: unexpected import/export in sql-wasm-browser.js');
  if (kind === 'module') return `// sql.js ${sqlJsVersion()} (MIT), wrapped as an ES module by scripts/build-site.mjs\nvar module;\n${src}\nexport default initSqlJs;\n`;
  return `const initSqlJs = (() => {\nvar module;\n${src}\nreturn initSqlJs;\n})();\n`;
}

function sqlJsVersion() {
  return JSON.parse(fs.readFileSync(path.join(SQLJS, '..', 'package.json'), 'utf8')).version;
}

/** JSON for embedding in an inline <script>: no '<' at all, so no '</script' or '<!--'. */
const js = (v) => JSON.stringify(v).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
const gzB64 = (buf) => zlib.gzipSync(buf, { level: 9 }).toString('base64');

// ------------------------------------------------------------------ build
function main() {
  const t0 = Date.now();
  const glueFile = path.join(PKG, 'probelens.js');
  const wasmFile = path.join(PKG, 'probelens_bg.wasm');
  if (!fs.existsSync(glueFile)) fail('www/pkg/probelens.js is missing: run `npm run build:wasm` first');
  const haveWasm = fs.existsSync(wasmFile);
  if (!fs.existsSync(SQLJS_JS) || !fs.existsSync(SQLJS_WASM)) fail('node_modules/sql.js is missing: run `npm ci`');
  if (!haveWasm) console.warn('build-site: warning: www/pkg/probelens_bg.wasm is missing (development stub?)');

  fs.rmSync(DIST, { recursive: true, force: true });
  fs.mkdirSync(DIST, { recursive: true });

  // 1. The static site: our files as they are, the wasm package, the demo and the templates.
  for (const f of fs.readdirSync(WWW)) {
    if (/\.(js|css)$/.test(f) && f !== 'single.js') copy(path.join(WWW, f), path.join(DIST, f));
  }
  // The page's controllers (www/controllers/*.js: logic without DOM, imported by app.js).
  for (const f of fs.readdirSync(path.join(WWW, 'controllers'))) {
    if (f.endsWith('.js')) copy(path.join(WWW, 'controllers', f), path.join(DIST, 'controllers', f));
  }
  const indexHtml = fs.readFileSync(path.join(WWW, 'index.html'), 'utf8');
  fs.writeFileSync(path.join(DIST, 'index.html'), indexHtml.replace('<!--CSP-->\n', ''));
  copy(glueFile, path.join(DIST, 'pkg', 'probelens.js'));
  if (haveWasm) copy(wasmFile, path.join(DIST, 'pkg', 'probelens_bg.wasm'));
  fs.mkdirSync(path.join(DIST, 'vendor'), { recursive: true });
  fs.writeFileSync(path.join(DIST, 'vendor', 'sql-wasm.js'), wrappedSqlJs('module'));
  copy(SQLJS_WASM, path.join(DIST, 'vendor', 'sql-wasm.wasm'));
  copy(path.join(SQLJS, '..', 'LICENSE'), path.join(DIST, 'vendor', 'sql.js-LICENSE.txt'));

  const demoSides = {};
  for (const side of ['npu', 'bench']) {
    const dir = DEMO[side];
    const files = listFiles(dir).filter((f) => f.endsWith('.json'));
    if (!files.length) fail(`no demo files under ${path.relative(ROOT, dir)}`);
    demoSides[side] = { dir, label: `${path.basename(path.dirname(dir))}/${path.basename(dir)}`, files };
    for (const f of files) copy(path.join(dir, f), path.join(DIST, 'demo', side, f));
  }
  copy(DEMO.mapping, path.join(DIST, 'demo', path.basename(DEMO.mapping)));
  const manifest = {
    label: DEMO.label,
    npu: { label: demoSides.npu.label, files: demoSides.npu.files.map((f) => ({ path: f, url: `./demo/npu/${f}` })) },
    bench: { label: demoSides.bench.label, files: demoSides.bench.files.map((f) => ({ path: f, url: `./demo/bench/${f}` })) },
    mapping: { name: path.basename(DEMO.mapping), url: `./demo/${path.basename(DEMO.mapping)}` },
  };
  fs.writeFileSync(path.join(DIST, 'demo', 'manifest.json'), JSON.stringify(manifest, null, 1));

  const templates = fs.existsSync(MAPPINGS)
    ? fs.readdirSync(MAPPINGS).filter((f) => /\.ya?ml$/i.test(f)).sort()
    : [];
  fs.mkdirSync(path.join(DIST, 'mappings'), { recursive: true });
  for (const t of templates) copy(path.join(MAPPINGS, t), path.join(DIST, 'mappings', t));
  fs.writeFileSync(path.join(DIST, 'mappings', 'index.json'), JSON.stringify(templates));

  // 2. The single file.
  const sqlFile = path.join(WWW, SQLJS_IMPORT);
  const workerParts = collect(path.join(WWW, 'worker.js'), new Set([glueFile, sqlFile])).map((file) => ({
    file,
    src: stripModule(file, new Set(['./pkg/probelens.js', SQLJS_IMPORT])),
  }));
  const workerSrc = `"use strict";\n${wrappedGlue()}\n${wrappedSqlJs('classic')}\n${workerParts.map((p) => `// ---- ${path.relative(WWW, p.file)}\n${p.src}`).join('\n')}`;

  if (/\bimport\.meta\b|^\s*(import|export)\s/m.test(workerSrc.replace(/^\s*\/\/.*$/gm, ''))) fail('the worker bundle is not a classic script');
  const appParts = collect(path.join(WWW, 'single.js')).map((file) => ({ file, src: stripModule(file) }));
  checkUniqueNames(appParts);
  checkUniqueNames(workerParts);

  const demoInline = {
    label: DEMO.label,
    npu: { label: demoSides.npu.label, files: demoSides.npu.files.map((f) => ({ path: f, gz: gzB64(fs.readFileSync(path.join(demoSides.npu.dir, f))) })) },
    bench: { label: demoSides.bench.label, files: demoSides.bench.files.map((f) => ({ path: f, gz: gzB64(fs.readFileSync(path.join(demoSides.bench.dir, f))) })) },
    mapping: { name: path.basename(DEMO.mapping), text: fs.readFileSync(DEMO.mapping, 'utf8') },
  };
  const tplInline = Object.fromEntries(templates.map((t) => [t, fs.readFileSync(path.join(MAPPINGS, t), 'utf8')]));
  const wasmGz = haveWasm ? gzB64(fs.readFileSync(wasmFile)) : '';
  const sqlWasmGz = gzB64(fs.readFileSync(SQLJS_WASM));

  const appCode = appParts.map((p) => `// ---- ${path.relative(WWW, p.file)}\n${p.src}`).join('\n');
  for (const bad of [/<\/script/i, /<!--/, /<script/i]) {
    if (bad.test(appCode)) fail(`the app code contains ${bad} (would break the inline script)`);
  }
  const script =
    `\nconst __PL_WASM_GZ = ${js(wasmGz)};\n` +
    `const __PL_SQL_WASM_GZ = ${js(sqlWasmGz)};\n` +
    `const __PL_WORKER_SRC = ${js(workerSrc)};\n` +
    `const __PL_DEMO = ${js(demoInline)};\n` +
    `const __PL_TEMPLATES = ${js(tplInline)};\n` +
    `${appCode}\n`;
  const hash = `sha256-${crypto.createHash('sha256').update(script, 'utf8').digest('base64')}`;
  const css = fs.readFileSync(path.join(WWW, 'style.css'), 'utf8');
  if (/<\/style/i.test(css)) fail('style.css contains </style');

  let html = indexHtml;
  const replaceOnce = (needle, value) => {
    if (!html.includes(needle)) fail(`www/index.html lacks ${needle}`);
    html = html.replace(needle, () => value);
  };
  replaceOnce('<!--CSP-->', `<meta http-equiv="Content-Security-Policy" content="${singleCsp(hash)}">`);
  replaceOnce('<link rel="stylesheet" href="./style.css">', `<style>\n${css}</style>`);
  replaceOnce('<script type="module" src="./main.js"></script>', `<script type="module">${script}</script>`);
  fs.writeFileSync(path.join(DIST, 'probelens.html'), html);

  const size = (f) => fs.statSync(path.join(DIST, f)).size;
  console.log(
    `build-site: dist/ ready in ${Date.now() - t0} ms — probelens.html ${(size('probelens.html') / 1024).toFixed(0)} KiB` +
      (haveWasm ? `, wasm ${(size('pkg/probelens_bg.wasm') / 1024).toFixed(0)} KiB` : '') +
      `, ${templates.length} mapping template(s)`,
  );
}

main();
