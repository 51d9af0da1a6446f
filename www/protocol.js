// @ts-check
/**
 * The one request/response protocol between the page (main thread) and the worker that owns the
 * WebAssembly core (`worker.js`). Every request is `{id, type, ...}`; the worker answers each one
 * with zero or more `{id, type: 'progress', ...}` messages and then exactly one
 * `{id, type: 'result', ...}` or `{id, type: 'error', ...}`.
 *
 * Bytes never travel as JS strings: file chunks are `ArrayBuffer`s moved with the transfer list,
 * and the graph arrays of a run come back as typed arrays, also transferred (from the core they
 * come as one binary buffer per side, `Session.columns`, decoded by columns.js; an opened msprobe
 * file's as {@link GraphDto} JSON-shaped columns, converted by the worker).
 *
 * This file holds types and a few constants only (no DOM, no worker API), so both sides can import it.
 */

/** @typedef {'npu' | 'bench'} Side */

/**
 * Folder layout of one side, as the core understands it.
 * @typedef {{kind: 'files' | 'ranks' | 'steps', steps: number[], ranks: number[]}} Layout
 */

/**
 * Options of a compare/build run (mirrors the CLI: `-lm`, `-fm`, `-oc`).
 * `layerMapping`: null = no layer mapping; "" = bare `-lm` (built-in rules); otherwise the YAML text.
 * `layerMappingName`: file name of the YAML, used in the core's error messages.
 * Parallel merge (the CLI's `--rank_size/--tp/--pp/--vpp/--order`, one value per side: NPU [Bench];
 * no `rankSize`: no merge): the step's rank folders are merged, `mergedRank` picks the merged graph
 * (by its main rank; absent: the first) and the result's `merge` lists them all.
 * @typedef {{step: number, rank: number, layerMapping: string | null, layerMappingName?: string, fuzzy: boolean, overflowCheck: boolean, rankSize?: number[], tp?: number[], pp?: number[], vpp?: number[], order?: string[], mergedRank?: number}} RunOptions
 */

/**
 * One legend entry of the result's colour table (`nodeColors`), keyed by `#RRGGBB`.
 * `value` is `[lo, hi]`, or `[]` for the "unmatched" colour.
 * @typedef {{value: number[], description: string, accuracy_level?: string}} ColorEntry
 */

/**
 * A graph as JSON-shaped columns, nodes in pre-order, root = 0: what visfile.js reads from an
 * opened msprobe file (the core's graphs hold the same values, in binary: columns.js).
 * @typedef {object} GraphDto
 * @property {string[]} names
 * @property {number[]} parent  -1 for the root
 * @property {number[]} nodeType 0 module, 1 api, 9 api collection (8 multi-collection)
 * @property {(number | null)[]} precision  NPU side only
 * @property {(string | null)[]} overflow   null | "medium" | "high" | "critical"
 * @property {number[]} matched  index of the counterpart in the other graph, -1 if none
 * @property {number[]} microStep
 * @property {number[]} subtreeEnd  the subtree of i is [i, subtreeEnd[i])
 */

/**
 * The same graph as the page has it: numeric columns as typed arrays (transferred; from the core
 * they are views on one buffer per side). `precision` uses NaN for null.
 * @typedef {object} Graph
 * @property {string[]} names
 * @property {Int32Array} parent
 * @property {Uint8Array} nodeType
 * @property {Float64Array} precision
 * @property {(string | null)[]} overflow
 * @property {Int32Array} matched
 * @property {Int32Array} microStep
 * @property {Int32Array} subtreeEnd
 */

/**
 * A {@link Graph} as it crosses from the worker: the names as one string joined with
 * {@link NAME_SEP} (see {@link unpackRunResult}).
 * @typedef {Omit<Graph, 'names'> & {namesJoined: string}} PackedGraph
 */

/**
 * @typedef {{severity: 'warning' | 'info' | 'error', file: string, message: string}} Diagnostic
 */

