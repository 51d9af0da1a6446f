// Ambient declarations for the page's JS (checked with `tsc --noEmit -p www/jsconfig.json`).

interface ProbelensHook {
  lastResult: import('./protocol.js').RunResult | null;
  errors: { where: string; message: string }[];
  timings: { displayMs: number };
  suspends: number;
  readonly state: unknown;
  /** the diagnosis slice of the page's store (controllers/diagnose.js) */
  readonly diagnosis: import('./controllers/diagnose.js').DiagnosisState;
  views: unknown;
  outlines: unknown;
  minimaps: unknown;
  setMicroStep(k: number): void;
  select(side: import('./protocol.js').Side, index: number): void;
  toggle(side: import('./protocol.js').Side, index: number, open?: boolean): void;
  loadDemo(): Promise<void>;
  mappingPanel: import('./mappingpanel.js').MappingPanel;
}

interface Window {
  /** Test and debugging hook (the e2e tests read the core's result from here). */
  __probelens: ProbelensHook;
}

// Defined by scripts/build-site.mjs in the single-file build only (see single.js).
declare const __PL_WASM_GZ: string;
declare const __PL_WORKER_SRC: string;
declare const __PL_DEMO: {
  label: string;
  npu: { label: string; files: { path: string; gz: string }[] };
  bench: { label: string; files: { path: string; gz: string }[] };
  mapping: { name: string; text: string } | null;
};
declare const __PL_TEMPLATES: Record<string, string>;
declare const __PL_SQL_WASM_GZ: string;
