import { h, uniqueId } from "./dom.js";

export interface ConfirmOptions {
  title: string;
  message: string;
  /** The button that goes ahead, e.g. "Delete". */
  confirm: string;
  /** The button that does not; default "Keep". */
  cancel?: string;
}

/**
 * Asks before something that cannot be undone, in a modal `<dialog>` (not
 * `window.confirm`, which blocks the page and cannot be styled). Escape or
 * the cancel button answer no; the focus starts on the cancel button, so a
 * stray Enter deletes nothing.
 */
export function confirmDialog(options: ConfirmOptions): Promise<boolean> {
  const titleId = uniqueId("confirm-title");
  const messageId = uniqueId("confirm-message");
  const yes = h("button", { type: "button", class: "danger" }, options.confirm);
  const no = h("button", { type: "button", class: "secondary" }, options.cancel ?? "Keep");
  const dialog = h(
    "dialog",
    { class: "confirm", "aria-labelledby": titleId, "aria-describedby": messageId },
    h("h3", { id: titleId }, options.title),
    h("p", { id: messageId }, options.message),
    h("div", { class: "actions" }, yes, no),
  );
  return new Promise((resolve) => {
    let answer = false;
    yes.addEventListener("click", () => {
      answer = true;
      dialog.close();
    });
    no.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
    no.focus();
  });
}