/**
 * Result of a run: the core's JSON answer (`view::RunDto`, where `npu`/`bench` are only
 * `{nodes: n}`) with `npu`/`bench` replaced by the {@link Graph}s decoded from `Session.columns`
 * (or, for an opened msprobe file, converted from visfile.js's {@link GraphDto}s).
 * @typedef {object} RunResult
 * @property {'compare' | 'build'} graphType
 * @property {string} task
 * @property {number} microSteps
 * @property {Record<string, ColorEntry>} nodeColors
 * @property {Record<string, string> | null} toolTip
 * @property {Diagnostic[]} diagnostics
 * @property {Graph} npu
 * @property {Graph | null} bench
 * @property {string[]} [tensorReads] tensor files the core read during this run (`side/path`; dump runs only)
 * @property {SliceRead[]} [jsonReads] the reads of lazy JSON files (dump.json in slices, construct.json and stack.json whole) since the session's previous run
 *   (this run's and those of the `check` before it), in order (dump runs only)
 * @property {{ranks: number[], rank: number}} [merge] with a parallel merge: the main ranks of the step's merged graphs and the one shown
 */

/**
 * One read of a lazy JSON file by the core: `file` is `side/path` (the slot), `length` bytes from `offset`.
 * @typedef {{file: string, offset: number, length: number}} SliceRead
 */

/**
 * One tensor's fields, in the core's order: `[key, [[field, value], ...]]`.
 * @typedef {[string, [string, string][]]} TensorEntry
 */

/**
 * @typedef {object} NodeDetail
 * @property {string} name
 * @property {number} nodeType
 * @property {string} upNode
 * @property {string | null} precisionIndex  as text, e.g. "1.0"
 * @property {string | null} overflowLevel
 * @property {string[]} matchedNodeLink
 * @property {number} microStep
 * @property {string[]} stack
 * @property {TensorEntry[]} inputData
 * @property {TensorEntry[]} outputData
 * @property {{section: string, npu: string | null, bench: string | null}[]} rows
 */

