// @ts-check
// The one DOM helper the page's views share.

/** The element with this id (the page's markup has it: a missing one is a bug). @param {string} id */
export function $(id) {
  const e = document.getElementById(id);
  if (!e) throw new Error(`missing #${id}`);
  return e;
}
