// @ts-check
// Load orchestration: reading the chosen folders into a fresh core session and running them, re-runs
// with other options, restoring the shown result after the core trapped, opening a msprobe output
// file, the demo; and its rules as pure functions (which core slot holds a side's folder, where an
// error message belongs, the parallel-merge options as the CLI takes them, the rank folders of a
// side). No DOM and no worker code: it takes the store, the client (anything with `request`,
// `start`, `restart` and `generation`) and a small `LoadUi` that app.js implements over the DOM.
import { STAGES, unpackRunResult } from '../protocol.js';
import { sendFiles, isTensorFile } from '../loader.js';
import { CoreError } from '../client.js';

/** @typedef {import('../protocol.js').Side} Side */
/** @typedef {{root: string} | null} RootOf a side's source (its folder name) */

/**
 * The core's slot of a side's folder: a lone Bench folder is built from the core's npu slot.
 * @param {Side} side @param {Record<Side, unknown>} sources the session's sources
 * @returns {Side}
 */
export function slotOf(side, sources) {
  return side === 'bench' && !sources.npu ? 'npu' : side;
}

/**
 * The side whose folder is in a slot of the core (the inverse of `slotOf`).
 * @param {Side} slot @param {Record<Side, unknown>} sources
 * @returns {Side}
 */
export function sideOfSlot(slot, sources) {
  return slot === 'npu' && !sources.npu ? 'bench' : slot;
}

/**
 * Which input an error message belongs to: the parallel group for the CLI's parallel-merge messages,
 * a side when the message names a file under that side's folder (the core puts the folder's name in
 * front of paths), the mapping card for layer-mapping messages, else the side chosen in this load,
 * else the load as a whole.
 * @param {string} msg
 * @param {Record<Side, RootOf>} sources the chosen sources
 * @param {Side[]} changed sides whose files were (re)chosen in this load
 * @returns {'npu' | 'bench' | 'mapping' | 'load' | 'parallel'}
 */
export function errorPlaceOf(msg, sources, changed) {
  if (/^(argument )?--(rank_size|tp|pp|vpp|order)\b|\[(NPU|Bench)\] The parallel param|Parallel (params|merge)|graph merge|tp_groups/.test(msg)) return 'parallel';
  const mentions = (/** @type {Side} */ side) => {
    const root = sources[side]?.root;
    return !!root && (msg.startsWith(`${root}/`) || msg.startsWith(`${root}:`) || msg.includes(` ${root}/`));
  };
  const inNpu = mentions('npu');
  const inBench = mentions('bench');
  if (inNpu !== inBench && sources.npu?.root !== sources.bench?.root) return inNpu ? 'npu' : 'bench';
  if (/\b(ya?ml|layer mapping|mapping)\b/i.test(msg) && !inNpu && !inBench) return 'mapping';
  if (changed.length === 1) return changed[0];
  return 'load';
}

/**
 * The parallel-merge options as the CLI takes them (`--rank_size N [N]` ...), or none when the rank
 * size is empty. One value on a compare is used for both sides. A value that is not an integer is
 * refused with argparse's message.
 * @param {{rankSize: string, tp: string, pp: string, vpp: string, order: string}} fields the inputs' text
 * @param {boolean} compare both sides loaded
 * @param {number} rank the rank chosen in the selector (a merged graph's rank when merging)
 * @param {number[] | null} mergedRanks the main ranks of the step's merged graphs, when merging
 */
export function parallelOptionsOf(fields, compare, rank, mergedRanks) {
  const raw = (/** @type {string} */ v) => v.trim().split(/[\s,]+/).filter(Boolean);
  /** @param {string} v @param {string} flag */
  const ints = (v, flag) => raw(v).map((x) => {
    if (!/^[+-]?\d+$/.test(x)) throw new Error(`argument ${flag}: invalid int value: '${x}'`);
    return Number(x);
  });
  /** @template T @param {T[]} v @returns {T[]} */
  const both = (v) => (compare && v.length === 1 ? [v[0], v[0]] : v);
  const rankSize = both(ints(fields.rankSize, '--rank_size'));
  if (!rankSize.length) return {};
  return {
    rankSize,
    tp: both(ints(fields.tp, '--tp')),
    pp: both(ints(fields.pp, '--pp')),
    vpp: both(ints(fields.vpp, '--vpp')),
    order: both(raw(fields.order)),
    mergedRank: mergedRanks?.includes(rank) ? rank : undefined,
  };
}