/**
 * Requests (page → worker).
 * @typedef {{id: number, type: 'init', wasm?: ArrayBuffer, streamThreshold?: number, heapLimit?: number, sliceBytes?: number}} InitRequest
 *   Instantiate the core. With `wasm` (the module bytes) the worker uses `initSync`; without, it fetches the .wasm.
 *   `streamThreshold` overrides STREAM_THRESHOLD (tests use it to exercise the streaming path).
 *   `heapLimit` caps the core's memory in bytes (tests use it to reach the out-of-memory paths with small inputs).
 *   `sliceBytes` sets the size of the core's reads of a dump.json (default 4 MiB; tests use small slices).
 * @typedef {{id: number, type: 'newSession', roots: Partial<Record<Side, string>>}} NewSessionRequest
 *   Start a staging session; files go there until `run` succeeds, the displayed session stays usable meanwhile.
 *   `roots` names each side's chosen folder (the core puts it in front of paths in its messages).
 *   Answers `{version, session}`: `session` identifies it (once it is the current one) for `adoptSide`.
 * @typedef {{id: number, type: 'adoptSide', side: Side, from: number}} AdoptSideRequest
 *   Instead of sending a side's files again: the staging session's `side` slot becomes a copy of the same
 *   slot of the current session (core `adoptSide`: files, lazy files with their handles, parsed rank
 *   folders shared, nothing read or parsed again), if the current session is the dump session `from`
 *   (newSession's `session`). Answers `{adopted: false}` when it is not (no current session, another
 *   one, an opened msprobe file, or a fresh worker): the page then sends the files. `suspended`: the
 *   current session's result, a build, freed its graph for this load (core `suspend`; built again on
 *   its next use if this load fails).
 * @typedef {{id: number, type: 'fileBegin', side: Side, path: string, size: number}} FileBeginRequest
 * @typedef {{id: number, type: 'fileChunk', side: Side, path: string, chunk: ArrayBuffer}} FileChunkRequest
 *   The file ends implicitly when `size` bytes arrived; the result then says `done: true`.
 * @typedef {{id: number, type: 'fileHandles', side: Side, files: {path: string, file: Blob, size: number}[]}} FileHandlesRequest
 *   dump.json, construct.json, stack.json and tensor files (`dump_tensor_data/*.pt|npy`) by handle, not by
 *   bytes: the worker keeps the Blobs and the core reads them through `FileReaderSync`: a dump.json in
 *   slices while `check` or `run` parses it (never whole), a construct.json or stack.json whole while it
 *   parses it (freed right after), a tensor only when a compare needs it.
 * @typedef {{id: number, type: 'check', side: Side}} CheckRequest
 *   Parse every rank folder of one side of the staging session now, so a broken file is reported early.
 * @typedef {{id: number, type: 'layout'}} LayoutRequest
 * @typedef {{id: number, type: 'run', options: RunOptions, session: 'staging' | 'current'}} RunRequest
 *   On success a staging session becomes the current one.
 * @typedef {{id: number, type: 'discardStaging'}} DiscardStagingRequest
 * @typedef {{id: number, type: 'nodePair', side: Side, index: number}} NodePairRequest
 *   Details of a node of the current result and of its counterpart.
 * @typedef {{op: 'match', npu: number, bench: number, recursive: boolean} | {op: 'unmatch', side: Side, index: number} | {op: 'accept', minScore: number}} MatchOp
 *   One manual-match operation on the current result (core `matchNodes` / `unmatch`; `accept`: core
 *   `acceptSuggestions`, every suggestion of at least `minScore`, to a fixed point).
 * @typedef {{id: number, type: 'match', ops: MatchOp[]}} MatchRequest
 *   Applies the operations in order; the answer is their merged {@link Changes}. On an opened `.vis.db`
 *   the pairs are re-compared from the statistics the file stores (visfile.js `VisDb.applyOps`).
 * @typedef {{id: number, type: 'openVis', name: string, bytes: ArrayBuffer, sqlWasm?: ArrayBuffer}} OpenVisRequest
 *   Opens a msprobe output file (`.vis.db`, legacy `.vis` JSON, either may be gzipped) as the current session.
 *   `sqlWasm`: the sql.js module bytes (needed once per worker for a .vis.db).
 * @typedef {{id: number, type: 'runVis', step: number, rank: number}} RunVisRequest
 *   The graphs of one step/rank of the opened file, as a {@link RunResult}.
 * @typedef {{id: number, type: 'exportCsv'}} ExportCsvRequest
 *   msprobe's compare table (one row per compared NPU tensor) of the current result, as CSV text.
 * @typedef {{id: number, type: 'checkMapping', name: string, text: string}} CheckMappingRequest
 *   Validates a layer-mapping yaml (core `Session.checkMapping`, no session needed); answers {@link MappingCheck}.
 * @typedef {{id: number, type: 'suggest', minScore: number}} SuggestRequest
 *   Match suggestions for the grey NPU nodes of the current result; answers {@link Suggestions}.
 * @typedef {{id: number, type: 'exportMapping', yaml: string, pairs: [string, string][]}} ExportMappingRequest
 *   The layer mapping that reproduces `pairs` (NPU name, Bench name), merged into `yaml`
 *   (core `exportMappingReport`); answers {@link MappingExport}.
 * @typedef {{id: number, type: 'probeRun', options: RunOptions}} ProbeRunRequest
 *   The matched node counts `{npu, bench}` the current dump session would give with other options
 *   (the page's template offer), from a throwaway session that adopts both of its sides (nothing is
 *   read or parsed again) and is freed at once; the shown result is untouched.
 * @typedef {{id: number, type: 'exportVis'}} ExportVisRequest
 *   The opened `.vis.db` with the manual matches made on it (answers `{bytes}`, an ArrayBuffer).
 * @typedef {{id: number, type: 'diagnose', step: number, rank: number}} DiagnoseRequest
 *   The diagnosis of the current compare (core `Session.diagnose`, `step`/`rank` label it); answers
 *   {@link DiagnoseAnswer}: the {@link Diagnosis} and the NPU nodes' divergence column (transferred).
 * @typedef {{id: number, type: 'diagnoseStep', options: RunOptions}} DiagnoseStepRequest
 *   The diagnosis of another step or rank of the current dump session (core `Session.diagnoseStep`:
 *   that pair's rank folders are parsed unless parsed already, and freed after), without changing the
 *   shown result; answers a {@link Diagnosis} (its suspects' `npuIndex`/`benchIndex` are null). One
 *   request per heatmap row: the page loops over the steps or ranks and can stop between them.
 * @typedef {InitRequest | NewSessionRequest | AdoptSideRequest | FileBeginRequest | FileChunkRequest | FileHandlesRequest | CheckRequest | LayoutRequest | RunRequest
 *   | DiscardStagingRequest | NodePairRequest | MatchRequest | OpenVisRequest | RunVisRequest | ExportCsvRequest
 *   | CheckMappingRequest | SuggestRequest | ExportMappingRequest | ProbeRunRequest | ExportVisRequest
 *   | DiagnoseRequest | DiagnoseStepRequest} Request
 */

