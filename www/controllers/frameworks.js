// @ts-check
// Which training stacks a pair of dumps comes from, recognised from their module names, and the
// bundled layer-mapping template (mappings/*.yaml) that fits the pair. No DOM, no worker.

/**
 * @typedef {'mindspeed-llm' | 'mindspeed-mm' | 'hf' | 'hf-vl' | null} Stack
 */

/**
 * The stack of one side from its node names: MindSpeed-MM (Megatron-core with `image_encoder` /
 * `text_decoder`, `MMGPTModel`, `VisionModel`), MindSpeed-LLM (Megatron-core `GPTModel` with
 * `decoder.layers`), HF transformers / LLaMA-Factory (`…ForCausalLM`, `model.layers`), HF
 * vision-language (`…ForConditionalGeneration` with `visual`); null when none fits.
 * @param {string[]} names
 * @returns {Stack}
 */
export function stackOf(names) {
  let mm = false;
  let llm = false;
  let hf = false;
  let hfvl = false;
  for (const n of names) {
    if (!n.startsWith('Module.')) continue;
    if (/\.(MMGPTModel|VisionModel|Qwen2vlVitSelfAttention)\.|\.(image_encoder|text_decoder)\./.test(n)) mm = true;
    else if (/\.GPTModel\.|\.decoder\.layers\.\d+\.TransformerLayer\./.test(n)) llm = true;
    if (/ForConditionalGeneration\.|\.visual\.blocks\.\d+\./.test(n)) hfvl = true;
    else if (/ForCausalLM\.|\.model\.layers\.\d+\.\w+DecoderLayer\./.test(n)) hf = true;
  }
  if (mm) return 'mindspeed-mm';
  if (llm) return 'mindspeed-llm';
  if (hfvl) return 'hf-vl';
  if (hf) return 'hf';
  return null;
}

/** Template per (NPU stack, Bench stack). */
const TEMPLATES = /** @type {Record<string, string>} */ ({
  'mindspeed-llm>hf': 'qwen2.5_mindspeed-llm_to_llamafactory.yaml',
  'hf>mindspeed-llm': 'qwen2.5_llamafactory_to_mindspeed-llm.yaml',
  'mindspeed-mm>hf-vl': 'qwen2.5-vl_mindspeed-mm_to_llamafactory.yaml',
  'mindspeed-mm>hf': 'qwen2.5-vl_mindspeed-mm_to_llamafactory.yaml',
  'hf-vl>mindspeed-mm': 'qwen2.5-vl_llamafactory_to_mindspeed-mm.yaml',
  'hf>mindspeed-mm': 'qwen2.5-vl_llamafactory_to_mindspeed-mm.yaml',
});

const LABELS = /** @type {Record<string, string>} */ ({
  'mindspeed-llm': 'MindSpeed-LLM',
  'mindspeed-mm': 'MindSpeed-MM',
  hf: 'HF transformers',
  'hf-vl': 'HF transformers (VL)',
});

/**
 * The bundled template that fits a pair, or null.
 * @param {string[]} npuNames @param {string[]} benchNames
 * @param {string[]} available the bundled templates' names
 * @returns {{template: string, npu: string, bench: string} | null}
 */
export function templateFor(npuNames, benchNames, available) {
  const a = stackOf(npuNames);
  const b = stackOf(benchNames);
  if (!a || !b) return null;
  const template = TEMPLATES[`${a}>${b}`];
  if (!template || !available.includes(template)) return null;
  return { template, npu: LABELS[a], bench: LABELS[b] };
}

/**
 * The offer of a bundled template: a store slice `offer` (`{template, npu, bench, now, gain}`; `gain`
 * null while it is counted, -1 when it is not) and the background count of what the template would
 * match. No DOM: it takes the store, the client (the worker's `probeRun`) and the template reader.
 * @typedef {{template: string, npu: string, bench: string, now: number, gain: number | null}} Offer
 * @param {import('../store.js').StateOf<{offer: Offer | null}>} store
 * @param {{request: (req: any) => Promise<any>}} client
 * @param {(name: string) => Promise<string>} getTemplate
 * @param {number} [probeNodes] pairs larger than this get the offer without the count
 */
export function createOfferController(store, client, getTemplate, probeNodes = 60000) {
  /** @type {Set<string>} templates the user dismissed */
  const dismissed = new Set();
  let seq = 0;
  /**
   * A result was shown: offer a template when the pair is the user's (not the demo), compared without
   * a mapping (and without -fm, which ignores one), and a bundled template fits its stacks. The count
   * runs in the background; a newer `consider` or `cancel` drops its answer.
   * @param {{names: {npu: string[], bench: string[]} | null, unmapped: boolean, matchedNow: number,
   *   templates: string[], runOptions: import('../protocol.js').RunOptions | null}} at
   * @returns {Promise<void>} settles when the count is in (or dropped)
   */
  async function consider(at) {
    const mine = ++seq;
    if (!at.names || !at.unmapped || !at.runOptions) {
      store.set({ offer: null });
      return;
    }
    const fit = templateFor(at.names.npu, at.names.bench, at.templates);
    if (!fit || dismissed.has(fit.template)) {
      store.set({ offer: null });
      return;
    }
    const big = at.names.npu.length + at.names.bench.length > probeNodes;
    store.set({ offer: { ...fit, now: at.matchedNow, gain: big ? -1 : null } });
    if (big) return;
    const opts = at.runOptions;
    try {
      const text = await getTemplate(fit.template);
      if (mine !== seq) return;
      const c = await client.request({ type: 'probeRun', options: { ...opts, layerMapping: text, layerMappingName: fit.template } });
      const o = store.get().offer;
      if (mine === seq && o?.template === fit.template) store.set({ offer: { ...o, gain: c.npu } });
    } catch {
      const o = store.get().offer;
      if (mine === seq && o) store.set({ offer: { ...o, gain: -1 } });
    }
  }
  /** The next action: a pending count is dropped (the offer stays until the next result). */
  function cancel() {
    seq++;
  }
  /** The user dismissed the offer: this template is not offered again. */
  function dismiss() {
    const o = store.get().offer;
    if (o) dismissed.add(o.template);
    store.set({ offer: null });
  }
  /** The user accepted: the offer goes; returns the template to use. */
  function accept() {
    const o = store.get().offer;
    store.set({ offer: null });
    return o?.template ?? null;
  }
  return { consider, cancel, dismiss, accept };
}
