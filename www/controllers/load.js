// @ts-check
// Load orchestration's rules, as pure functions (no DOM, no worker): which core slot holds a side's
// folder, where an error message belongs, the parallel-merge options as the CLI takes them.

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