/**
 * Answer of `checkMapping`: `ok` with the counts of a yaml the core can read (`invalid`: valid YAML
 * that msprobe cannot use, so the mapping is empty), or the syntax error with its 1-based place.
 * @typedef {{ok: true, keys: number, rules: number, scoped: boolean, invalid: string | null}
 *   | {ok: false, message: string, detail: string, line: number | null, column: number | null}} MappingCheck
 */

/**
 * One match suggestion (pre-order indices of the current result).
 * @typedef {{npu: number, bench: number, score: number, reason: string}} Suggestion
 * @typedef {{list: Suggestion[], defaultMinScore: number}} Suggestions
 *   Grouped by NPU node in pre-order, best candidate first, at most three per node.
 */

/**
 * Answer of `exportMapping`.
 * @typedef {{yaml: string, added: {key: string, src: string, dst: string}[], reproduced: [string, string][], missed: [string, string, string][]}} MappingExport
 */

/**
 * One suspect of the diagnosis (`view::diagnosis_dto`), best first: the NPU node where the two runs
 * part ways, its Bench counterpart, how much error it adds (`score`: log10 of its output's divergence
 * over its inputs'), and why. `npuIndex`/`benchIndex`: pre-order indices in the shown graphs (null when
 * absent, and in a `diagnoseStep` answer).
 * @typedef {{step: number, rank: number, pass: 'forward' | 'backward', node: string, bench_node: string | null, score: number, why: string, npuIndex: number | null, benchIndex: number | null}} Suspect
 * One layer's cell of a heatmap row: the largest log10 divergence of the layer's forward outputs in
 * units of the noise floor (0: within it; null: not measured), `source`: it holds the top suspect.
 * @typedef {{layer: string, div: number | null, source: boolean}} LayerCell
 * @typedef {{step: number, rank: number, verdict: 'agree' | 'diverged', suspects: Suspect[], layers: LayerCell[], measured: number}} Diagnosis
 * @typedef {{diagnosis: Diagnosis, divergence: Float32Array}} DiagnoseAnswer
 *   `divergence`: per NPU node in pre-order, log10 of its output's divergence in units of the noise
 *   floor (0: within it, NaN: not measured).
 */

/**
 * Changes of a manual match: `[index, precision | null, matched index]` per node whose values changed.
 * @typedef {{npu: [number, number | null, number][], bench: [number, number | null, number][]}} Changes
 */