/**
 * The folders holding a `dump.json` among a side's files (`''` for the root): one per rank folder,
 * listed from the paths alone (no file is read).
 * @param {{path: string}[]} files
 * @returns {string[]}
 */
export function rankDirsOf(files) {
  const dirs = new Set();
  for (const f of files) {
    const m = /^(?:(.*)\/)?dump\.json$/.exec(f.path);
    if (m) dirs.add(m[1] ?? '');
  }
  return [...dirs].sort();
}

/** @typedef {import('../protocol.js').RunResult} RunResult */
/** @typedef {import('../protocol.js').RunOptions} RunOptions */
/** @typedef {import('../protocol.js').Layout} Layout */
/** @typedef {{npu: Layout | null, bench: Layout | null}} LayoutPair */
/** @typedef {import('../loader.js').SourceFile} SourceFile */
/**
 * `root`: the chosen folder's name ('' for loose files), which the core puts in front of paths in messages.
 * `demo`: the bundled demo's folder (set by loadDemo; a folder the user chooses replaces the demo as a whole).
 * @typedef {{label: string, root: string, files: SourceFile[], demo?: boolean}} Source
 */
/** @typedef {{key: string, name: string, text: string}} MappingChoice */
/** @typedef {'npu' | 'bench' | 'mapping' | 'load' | 'vis' | 'parallel'} ErrorPlace */
/** @typedef {{stage: string, done?: number, total?: number}} Progress */
/**
 * @typedef {object} Demo
 * @property {string} label
 * @property {{label: string, files: SourceFile[]}} npu
 * @property {{label: string, files: SourceFile[]}} bench
 * @property {{name: string, text: string} | null} mapping
 */

/**
 * The part of the page's state the load orchestration reads and writes.
 * @typedef {object} LoadState
 * @property {Record<Side, Source | null>} sources  the sources chosen
 * @property {Record<Side, Source | null>} applied  the sources of the shown result
 * @property {MappingChoice[]} mappings  the layer-mapping choices
 * @property {LayoutPair | null} runLayout  the step/rank layout of the shown result's folders
 * @property {number} sessionGen  worker generation that holds the current session (-1: none)
 * @property {number} sessionId  the worker's id of the current session (newSession's `session`; -1: none), for `adoptSide`
 * @property {boolean} running  a load or re-run is waiting for the worker
 * @property {RunOptions | null} runOpts  the options of the shown result
 * @property {'dump' | 'vis'} mode  'dump': dump folders through the core; 'vis': a msprobe output file
 * @property {import('../protocol.js').VisMeta | null} vis
 * @property {number[] | null} mergedRanks  with a parallel merge: the main ranks of the step's merged graphs
 * @property {Progress | null} progress  what the worker is doing for a load (null: nothing)
 * @property {Partial<Record<ErrorPlace, string>>} errors  the messages on the inputs, by where they belong
 * @property {'empty' | 'loading' | 'ready'} phase
 * @property {number} loads  finished loads and re-runs
 * @property {Map<string, string>} rankErrors  `step:rank` → the message of that pair's broken rank folder (the chosen folders')
 * @property {RunResult | null} result
 */

/** @type {Omit<LoadState, 'result'>} */
export const LOAD_INITIAL = {
  sources: { npu: null, bench: null },
  applied: { npu: null, bench: null },
  mappings: [],
  runLayout: null,
  sessionGen: -1,
  sessionId: -1,
  running: false,
  runOpts: null,
  mode: 'dump',
  vis: null,
  mergedRanks: null,
  progress: null,
  errors: {},
  phase: 'empty',
  loads: 0,
  rankErrors: new Map(),
};

/** Sides whose JSON files total more are not pre-checked (check parses every rank folder; run parses again). */
export const CHECK_LIMIT = 256 * 1024 * 1024;

/** Whether a layout lists several steps or ranks on a side. @param {LayoutPair} l */
export const several = (l) => [l.npu, l.bench].some((x) => !!x && (x.steps.length > 1 || x.ranks.length > 1));

/** The key of a (step, rank) pair in `rankErrors`. @param {number} step @param {number} rank */
export const pairKey = (step, rank) => `${step}:${rank}`;

