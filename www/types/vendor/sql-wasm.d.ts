/* Types of sql.js as www/worker.js imports it (`./vendor/sql-wasm.js`, generated into dist/ by
   scripts/build-site.mjs from node_modules/sql.js); only what www/visfile.js uses. */
export interface SqlStatement {
  bind(params: unknown[]): boolean;
  step(): boolean;
  get(): unknown[];
  free(): boolean;
}
export interface SqlDatabase {
  prepare(sql: string): SqlStatement;
  close(): void;
}
export interface SqlJsStatic {
  Database: new (data?: Uint8Array) => SqlDatabase;
}
export default function initSqlJs(config?: { wasmBinary?: ArrayBuffer | Uint8Array }): Promise<SqlJsStatic>;
