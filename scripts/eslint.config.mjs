// ESLint flat config for the page, the scripts, the e2e tests and the benchmarks (`npm run lint`).
// Kept in scripts/ so the repo root stays Rust-only; paths are relative to the repo root (the cwd of npm run).
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['www/pkg/**', 'dist/**', 'node_modules/**', 'target/**', 'tests/out/**', 'bench/out/**'] },
  js.configs.recommended,
  {
    files: ['www/**/*.js'],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: 'module',
      globals: { ...globals.browser, __PL_WASM_GZ: 'readonly', __PL_WORKER_SRC: 'readonly', __PL_DEMO: 'readonly', __PL_TEMPLATES: 'readonly', __PL_SQL_WASM_GZ: 'readonly' },
    },
  },
  {
    files: ['www/worker.js'],
    languageOptions: { globals: { ...globals.worker } },
  },
  {
    files: ['scripts/**/*.mjs', 'tests/e2e/**/*.mjs', 'tests/unit/**/*.mjs', 'bench/**/*.mjs'],
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { ...globals.node } },
  },
  {
    // Functions passed to page.evaluate run in the browser.
    files: ['tests/e2e/**/*.mjs', 'bench/browser.mjs', 'bench/big.mjs'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-restricted-properties': ['error',
        { property: 'innerHTML', message: 'Render user data with textContent only.' },
        { property: 'outerHTML', message: 'Render user data with textContent only.' },
        { property: 'insertAdjacentHTML', message: 'Render user data with textContent only.' }],
      eqeqeq: ['error', 'always'],
    },
  },
];