/**
 * Whether a newly chosen side is parsed before the run (so that a broken file shows before the other
 * side is read): a single rank folder whose JSON files are not too big. A tree of several rank folders
 * is not: only the rank chosen in the selector is parsed, by the run.
 * @param {SourceFile[]} files
 */
export function checkFirst(files) {
  return rankDirsOf(files).length <= 1 && files.reduce((s, f) => s + (isTensorFile(f.path) ? 0 : f.size), 0) <= CHECK_LIMIT;
}

/**
 * Whether an error of a run is a rank folder's own (a file of the folder of the chosen pair could not
 * be read or parsed): the core names the side and the file (`npu/rank5/dump.json`).
 * @param {unknown} e
 */
export function isRankFileError(e) {
  return e instanceof CoreError && !!e.side && !!e.path && /(^|\/)(dump|construct|stack)\.json$/.test(e.path) && !e.fatal;
}

/**
 * What the load orchestration asks of the page (app.js implements it over the DOM).
 * @typedef {object} LoadUi
 * @property {() => {step: number | null, rank: number | null}} selected  the step and rank chosen in the selectors (null: none listed)
 * @property {() => {lm: boolean, mapping: MappingChoice | null, fuzzy: boolean, overflowCheck: boolean}} flags  -lm, the mapping chosen, -fm, -oc
 * @property {() => {rankSize: string, tp: string, pp: string, vpp: string, order: string}} parallel  the parallel-merge fields' text
 * @property {(layout: LayoutPair | null, merge?: {ranks: number[], rank: number} | null) => void} selectors
 *   lists a layout's steps and ranks in the selectors (`merge`: the merged graphs instead of the ranks; null layout: empty them)
 * @property {(step: number, rank: number) => void} choose  sets the selectors' values
 * @property {(result: RunResult) => Promise<unknown>} display  shows a result; resolves when its kept manual pairs are re-applied
 * @property {() => void} clear  shows nothing
 * @property {(notes?: Partial<Record<Side, string>>) => void} cards  the side cards' source lines (with a note)
 * @property {(text: string) => void} cardsText  both side cards say this (a msprobe file is shown)
 * @property {(text: string) => void} visText  the msprobe-output card's line
 * @property {() => void} loaded  after a load shows its result (fold the inputs)
 * @property {() => void} failed  after a load failed (the cards' warnings again)
 * @property {() => void} dropDemoMapping  the demo's mapping leaves the choices (and -lm, when it was on for it)
 * @property {(choice: MappingChoice) => void} addMapping  adds a mapping choice and chooses it, -lm on
 * @property {(text: string) => boolean} confirm  asks the user
 * @property {() => void} cancelBackground  stops the background work of the shown result (template count, heatmaps)
 * @property {() => void} stopDiagnosis  stops the heatmaps
 * @property {() => void} matchBlocked  the shown result's session may have changed: say again whether it can be matched
 * @property {() => void} revived  the shown result's session is back in a new worker (after a trap)
 */

/**
 * @typedef {object} LoadClient
 * @property {(req: any, transfer?: Transferable[], onProgress?: (p: import('../protocol.js').ProgressResponse) => void) => Promise<any>} request
 * @property {() => Promise<void>} start
 * @property {() => Promise<void>} restart
 * @property {number} generation  incremented each time the worker is replaced
 */

/**
 * The load orchestration: `load` (a fresh session from the chosen folders), `rerun` (other options on
 * the shown session), `revive` (after a trap), `openVis`/`runVis` (a msprobe output file), `loadDemo`,
 * `setSource`/`clearSource` (a side's folder), `confirmDiscard` (before dropping the hand-made pairs).
 * @param {import('../store.js').StateOf<LoadState & {manual: Map<number, number>, kept: Map<string, [string, string][]>, runKey: string}>} store
 * @param {LoadClient} client
 * @param {LoadUi} ui
 * @param {object} host
 * @param {() => Promise<Demo>} host.loadDemo
 * @param {() => Promise<ArrayBuffer>} host.sqlWasm
 * @param {object} [opts]
 * @param {number} [opts.chunkSize] test knob: the size of the chunks of files sent as bytes
 * @param {boolean} [opts.copyJson] test knob: construct.json and stack.json as bytes
 * @param {() => void} [opts.forgetManual] drops the hand-made pairs for good
 * @param {(key: string, params?: Record<string, string | number>) => string} [opts.t] translation
 */
