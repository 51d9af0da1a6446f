#!/usr/bin/env bash
# `npm test`: installs what is missing, then runs every check and test of the project.
# Order: fast static checks first, then the Rust tests (incl. msprobe fidelity), then the page
# build and its browser tests. Each test runner prints its own closing summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PWD/node_modules/.bin:$PATH"
export CARGO_TERM_COLOR=never

step() { echo; echo "== $*"; }

step "setup (idempotent; with the browser for the tests)"
bash scripts/setup.sh --browser

step "cargo fmt --check"
cargo fmt --check

step "cargo clippy (native, all targets) -D warnings"
cargo clippy --release --all-targets -- -D warnings

step "cargo clippy (wasm32, feature wasm) -D warnings"
cargo clippy --release --target wasm32-unknown-unknown --no-default-features --features wasm -- -D warnings

step "cargo test (core, CLI, msprobe fidelity, golden, bad inputs; profile ci = release without LTO)"
cargo test --profile ci

step "wasm bindings: wasm-bindgen-test in headless Chromium"
CHROMEDRIVER="$(command -v chromedriver)" CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test --target wasm32-unknown-unknown --no-default-features --features wasm --test web

step "page: build (dist/ and dist/probelens.html)"
npm run build

step "page: typecheck and lint"
npm run typecheck
npm run lint

step "page: store and controllers (node --test, no browser)"
npm run test:unit

step "page: browser tests (Chromium, served site and file://)"
npm run test:e2e
