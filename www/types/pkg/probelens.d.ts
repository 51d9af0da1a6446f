/* Types of the wasm-bindgen output (www/pkg/probelens.js) for `npm run typecheck` before the wasm
   is built; tsc prefers the generated www/pkg/probelens.d.ts when it exists (jsconfig rootDirs).
   Keep in step with src/wasm/mod.rs. */
export class Session {
  free(): void;
  constructor();
  static version(): string;
  static setHeapLimit(bytes: number): void;
  static heapFailure(): number;
  static clearHeapFailure(): void;
  static heapWork(): string;
  static setSliceBytes(bytes: number): void;
  setRootName(side: string, name: string): void;
  addFile(side: string, path: string, bytes: Uint8Array | number[]): void;
  beginFile(side: string, path: string, total: number): void;
  appendChunk(side: string, path: string, bytes: Uint8Array | number[]): void;
  addLazyFile(side: string, path: string, size: number): void;
  setFileReader(reader: Function): void;
  adoptSide(from: Session, side: string): void;
  clearSide(side: string): void;
  parsedRanks(): number;
  check(side: string): void;
  layout(): string;
  run(options: string): string;
  columns(side: string): Uint8Array;
  node(side: string, index: number): string;
  matchNodes(npu_index: number, bench_index: number, recursive: boolean): string;
  matchMany(pairs: string): string;
  unmatch(side: string, index: number): string;
  static defaultMinScore(): number;
  suggest(min_score: number): string;
  acceptSuggestions(min_score: number): string;
  exportMapping(current_yaml: string, pairs: string): string;
  exportMappingReport(current_yaml: string, pairs: string): string;
  static checkMapping(name: string, text: string): string;
}
export type SyncInitInput = BufferSource | WebAssembly.Module;
export function initSync(module: { module: SyncInitInput } | SyncInitInput): unknown;
export default function __wbg_init(module_or_path?: unknown): Promise<unknown>;
