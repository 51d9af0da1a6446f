// @ts-check
// Gathering files from folder pickers and drops, and streaming their bytes to the worker.
import { CHUNK_SIZE } from './protocol.js';

/**
 * A file of a dump folder, with its '/'-separated path relative to the chosen root.
 * @typedef {{path: string, file: Blob, size: number}} SourceFile
 */

/**
 * The files the core reads: msprobe's JSON files (dump.json, construct.json, stack.json, ...) and,
 * for real-tensor dumps (task "tensor"), the tensors under `dump_tensor_data/` (.pt/.npy), which
 * the real-data metrics need. Anything else in the folder is skipped.
 * @param {string} path
 */
export function isDumpFile(path) {
  const base = path.slice(path.lastIndexOf('/') + 1);
  if (base.startsWith('.')) return false;
  if (/\.json$/i.test(base)) return true;
  return isTensorFile(path);
}

/**
 * A tensor file of a real-tensor dump: sent to the worker as a handle and read only when compared.
 * @param {string} path
 */
export function isTensorFile(path) {
  return /(^|\/)dump_tensor_data\/[^/]+\.(pt|npy)$/i.test(path);
}

/**
 * A file the worker keeps as a handle and the core reads itself, through the worker's reader: the
 * tensors (when compared), every `dump.json` (in slices while it is parsed, never whole), and the
 * `construct.json` and `stack.json` beside it (whole, when their folder is parsed, and freed right
 * after their own parse: never in the core's memory while the dump.json is parsed). With
 * `copyJson` (a test knob) construct.json and stack.json are sent as bytes, as other JSON files are.
 * @param {string} path
 * @param {boolean} [copyJson]
 */
export function isLazyFile(path, copyJson = false) {
  return isTensorFile(path) || (copyJson ? /(^|\/)dump\.json$/ : /(^|\/)(dump|construct|stack)\.json$/).test(path);
}

/** @param {string} path */
export function isYaml(path) {
  return /\.ya?ml$/i.test(path);
}

/**
 * Files chosen with `<input type=file webkitdirectory>`: `webkitRelativePath` starts with the name of
 * the chosen folder, which is dropped so that paths are relative to it.
 * @param {FileList | File[]} list
 * @returns {SourceFile[]}
 */
export function filesFromInput(list) {
  /** @type {SourceFile[]} */
  const out = [];
  for (const f of Array.from(list)) {
    const rel = f.webkitRelativePath || f.name;
    const slash = rel.indexOf('/');
    const path = slash >= 0 ? rel.slice(slash + 1) : rel;
    if (isDumpFile(path)) out.push({ path, file: f, size: f.size });
  }
  return sortFiles(out);
}

/** @param {SourceFile[]} files */
function sortFiles(files) {
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Reads a drop: one dropped folder becomes the root (paths inside it); loose files keep their names.
 * YAML files are returned separately (a layer mapping).
 * Must be called synchronously from the `drop` handler (the item list dies after the event).
 * @param {DataTransfer} dt
 * @returns {Promise<{files: SourceFile[], yaml: File | null, rootName: string}>}
 */
export function filesFromDrop(dt) {
  /** @type {FileSystemEntry[]} */
  const entries = [];
  /** @type {File[]} */
  const loose = [];
  for (const item of Array.from(dt.items ?? [])) {
    if (item.kind !== 'file') continue;
    const entry = typeof item.webkitGetAsEntry === 'function' ? item.webkitGetAsEntry() : null;
    if (entry) entries.push(entry);
    else {
      const f = item.getAsFile();
      if (f) loose.push(f);
    }
  }
  if (!entries.length && !loose.length) loose.push(...Array.from(dt.files ?? []));
  return (async () => {
    /** @type {SourceFile[]} */
    const files = [];
    /** @type {File | null} */
    let yaml = null;
    let rootName = '';
    const single = entries.length === 1 && entries[0].isDirectory ? entries[0] : null;
    if (single) rootName = single.name;
    for (const entry of entries) {
      const prefix = single ? single.fullPath.replace(/\/*$/, '/') : '/';
      for await (const [path, file] of walk(entry)) {
        const rel = path.startsWith(prefix) ? path.slice(prefix.length) : path.replace(/^\/+/, '');
        if (isDumpFile(rel)) files.push({ path: rel, file, size: file.size });
        else if (isYaml(rel) && !yaml && !single) yaml = file;
      }
    }
    for (const f of loose) {
      if (isDumpFile(f.name)) files.push({ path: f.name, file: f, size: f.size });
      else if (isYaml(f.name) && !yaml) yaml = f;
    }
    return { files: sortFiles(files), yaml, rootName };
  })();
}

/**
 * Walks a FileSystemEntry tree; yields [fullPath, File].
 * @param {FileSystemEntry} entry
 * @returns {AsyncGenerator<[string, File]>}
 */
async function* walk(entry) {
  if (entry.isFile) {
    const fe = /** @type {FileSystemFileEntry} */ (entry);
    const file = await new Promise((resolve, reject) => fe.file(resolve, reject));
    yield [entry.fullPath, /** @type {File} */ (file)];
    return;
  }
  if (!entry.isDirectory) return;
  const reader = /** @type {FileSystemDirectoryEntry} */ (entry).createReader();
  /** @type {FileSystemEntry[]} */
  const children = [];
  for (;;) {
    /** @type {FileSystemEntry[]} */
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) break;
    children.push(...batch);
  }
  children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const c of children) yield* walk(c);
}

/**
 * Streams the files of one side into the worker's staging session, in CHUNK_SIZE slices
 * whose ArrayBuffers are transferred (never decoded to strings). A rank folder's three JSON files
 * and tensor files are not read here: their handles go to the worker in one message, and the core
 * reads a dump.json in slices while it parses it (never the whole file at once), a construct.json
 * or stack.json when it parses it, and a tensor only when it compares it.
 * @param {import('./client.js').CoreClient} client
 * @param {import('./protocol.js').Side} side
 * @param {SourceFile[]} files
 * @param {(done: number, total: number) => void} onProgress
 * @param {() => boolean} isCancelled
 * @param {number} [chunkSize]
 * @param {boolean} [copyJson] construct.json and stack.json as bytes too (see `isLazyFile`)
 */
export async function sendFiles(client, side, files, onProgress, isCancelled, chunkSize = CHUNK_SIZE, copyJson = false) {
  const lazy = files.filter((f) => isLazyFile(f.path, copyJson));
  if (lazy.length) {
    await client.request({ type: 'fileHandles', side, files: lazy.map((f) => ({ path: f.path, file: f.file, size: f.size })) });
  }
  const read = files.filter((f) => !isLazyFile(f.path, copyJson));
  const total = read.reduce((s, f) => s + f.size, 0);
  let done = 0;
  onProgress(0, total);
  for (const f of read) {
    await client.request({ type: 'fileBegin', side, path: f.path, size: f.size });
    for (let off = 0; off < f.size; off += chunkSize) {
      if (isCancelled()) return;
      const chunk = await f.file.slice(off, Math.min(f.size, off + chunkSize)).arrayBuffer();
      await client.request({ type: 'fileChunk', side, path: f.path, chunk }, [chunk]);
      done += chunk.byteLength;
      onProgress(done, total);
    }
  }
}

/**
 * Reads a small text file (a mapping YAML).
 * @param {Blob} file
 */
export async function readText(file) {
  return new TextDecoder().decode(await file.arrayBuffer());
}
