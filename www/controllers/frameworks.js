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
