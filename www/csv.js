// @ts-check
// CSV text (RFC 4180) and msprobe's compare-table rows built from node details. No DOM: the worker
// builds the "all tensors" table with it, the page the table of one node.

/** @typedef {import('./protocol.js').NodeDetail} NodeDetail */

/** @param {string} v */
function csvCell(v) {
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

/** @param {string[][]} rows @returns {string} */
export function toCsv(rows) {
  return rows.map((r) => r.map(csvCell).join(',')).join('\r\n') + '\r\n';
}

/** Columns of msprobe's compare table after the identity columns, per task. */
const TASK_COLUMNS = /** @type {Record<string, string[]>} */ ({
  summary: ['Max diff', 'Min diff', 'Mean diff', 'L2norm diff', 'MaxRelativeErr', 'MinRelativeErr', 'MeanRelativeErr', 'NormRelativeErr'],
  md5: [],
  all: ['Cosine', 'EucDist', 'MaxAbsErr', 'MaxRelativeErr', 'One Thousandth Err Ratio', 'Five Thousandths Err Ratio'],
});

/**
 * The header of the compare CSV for a task (`summary`, `md5`, `all`/tensor).
 * @param {string} task
 */
export function compareHeader(task) {
  const id = ['NPU Name', 'Bench Name', 'NPU Dtype', 'Bench Dtype', 'NPU Tensor Shape', 'Bench Tensor Shape'];
  if (task === 'md5') return [...id, 'NPU MD5', 'Bench MD5', 'Requires_grad Consistent', 'Result', 'Err_message'];
  const diff = TASK_COLUMNS[task] ?? TASK_COLUMNS.all;
  return [
    ...id, ...diff,
    'NPU max', 'NPU min', 'NPU mean', 'NPU l2norm', 'Bench max', 'Bench min', 'Bench mean', 'Bench l2norm',
    'Requires_grad Consistent', 'Result', 'Err_message',
  ];
}

/** @param {NodeDetail | null} d @returns {Map<string, Map<string, string>>} */
function fieldsOf(d) {
  const m = new Map();
  if (!d) return m;
  for (const [k, fields] of [...(d.inputData ?? []), ...(d.outputData ?? [])]) m.set(k, new Map(fields));
  return m;
}

/**
 * The compare rows of one matched node pair (one per NPU tensor), as msprobe's compare CSV has them.
 * @param {string} task
 * @param {NodeDetail} npu
 * @param {NodeDetail | null} bench
 * @returns {string[][]}
 */
export function compareRows(task, npu, bench) {
  const nf = fieldsOf(npu);
  const bf = fieldsOf(bench);
  const header = compareHeader(task);
  /** @type {string[][]} */
  const out = [];
  for (const r of npu.rows ?? []) {
    if (!r.npu) continue;
    const a = nf.get(r.npu) ?? new Map();
    const b = (r.bench && bf.get(r.bench)) || new Map();
    const na = (/** @type {Map<string, string>} */ m, /** @type {string} */ k) => m.get(k) ?? 'N/A';
    /** @type {Record<string, string>} */
    const v = {
      'NPU Name': r.npu,
      'Bench Name': r.bench ?? 'N/A',
      'NPU Dtype': na(a, 'dtype'),
      'Bench Dtype': na(b, 'dtype'),
      'NPU Tensor Shape': na(a, 'shape'),
      'Bench Tensor Shape': na(b, 'shape'),
      'NPU MD5': na(a, 'md5'),
      'Bench MD5': na(b, 'md5'),
      'NPU max': na(a, 'Max'),
      'NPU min': na(a, 'Min'),
      'NPU mean': na(a, 'Mean'),
      'NPU l2norm': na(a, 'Norm'),
      'Bench max': na(b, 'Max'),
      'Bench min': na(b, 'Min'),
      'Bench mean': na(b, 'Mean'),
      'Bench l2norm': na(b, 'Norm'),
    };
    out.push(header.map((h) => v[h] ?? a.get(h) ?? ''));
  }
  return out;
}