/**
 * What an opened msprobe output holds.
 * @typedef {{kind: 'db' | 'json', name: string, graphType: 'compare' | 'build', steps: number[], ranks: number[], whyNotMatch: string | null}} VisMeta
 *   `whyNotMatch`: why manual matching cannot work on the file (null: it can, a `.vis.db` compare of statistics or md5)
 */

/**
 * Responses (worker → page).
 * @typedef {{id: number, type: 'progress', stage: string, done?: number, total?: number, side?: Side, path?: string}} ProgressResponse
 *   With `side` (the slot) and `path`: `check` or `run` is reading that JSON file (a dump.json: and parsing it as it
 *   goes), `done` of its `total` bytes; `done === total` when the core is done with the file.
 * @typedef {{id: number, type: 'error', message: string, side?: Side, path?: string, stage?: string, fatal?: boolean}} ErrorResponse
 *   `side`/`path`: the side and file the error concerns (from the request, or from the core's Error
 *   properties `side`/`file`; for the core `side` is the slot, see app.js for a lone Bench folder).
 *   `fatal`: the core trapped (a Rust panic, or an allocation the wasm memory could not grow for: then
 *   the message says it was the browser's memory limit); the worker refuses further work and must be replaced.
 * @typedef {{id: number, type: 'result', value?: any}} ResultResponse
 *   `value` per request: init → `{}`; newSession → `{version: string, session: number}`;
 *   adoptSide → `{adopted: boolean, suspended?: boolean}`; fileChunk → `{done: boolean}`;
 *   layout → `{npu: Layout | null, bench: Layout | null}`; run → {@link RunResult};
 *   nodePair → `{npu: NodeDetail | null, bench: NodeDetail | null}`; match → {@link Changes};
 *   openVis → {@link VisMeta}; runVis → {@link RunResult}; exportCsv → `{csv: string, rows: number}`;
 *   checkMapping → {@link MappingCheck}; suggest → {@link Suggestions}; exportMapping → {@link MappingExport};
 *   diagnose → {@link DiagnoseAnswer}; diagnoseStep → {@link Diagnosis}; others → undefined.
 * @typedef {ProgressResponse | ErrorResponse | ResultResponse} Response
 */

/** Separator of the node names packed into one string for the trip from the worker. */
export const NAME_SEP = '\u0000';

/**
 * The run result as it crosses from the worker: `names` travel as one joined string (`namesJoined`),
 * which is much cheaper to copy than an array of 100k small strings.
 * @param {any} packed
 * @returns {RunResult}
 */
export function unpackRunResult(packed) {
  for (const key of ['npu', 'bench']) {
    const g = packed[key];
    if (g && typeof g.namesJoined === 'string') {
      g.names = g.namesJoined.length || g.parent.length ? g.namesJoined.split(NAME_SEP) : [];
      delete g.namesJoined;
    }
  }
  return packed;
}

/** Files bigger than this are streamed into the core (`beginFile`/`appendChunk`) instead of `addFile`. */
export const STREAM_THRESHOLD = 64 * 1024 * 1024;

/** Size of the chunks the page reads with `Blob.slice` and transfers to the worker. */
export const CHUNK_SIZE = 8 * 1024 * 1024;

/** Stage labels shown in the progress bar. */
export const STAGES = Object.freeze({
  startCore: 'Starting the core',
  readNpu: 'Reading NPU files',
  readBench: 'Reading Bench files',
  layout: 'Checking folder layout',
  run: 'Building and comparing graphs',
  convert: 'Preparing the graphs',
  render: 'Laying out',
  openVis: 'Opening the file',
  exportCsv: 'Exporting the compare table',
  match: 'Matching',
  suggest: 'Finding match suggestions',
  diagnose: 'Diagnosing',
});

/** The sides, in display order (NPU left, Bench right). */
/** @type {readonly Side[]} */
export const SIDES = Object.freeze(['npu', 'bench']);