export function createLoadController(store, client, ui, host, opts = {}) {
  const get = store.get;
  const t = opts.t ?? ((k, p) => k.replace(/\{(\w+)\}/g, (_, n) => String(p?.[n] ?? '')));
  /** Loads started (a newer one makes an older one's answers stale). */
  let loadSeq = 0;
  /** What the page logs for tests and debugging: the errors shown, the loads that freed a build's graph. */
  const log = { errors: /** @type {{where: string, message: string}[]} */ ([]), suspends: 0 };

  /** @param {ErrorPlace} where @param {string} [msg] */
  function setError(where, msg) {
    store.set((s) => ({ errors: { ...s.errors, [where]: msg ?? '' } }));
  }
  /** @param {ErrorPlace[]} places */
  function clearErrors(places) {
    store.set((s) => {
      const errors = { ...s.errors };
      for (const w of places) errors[w] = '';
      return { errors };
    });
  }
  /** @param {string} stage @param {number} [done] @param {number} [total] */
  function progress(stage, done, total) {
    store.set({ progress: { stage, done, total } });
  }
  /** A load or re-run is over: the page is ready (or empty), one more load counted. */
  function finished() {
    store.set((s) => ({ running: false, progress: null, phase: s.result ? 'ready' : 'empty', loads: s.loads + 1 }));
  }

  /**
   * The progress callback of a request that may read dump.json files (`check`, `run`): the core reads
   * a dump.json in slices and parses it as they come, which shows as that side's reading, with the
   * file's bytes; when the core is done with the file, the request's own stage shows again.
   * @param {number} seq the load's sequence number
   * @param {string} base the request's stage
   * @param {Record<Side, Source | null>} sources the session's sources (a lone Bench folder is in the core's npu slot)
   */
  function coreProgress(seq, base, sources) {
    return (/** @type {import('../protocol.js').ProgressResponse} */ p) => {
      if (seq !== loadSeq) return;
      if (!p.side) progress(p.stage, p.done, p.total);
      else if (p.done !== undefined && p.done === p.total) progress(base);
      else progress(sideOfSlot(p.side, sources) === 'npu' ? STAGES.readNpu : STAGES.readBench, p.done, p.total);
    };
  }

  /** The run options of the inputs: step and rank chosen, mapping and flags, parallel merge. */
  function runOptions() {
    const sel = ui.selected();
    const step = sel.step ?? 0;
    const rank = sel.rank ?? 0;
    const f = ui.flags();
    const s = get();
    return {
      step,
      rank,
      layerMapping: f.lm ? (f.mapping ? f.mapping.text : '') : null,
      layerMappingName: f.mapping ? f.mapping.name.replace(/^[a-z]+: /, '') : undefined,
      fuzzy: f.fuzzy,
      overflowCheck: f.overflowCheck,
      ...parallelOptionsOf(ui.parallel(), !!(s.sources.npu && s.sources.bench), rank, s.mergedRanks),
    };
  }

  /**
   * After a run: with a parallel merge the rank selector lists the merged graphs of the step (one
   * per DP replica, by their main rank); without, the rank folders again.
   * @param {RunResult} result
   */
  function showMerge(result) {
    const s = get();
    if (result.merge) {
      store.set({ mergedRanks: result.merge.ranks });
      ui.selectors(s.runLayout, result.merge);
    } else if (s.mergedRanks) {
      store.set({ mergedRanks: null });
      if (s.runLayout) ui.selectors(s.runLayout);
    }
  }

  /**
   * Which input an error belongs to. Errors of file requests carry their side; the core's run/layout
   * messages start with the file's path, which begins with the side's folder name (setRootName).
   * @param {unknown} e @param {Side[]} changed sides whose files were (re)chosen in this load
   * @returns {'npu' | 'bench' | 'mapping' | 'load' | 'parallel'}
   */
  function errorPlace(e, changed) {
    if (e instanceof CoreError && e.side) return e.side;
    return errorPlaceOf(e instanceof Error ? e.message : String(e), get().sources, changed);
  }

  /**
   * A run of the chosen (step, rank) failed on a file of its rank folders: the selectors mark that
   * entry with the message (the others stay usable).
   * @param {unknown} e @param {RunOptions | null} o
   */
  function noteRankError(e, o) {
    if (!o || !isRankFileError(e)) return false;
    const msg = /** @type {Error} */ (e).message;
    store.set((s) => ({ rankErrors: new Map(s.rankErrors).set(pairKey(o.step, o.rank), msg) }));
    return true;
  }
  /** A (step, rank) ran: its entry has no message. @param {RunOptions} o */
  function clearRankError(o) {
    const k = pairKey(o.step, o.rank);
    if (get().rankErrors.has(k)) {
      store.set((s) => {
        const m = new Map(s.rankErrors);
        m.delete(k);
        return { rankErrors: m };
      });
    }
  }

  /**
   * Whether a side of a new load can be taken over from the shown result's session instead of being
   * sent (and parsed) again: its source is the one that session holds, in the same slot of the core (a
   * lone Bench folder sits in the npu slot, so it moves when an NPU folder joins it), and that session
   * is still in this worker (not lost to a restart).
   * @param {Side} side @param {Side} slot the side's slot in the new session
   */
  function adoptable(side, slot) {
    const s = get();
    const src = s.sources[side];
    if (!src || src !== s.applied[side] || s.mode !== 'dump' || s.sessionId < 0 || s.sessionGen !== client.generation) return false;
    return slotOf(side, s.applied) === slot;
  }

  /**
   * Reads the chosen sources into a fresh session and runs. A side the shown result's session holds
   * unchanged is adopted from it (`adoptSide`: not sent, read or parsed again). The shown result stays
   * until this succeeds. A newly chosen single rank folder is parsed first (`check`); of a tree of
   * rank folders only the chosen rank is parsed, by the run: the selectors list the tree's steps and
   * ranks as soon as the files are listed.
   * @param {Side[]} changed
   */
  async function load(changed) {
    const seq = ++loadSeq;
    ui.cancelBackground();
    if (get().running) {
      // A load is running: terminate the worker (the old session goes with it) and start over.
      client.restart().catch(() => {});
    }
    // Every load reads both sides afresh, so an earlier message of either side is obsolete; a newly
    // chosen folder has none of the old folder's broken ranks.
    store.set((s) => ({
      running: true, phase: 'loading',
      errors: {},
      rankErrors: changed.length ? new Map() : s.rankErrors,
    }));
    /** @type {RunOptions | null} */
    let o = null;
    /** @type {LayoutPair | null} */
    let listed = null;
    try {
      const { sources } = get();
      if (!sources.npu && !sources.bench) {
        ui.clear();
        return;
      }
      progress(STAGES.startCore);
      await client.start();
      // The core builds a single graph from the npu slot; a Bench folder alone goes there too.
      /** @type {[Side, Side, Source][]} [slot in the core, side in the UI, source] */
      const slots = [];
      if (sources.npu) slots.push(['npu', 'npu', sources.npu]);
      if (sources.bench) slots.push([slotOf('bench', sources), 'bench', sources.bench]);
      const started = await client.request({ type: 'newSession', roots: Object.fromEntries(slots.map(([slot, , src]) => [slot, src.root])) });
      for (const [slot, side, src] of slots) {
        const stage = side === 'npu' ? STAGES.readNpu : STAGES.readBench;
        try {
          // The worker says no when the shown session is not the one named (the files are sent then).
          const adoption = adoptable(side, slot) ? await client.request({ type: 'adoptSide', side: slot, from: get().sessionId }) : null;
          if (adoption?.adopted) {
            if (adoption.suspended) log.suspends++;
            if (seq !== loadSeq) return;
            continue;
          }
          await sendFiles(
            /** @type {any} */ (client), slot, src.files, (d, n) => seq === loadSeq && progress(stage, d, n), () => seq !== loadSeq, opts.chunkSize, opts.copyJson,
          );
          // Parse a newly chosen rank folder now, so a broken file shows before the other side is read.
          if (changed.includes(side) && checkFirst(src.files) && seq === loadSeq) {
            const checking = side === 'npu' ? 'Checking NPU files' : 'Checking Bench files';
            progress(checking);
            await client.request({ type: 'check', side: slot }, [], coreProgress(seq, checking, sources));
          }
        } catch (e) {
          if (e instanceof CoreError && !e.cancelled) e.side = side;
          throw e;
        }
        if (seq !== loadSeq) return;
      }
      progress(STAGES.layout);
      const layout = await client.request({ type: 'layout' });
      if (seq !== loadSeq) return;
      listed = layout;
      ui.selectors(layout);
      progress(STAGES.run);
      o = runOptions();
      const result = unpackRunResult(await client.request({ type: 'run', session: 'staging', options: o }, [], coreProgress(seq, STAGES.run, sources)));
      if (seq !== loadSeq) return;
      store.set({
        mode: 'dump', vis: null,
        runOpts: o,
        applied: { ...get().sources },
        runLayout: layout,
        sessionGen: client.generation,
        sessionId: started.session,
        errors: {},
      });
      clearRankError(o);
      ui.cards();
      showMerge(result);
      const reapply = ui.display(result);
      ui.loaded();
      await reapply;
    } catch (e) {
      if (seq !== loadSeq || (e instanceof CoreError && e.cancelled)) return;
      const s = get();
      // A lone Bench folder is loaded into the core's npu slot (a load has a folder on some side).
      if (e instanceof CoreError && e.side) e.side = sideOfSlot(e.side, s.sources);
      const where = errorPlace(e, changed);
      const message = e instanceof Error ? e.message : String(e);
      setError(where, message);
      client.request({ type: 'discardStaging' }).catch(() => {});
      // A broken rank folder of a tree: its entry in the selectors says so, and the tree's other
      // ranks stay listed to be chosen (the next choice loads the folders again, with that rank).
      const keepListed = !!listed && several(listed) && noteRankError(e, o);
      // Keep showing (and using) the previous result; the new choice stays on its card with the error,
      // so that choosing the other side next loads both.
      if (!keepListed) {
        if (s.runLayout) ui.selectors(s.runLayout);
        if (s.result && s.mode === 'dump') showMerge(s.result);
      }
      if (s.mode === 'dump') {
        ui.cards({
          npu: s.sources.npu !== s.applied.npu ? 'not shown: see the error' : undefined,
          bench: s.sources.bench !== s.applied.bench ? 'not shown: see the error' : undefined,
        });
      }
      ui.failed();
      log.errors.push({ where, message });
      // The worker trapped (out of memory) and took the shown result's session with it.
      if (e instanceof CoreError && e.fatal) await revive(seq);
    } finally {
      if (seq === loadSeq) {
        store.set({ running: false });
        ui.matchBlocked();
        finished();
      }
    }
  }

  /**
   * After the core trapped (e.g. out of memory on a too large dump) the worker is replaced and the
   * shown result's session is gone. The result stays drawn; this reads its folders again into the
   * fresh worker and re-runs them with the same options, then re-applies the matches that differ
   * (manual ones), so that details, matching and exports work again. If the result cannot be made
   * again exactly (files changed), the details ask for the folders instead.
   * @param {number} seq the failed load's sequence number (a newer load cancels this)
   * @returns {Promise<boolean>} whether the shown result's session is back
   */
  async function revive(seq) {
    const s = get();
    const r = s.result;
    const o = s.runOpts;
    const { npu, bench } = s.applied;
    if (!r || !o || s.mode !== 'dump' || (!npu && !bench)) return false;
    try {
      progress('Restoring the shown result');
      await client.start();
      /** @type {[Side, Source][]} */
      const slots = [];
      if (npu) slots.push(['npu', npu]);
      if (bench) slots.push([npu ? 'bench' : 'npu', bench]);
      const started = await client.request({ type: 'newSession', roots: Object.fromEntries(slots.map(([slot, src]) => [slot, src.root])) });
      for (const [slot, src] of slots) await sendFiles(/** @type {any} */ (client), slot, src.files, () => {}, () => seq !== loadSeq, opts.chunkSize, opts.copyJson);
      if (seq !== loadSeq) return false;
      const again = unpackRunResult(await client.request({ type: 'run', session: 'staging', options: o }));
      if (seq !== loadSeq || get().result !== r || again.npu.matched.length !== r.npu.matched.length) return false;
      const matched = again.npu.matched;
      if (r.bench && again.bench) {
        /** @type {import('../protocol.js').MatchOp[]} */
        const ops = [];
        for (let i = 0; i < matched.length; i++) {
          if (matched[i] !== r.npu.matched[i] && matched[i] >= 0) ops.push({ op: 'unmatch', side: 'npu', index: i });
        }
        for (let i = 0; i < matched.length; i++) {
          const want = r.npu.matched[i];
          if (matched[i] !== want && want >= 0) ops.push({ op: 'match', npu: i, bench: want, recursive: false });
        }
        if (ops.length) {
          const ch = /** @type {import('../protocol.js').Changes} */ (await client.request({ type: 'match', ops }));
          for (const [i, , m] of ch.npu) matched[i] = m;
        }
      }
      if (seq !== loadSeq || get().result !== r) return false;
      for (let i = 0; i < matched.length; i++) if (matched[i] !== r.npu.matched[i]) return false;
      store.set({ sessionGen: client.generation, sessionId: started.session });
      ui.revived();
      return true;
    } catch {
      // The details say to reload the folders (generation mismatch).
      return false;
    }
  }

  /** Re-runs the current session with new options (no file reading). */
  async function rerun() {
    const s = get();
    if (s.mode === 'vis') return runVis();
    const same = s.sources.npu === s.applied.npu && s.sources.bench === s.applied.bench;
    if (!s.result || !same || s.sessionGen !== client.generation || s.running) return load([]);
    const seq = ++loadSeq;
    ui.stopDiagnosis();
    store.set({ running: true, phase: 'loading' });
    clearErrors(['load', 'mapping', 'parallel']);
    /** @type {RunOptions | null} */
    let o = null;
    try {
      progress(STAGES.run);
      o = runOptions();
      const result = unpackRunResult(await client.request({ type: 'run', session: 'current', options: o }, [], coreProgress(seq, STAGES.run, s.applied)));
      if (seq !== loadSeq) return;
      store.set({ runOpts: o });
      clearRankError(o);
      // A side's card may hold the message of a rank chosen before: this one ran.
      clearErrors(['npu', 'bench']);
      showMerge(result);
      await ui.display(result);
    } catch (e) {
      if (seq !== loadSeq || (e instanceof CoreError && e.cancelled)) return;
      const msg = e instanceof Error ? e.message : String(e);
      const where = errorPlace(e, []);
      setError(where, msg);
      log.errors.push({ where, message: msg });
      // A broken rank folder: its entry is marked, and the selectors show the shown result's step and rank again.
      const shown = get().runOpts;
      if (noteRankError(e, o) && shown) ui.choose(shown.step, shown.mergedRank ?? shown.rank);
    } finally {
      if (seq === loadSeq) finished();
    }
  }

  /** The step and rank of the opened msprobe file to show (the selectors', else its first). */
  function visPair() {
    const sel = ui.selected();
    const v = get().vis;
    return { step: sel.step ?? v?.steps[0] ?? 0, rank: sel.rank ?? v?.ranks[0] ?? 0 };
  }

  /** Opens a msprobe output file (`.vis.db`, legacy `.vis`). @param {File} file */
  async function openVis(file) {
    const seq = ++loadSeq;
    if (get().running) client.restart().catch(() => {});
    store.set({ running: true, phase: 'loading' });
    clearErrors(['vis', 'load']);
    try {
      progress(STAGES.openVis);
      await client.start();
      const bytes = await file.arrayBuffer();
      const sqlWasm = await host.sqlWasm();
      const meta = await client.request({ type: 'openVis', name: file.name, bytes, sqlWasm }, [bytes, sqlWasm]);
      if (seq !== loadSeq) return;
      /** @type {LayoutPair} */
      const layout = {
        npu: { kind: meta.steps.length > 1 ? 'steps' : meta.ranks.length > 1 ? 'ranks' : 'files', steps: meta.steps, ranks: meta.ranks },
        bench: null,
      };
      store.set({
        mode: 'vis', vis: meta,
        sources: { npu: null, bench: null },
        applied: { npu: null, bench: null },
        sessionGen: client.generation,
        sessionId: -1,
        runLayout: layout,
        rankErrors: new Map(),
      });
      // A new file starts at its first step and rank.
      ui.selectors(null);
      ui.selectors(layout);
      clearErrors(['npu', 'bench']);
      ui.cardsText(t('not used: showing {file}', { file: file.name }));
      ui.visText(`${file.name} — ${meta.kind === 'db' ? '.vis.db' : t('.vis JSON (msprobe ≤ 8.1)')}`);
      const { step, rank } = visPair();
      const result = unpackRunResult(await client.request({ type: 'runVis', step, rank }));
      if (seq !== loadSeq) return;
      ui.display(result);
      ui.loaded();
    } catch (e) {
      visFailed(seq, e);
    } finally {
      if (seq === loadSeq) finished();
    }
  }

  /**
   * A failed `.vis` request, unless a newer load replaced it or it was cancelled: the message on the
   * file's card and in the log.
   * @param {number} seq @param {unknown} e
   */
  function visFailed(seq, e) {
    if (seq !== loadSeq || (e instanceof CoreError && e.cancelled)) return;
    const msg = e instanceof Error ? e.message : String(e);
    setError('vis', msg);
    log.errors.push({ where: 'vis', message: msg });
  }

  /** Shows another step/rank of the opened file. */
  async function runVis() {
    const seq = ++loadSeq;
    store.set({ running: true, phase: 'loading' });
    setError('vis');
    try {
      progress(STAGES.openVis);
      const { step, rank } = visPair();
      const result = unpackRunResult(await client.request({ type: 'runVis', step, rank }));
      if (seq !== loadSeq) return;
      ui.display(result);
    } catch (e) {
      visFailed(seq, e);
    } finally {
      if (seq === loadSeq) finished();
    }
  }

  /** Empties a side's card (the *Clear* button; the next load has no folder on that side). @param {Side} side */
  function clearSource(side) {
    store.set((s) => ({ sources: { ...s.sources, [side]: null } }));
    ui.cards();
    setError(side);
  }

  /**
   * A folder the user chose for a side. While the other side still holds the demo's folder, the user's
   * folder replaces the demo as a whole: the demo's other side is cleared (as its *Clear* does), so the
   * load shows the user's folder alone (a build graph) instead of comparing it with an unrelated demo
   * dump, whose layout may not even agree; the folder then chosen for the other side compares with it
   * (an NPU folder shown alone is adopted from this load's session, not read again). The demo's mapping
   * leaves the choices: a user's folders are never compared under it.
   * @param {Side} side @param {Source} src
   * @returns {Promise<void> | null} the load, or null when nothing was loaded
   */
  function setSource(side, src) {
    if (!src.files.length) {
      setError(side, `${src.label}: no msprobe .json files (dump.json, construct.json, stack.json) found`);
      return null;
    }
    if (!confirmDiscard('Choosing another folder')) return null;
    const s = get();
    const other = side === 'npu' ? 'bench' : 'npu';
    // The demo's mapping never applies to the user's folders (even after both demo sides were cleared).
    if (s.sources[other]?.demo || s.sources[side]?.demo || s.mappings.some((m) => m.key === 'demo')) ui.dropDemoMapping();
    if (s.sources[other]?.demo) clearSource(other);
    store.set((st) => ({ sources: { ...st.sources, [side]: src } }));
    ui.cards();
    return load([side]);
  }

  /** Loads the bundled demo pair, with its mapping. */
  async function loadDemo() {
    try {
      progress('Reading the demo');
      const demo = await host.loadDemo();
      store.set({ sources: { npu: { ...demo.npu, root: demo.npu.label, demo: true }, bench: { ...demo.bench, root: demo.bench.label, demo: true } } });
      ui.cards();
      if (demo.mapping) ui.addMapping({ key: 'demo', name: `demo: ${demo.mapping.name}`, text: demo.mapping.text });
      await load(['npu', 'bench']);
    } catch (e) {
      store.set((s) => ({ progress: null, phase: s.result ? 'ready' : 'empty' }));
      setError('load', `could not load the demo: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /**
   * Before an action that would drop the hand-made pairs for good (other folders, the demo, a
   * msprobe file): asks, naming how many. Pairs of other steps/ranks count too (kept by name).
   * @param {string} action what the user did, for the question
   */
  function confirmDiscard(action) {
    const s = get();
    let n = s.manual.size;
    for (const [k, v] of s.kept) if (k !== s.runKey) n += v.length;
    if (!n) return true;
    const ok = ui.confirm(t('{action} discards your {n} manual match(es). Save them first with Manual match → Save (.vis.config). Discard them?', { action: t(action), n }));
    if (ok) opts.forgetManual?.();
    return ok;
  }

  return { load, rerun, revive, openVis, runVis, setSource, clearSource, loadDemo, confirmDiscard, setError, runOptions, visPair, log, get seq() { return loadSeq; } };
}
