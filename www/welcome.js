// @ts-check
// The one-line welcome shown above the panes while the bundled demo is on screen: what it is and how
// to load one's own folders. Hidden as soon as something else is shown, or for good by its ×.

let welcomeDismissed = false;

/**
 * Shows or hides the welcome line (`#welcome`) for the shown result.
 * @param {boolean} demo the shown result is the bundled demo
 */
export function showWelcome(demo) {
  const el = document.getElementById('welcome');
  if (!el) return;
  const close = document.getElementById('welcome-close');
  if (close && !close.dataset.bound) {
    close.dataset.bound = '1';
    close.addEventListener('click', () => {
      welcomeDismissed = true;
      el.hidden = true;
    });
  }
  el.hidden = !demo || welcomeDismissed;
}
