#!/usr/bin/env bash
# Idempotent toolchain setup for the page build and its browser tests (run from anywhere, as root for apt).
# Fast when everything is present (checks before installing); a fresh 2-core machine needs ~17 min of compiling.
# Never downloads browsers or prebuilt binaries from GitHub/CDNs: tools come from the crate registry,
# Debian (chromium) and npm (binaryen's wasm-opt, playwright-core without its browser download).
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen crate version (Cargo.toml pins =0.2.130)
WASM_PACK_VERSION=0.15.1
export PATH="$HOME/.cargo/bin:$PATH"

say() { echo "setup: $*"; }

# 1. Rust wasm target
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  say "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# 2. wasm-bindgen CLI and wasm-pack, compiled from the crate registry, only when the version differs.
#    No --locked for wasm-bindgen-cli: its lockfile pins a webpki-roots the registry here does not serve.
tool_is() { command -v "$1" >/dev/null 2>&1 && [ "$("$1" --version 2>/dev/null | awk '{print $2}')" = "$2" ]; }
if ! tool_is wasm-bindgen "$WASM_BINDGEN_VERSION"; then
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (cargo install, ~11 min)"
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi
if ! tool_is wasm-pack "$WASM_PACK_VERSION"; then
  say "installing wasm-pack $WASM_PACK_VERSION (cargo install, ~5 min)"
  cargo install wasm-pack --version "$WASM_PACK_VERSION" --locked --force
fi

# 3. Browser for the tests (`--browser`: `npm test` asks for it; `npm start` needs none), from Debian,
#    only when missing.
WANT_BROWSER=0
for arg in "$@"; do [ "$arg" = "--browser" ] && WANT_BROWSER=1; done
if [ "$WANT_BROWSER" = 1 ] && { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; }; then
  say "installing chromium and chromium-driver from Debian"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium chromium-driver
fi

# 4. JS dev dependencies (binaryen = wasm-opt 132, playwright-core, typescript, eslint) exactly from the lockfile,
#    only when node_modules is missing or older than package-lock.json.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "npm ci"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund
fi
say "ok"
