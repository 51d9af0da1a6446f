// @ts-check
// Main-thread side of the worker protocol: typed request/response with progress callbacks,
// and cancellation by terminating and restarting the worker.

/** @typedef {import('./protocol.js').Request} Request */
/** @typedef {import('./protocol.js').Response} Response */
/** @typedef {import('./protocol.js').ProgressResponse} ProgressResponse */

/** An error answered by the worker (or caused by its termination). */
export class CoreError extends Error {
  /**
   * @param {string} message
   * @param {{side?: import('./protocol.js').Side, path?: string, stage?: string, cancelled?: boolean, fatal?: boolean}} [info]
   */
  constructor(message, info = {}) {
    super(message);
    this.name = 'CoreError';
    this.side = info.side;
    this.path = info.path;
    this.stage = info.stage;
    this.cancelled = info.cancelled ?? false;
    /** The worker trapped (out of memory, a crash) and was dropped with its session. */
    this.fatal = info.fatal ?? false;
  }
}

/**
 * Distributive Omit, so that `Omit<Request, 'id'>` keeps the union.
 * @template T
 * @template {PropertyKey} K
 * @typedef {T extends any ? Omit<T, K> : never} DistOmit
 */

export class CoreClient {
  /**
   * @param {() => Worker} makeWorker creates a fresh worker
   * @param {() => (ArrayBuffer | undefined)} wasmBytes module bytes for `initSync` (single file), or undefined to fetch
   * @param {number} [streamThreshold] files above this size are streamed into the core (default: protocol.js)
   * @param {number} [heapLimit] caps the core's memory (bytes; a test knob)
   * @param {number} [sliceBytes] size of the core's reads of a dump.json (bytes; a test knob)
   */
  constructor(makeWorker, wasmBytes, streamThreshold, heapLimit, sliceBytes) {
    this.makeWorker = makeWorker;
    this.wasmBytes = wasmBytes;
    this.streamThreshold = streamThreshold;
    this.heapLimit = heapLimit;
    this.sliceBytes = sliceBytes;
    /** @type {Worker | null} */
    this.worker = null;
    this.nextId = 1;
    /** @type {Map<number, {resolve: (v: any) => void, reject: (e: Error) => void, onProgress?: (p: ProgressResponse) => void}>} */
    this.pending = new Map();
    /** @type {Promise<void> | null} */
    this.ready = null;
    /** Incremented each time the worker is replaced; the worker's session is lost then. */
    this.generation = 0;
  }

  /** Starts the worker if needed and instantiates the core. */
  start() {
    if (this.ready) return this.ready;
    const w = this.makeWorker();
    this.worker = w;
    this.generation++;
    w.onmessage = (e) => this.onMessage(/** @type {Response} */ (e.data));
    w.onerror = (e) => {
      e.preventDefault();
      this.failAll(new CoreError(`worker failed: ${e.message || 'could not start the worker script'}`));
    };
    w.onmessageerror = () => this.failAll(new CoreError('worker sent an unreadable message'));
    const bytes = this.wasmBytes();
    this.ready = this.send({ type: 'init', wasm: bytes, streamThreshold: this.streamThreshold, heapLimit: this.heapLimit, sliceBytes: this.sliceBytes }, bytes ? [bytes] : []).then(
      () => undefined,
    );
    return this.ready;
  }

  /** True while any request is unanswered. */
  get busy() {
    return this.pending.size > 0;
  }

  /** Terminates the worker (cancelling every pending request) and starts a new one. */
  restart() {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    this.ready = null;
    this.failAll(new CoreError('cancelled', { cancelled: true }));
    return this.start();
  }

  /** @param {Error} err */
  failAll(err) {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(err);
  }

  /** @param {Response} msg */
  onMessage(msg) {
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.type === 'progress') {
      p.onProgress?.(msg);
      return;
    }
    this.pending.delete(msg.id);
    if (msg.type === 'result') p.resolve(msg.value);
    else {
      if (msg.fatal && this.worker) {
        // The core trapped: drop this worker; the next request starts a fresh one.
        this.worker.terminate();
        this.worker = null;
        this.ready = null;
        this.failAll(new CoreError(msg.message, { stage: msg.stage, fatal: true }));
      }
      p.reject(new CoreError(msg.message, { side: msg.side, path: msg.path, stage: msg.stage, fatal: msg.fatal }));
    }
  }

  /**
   * Sends one request; resolves with the result's `value`.
   * @param {DistOmit<Request, 'id'>} body
   * @param {Transferable[]} [transfer]
   * @param {(p: ProgressResponse) => void} [onProgress]
   * @returns {Promise<any>}
   */
  send(body, transfer = [], onProgress) {
    const w = this.worker;
    if (!w) return Promise.reject(new CoreError('worker not started'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onProgress });
      w.postMessage(/** @type {Request} */ ({ ...body, id }), transfer);
    });
  }

  /**
   * Like send(), after the core is ready.
   * @param {DistOmit<Request, 'id'>} body
   * @param {Transferable[]} [transfer]
   * @param {(p: ProgressResponse) => void} [onProgress]
   * @returns {Promise<any>}
   */
  async request(body, transfer = [], onProgress) {
    await this.start();
    return this.send(body, transfer, onProgress);
  }
}
