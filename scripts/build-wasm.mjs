#!/usr/bin/env node
// Builds the WebAssembly core into www/pkg with wasm-pack (--target web, release), using wasm-opt from
// the npm package `binaryen` (node_modules/.bin first on PATH; Debian's binaryen 108 miscompiles).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BIN = path.join(ROOT, 'node_modules', '.bin');
const env = { ...process.env, PATH: `${BIN}${path.delimiter}${path.join(process.env.HOME ?? '', '.cargo', 'bin')}${path.delimiter}${process.env.PATH}` };

function fail(msg) {
  console.error(`build-wasm: ${msg}`);
  process.exit(1);
}

if (!fs.existsSync(path.join(BIN, 'wasm-opt'))) fail('node_modules/.bin/wasm-opt is missing: run `npm ci` (devDependency binaryen)');
const which = spawnSync('sh', ['-c', 'command -v wasm-opt'], { env, encoding: 'utf8' }).stdout.trim();
if (path.resolve(which) !== path.join(BIN, 'wasm-opt')) fail(`wasm-opt resolves to ${which}, expected ${BIN}/wasm-opt`);

const args = ['build', '--target', 'web', '--release', '--out-dir', 'www/pkg', '--out-name', 'probelens', '--no-pack',
  '--', '--no-default-features', '--features', 'wasm'];
console.log(`build-wasm: wasm-pack ${args.join(' ')}`);
const r = spawnSync('wasm-pack', args, { cwd: ROOT, env, stdio: 'inherit' });
if (r.error) fail(`cannot run wasm-pack: ${r.error.message} (run scripts/setup.sh)`);
if (r.status !== 0) fail(`wasm-pack failed with exit code ${r.status}`);
for (const f of ['probelens.js', 'probelens_bg.wasm']) {
  if (!fs.existsSync(path.join(ROOT, 'www', 'pkg', f))) fail(`www/pkg/${f} was not produced`);
}
const size = fs.statSync(path.join(ROOT, 'www', 'pkg', 'probelens_bg.wasm')).size;
console.log(`build-wasm: www/pkg/probelens_bg.wasm ${(size / 1024).toFixed(0)} KiB`);
