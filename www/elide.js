// @ts-check
// Eliding long node names in the middle: msprobe names share long prefixes
// (`Module.0.module.module.image_encoder.…`) and differ at the end, so a name cut at its end shows the
// same text for many nodes. A name that does not fit keeps its first segment and as much of its
// tail as fits (starting at a segment boundary when that costs little), with "…" between them; the
// full name goes in the element's title.

const ELLIPSIS = '…';
/** Separator of the two names of a manual pair in the pairs list. */
export const PAIR_SEP = ' ⇄ ';

/**
 * The text elided in the middle to fit `maxW`, as measured by `measure`.
 * @param {string} text
 * @param {number} maxW
 * @param {(s: string) => number} measure
 */
export function elideMiddle(text, maxW, measure) {
  if (measure(text) <= maxW) return text;
  const pair = text.indexOf(PAIR_SEP);
  if (pair > 0) return elidePair(text.slice(0, pair), text.slice(pair + PAIR_SEP.length), maxW, measure);
  return elideOne(text, maxW, measure);
}

/**
 * Two names side by side: each gets half the room, and the room one does not need goes to the other.
 * @param {string} a @param {string} b @param {number} maxW @param {(s: string) => number} measure
 */
function elidePair(a, b, maxW, measure) {
  const room = Math.max(0, maxW - measure(PAIR_SEP));
  const wa = measure(a);
  const wb = measure(b);
  let ra = room / 2;
  let rb = room / 2;
  if (wa < ra) rb = room - wa;
  else if (wb < rb) ra = room - wb;
  return `${wa <= ra ? a : elideOne(a, ra, measure)}${PAIR_SEP}${wb <= rb ? b : elideOne(b, rb, measure)}`;
}

/** Trailing segments that say little (`.forward.0`, `.0.backward`): the call index and the pass. */
const BORING_TAIL = /^(.*?[^.])((?:\.(?:\d+|forward|backward|parameters_grad))+)$/;
/** The pass words of a shortened tail: short, but a node's forward, backward and parameter
 * gradients still read differently (`….0`, `….bwd.0`, `….grad.0`). */
const PASS_WORD = { forward: '', backward: 'bwd', parameters_grad: 'grad' };

/**
 * One name. Its boring tail (`.forward.0`) is kept whole when it takes at most 60% of the room (40% for the long
 * `.parameters_grad.0`),
 * else only its call index (`….0`), and with very little room none of it; the rest is elided in
 * the middle.
 * @param {string} text @param {number} maxW @param {(s: string) => number} measure
 */
function elideOne(text, maxW, measure) {
  if (measure(text) <= maxW) return text;
  const m = BORING_TAIL.exec(text);
  if (m) {
    const [, core, suffix] = m;
    const long = suffix.includes('parameters_grad') ? 0.4 : 0.6;
    if (measure(suffix) <= long * maxW) return elideCore(core, maxW - measure(suffix), measure) + suffix;
    const words = suffix
      .split('.')
      .filter((x) => x !== '')
      .map((x) => (/^\d+$/.test(x) ? x : PASS_WORD[/** @type {keyof typeof PASS_WORD} */ (x)] ?? x))
      .filter((x) => x !== '');
    const short = words.length ? `${ELLIPSIS}.${words.join('.')}` : ELLIPSIS;
    if (measure(short) <= 0.3 * maxW) return elideCore(core, maxW - measure(short), measure) + short;
    // Very little room: the end of the name proper (`…mul__…`), never just `…forward`.
    return elideCore(core, maxW - measure(ELLIPSIS), measure) + ELLIPSIS;
  }
  return elideCore(text, maxW, measure);
}

/**
 * The first segment (when it takes at most a quarter), "…", and the longest tail that fits.
 * @param {string} text @param {number} maxW @param {(s: string) => number} measure
 */
function elideCore(text, maxW, measure) {
  if (measure(text) <= maxW) return text;
  const ellW = measure(ELLIPSIS);
  if (maxW <= ellW) return maxW > 0 ? ELLIPSIS : '';
  // Head: the first segment with its dot (`Module.`, `Tensor.`), when it takes at most a quarter.
  const dot = text.indexOf('.');
  let head = dot > 0 ? text.slice(0, dot + 1) : '';
  if (measure(head) > (maxW - ellW) / 4) head = '';
  const room = maxW - ellW - measure(head);
  // Longest tail that fits (binary search on its length).
  let lo = 0;
  let hi = text.length - head.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure(text.slice(text.length - mid)) <= room) lo = mid;
    else hi = mid - 1;
  }
  let tail = text.slice(text.length - lo);
  // Start the tail at a word (after `.` or `_`, or at a capital after a small letter) when that
  // drops at most half of it and leaves 3 characters: `…Embedding`, not `…delEmbedding`.
  for (let k = 1; k <= tail.length / 2 && k <= tail.length - 3; k++) {
    const a = tail[k - 1];
    const b = tail[k];
    if (a === '.' || (a === '_' && b !== '_') || (a >= 'a' && a <= 'z' && b >= 'A' && b <= 'Z')) {
      tail = tail.slice(k);
      break;
    }
  }
  return head + ELLIPSIS + tail;
}

/** @type {CanvasRenderingContext2D | null} */
let elideCtx = null;
let elideFont = '';
/** @type {Map<string, string>} */
const elideCache = new Map();

/** Text width in a CSS font (canvas measureText). @param {string} font @returns {(s: string) => number} */
function elideMeasurer(font) {
  if (!elideCtx) elideCtx = /** @type {CanvasRenderingContext2D} */ (document.createElement('canvas').getContext('2d'));
  if (elideFont !== font) {
    elideCtx.font = font;
    elideFont = font;
  }
  const c = elideCtx;
  return (s) => c.measureText(s).width;
}

/** The CSS font of an element, for measuring its text. @param {Element} el */
export function fontOf(el) {
  const cs = getComputedStyle(el);
  return `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
}

/**
 * A text fitted to `width` CSS px in `font`, elided in the middle (cached). The callers compute the
 * width from their own layout, so fitting never reads the DOM's layout; `width <= 0` (not laid
 * out yet) leaves the text whole.
 * @param {string} text @param {number} width @param {string} font
 */
export function fitText(text, width, font) {
  if (!(width > 0)) return text;
  const key = `${font}\u0000${Math.floor(width)}\u0000${text}`;
  let out = elideCache.get(key);
  if (out === undefined) {
    // 1 px of slack against sub-pixel differences between canvas and layout.
    out = elideMiddle(text, Math.floor(width) - 1, elideMeasurer(font));
    if (elideCache.size > 20000) elideCache.clear();
    elideCache.set(key, out);
  }
  return out;
}
