import { h, uniqueId } from "./dom.js";

/** An image the viewer shows. */
export interface ViewerImage {
  source: string;
  alt: string;
  /** The file name its Download link saves it under. */
  downloadName: string;
}

export interface ImageViewerOptions {
  /** "Edit this image": offered when given. */
  onEdit?(index: number): void;
}

/**
 * A task's images full size in a modal `<dialog>`: Escape closes it (as
 * any modal dialog), the arrow keys and the Previous / Next buttons go
 * round the images, and the focus goes back to the image it was opened from.
 */
export function createImageViewer(options: ImageViewerOptions = {}) {
  const titleId = uniqueId("viewer-title");
  const title = h("h3", { id: titleId, class: "viewer-title" });
  const image = h("img", { class: "viewer-image", alt: "" });
  const previous = h("button", { type: "button", class: "secondary" }, "Previous");
  const next = h("button", { type: "button", class: "secondary" }, "Next");
  const download = h("a", { class: "button", href: "" }, "Download");
  const edit = h("button", { type: "button", class: "secondary" }, "Edit this image");
  const close = h("button", { type: "button", class: "primary" }, "Close");
  edit.hidden = !options.onEdit;
  const dialog = h(
    "dialog",
    { class: "viewer", "aria-labelledby": titleId },
    h(
      "div",
      { class: "viewer-bar" },
      title,
      h("div", { class: "actions" }, previous, next, download, edit, close),
    ),
    h("div", { class: "viewer-frame" }, image),
  );

  let images: readonly ViewerImage[] = [];
  let index = 0;
  let opener: HTMLElement | undefined;
  const show = (at: number) => {
    index = (at + images.length) % images.length;
    const shown = images[index]!;
    image.src = shown.source;
    image.alt = shown.alt;
    download.href = shown.source;
    download.setAttribute("download", shown.downloadName);
    title.textContent = `Image ${index + 1} of ${images.length}`;
    previous.hidden = next.hidden = images.length < 2;
  };
  previous.addEventListener("click", () => show(index - 1));
  next.addEventListener("click", () => show(index + 1));
  close.addEventListener("click", () => dialog.close());
  edit.addEventListener("click", () => {
    dialog.close();
    options.onEdit?.(index);
  });
  dialog.addEventListener("keydown", (event) => {
    if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
      event.preventDefault();
      show(index + (event.key === "ArrowLeft" ? -1 : 1));
    }
  });
  // A click on the backdrop (outside the dialog's box) closes it too.
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog) dialog.close();
  });
  dialog.addEventListener("close", () => {
    if (opener?.isConnected) opener.focus();
    opener = undefined;
  });

  return {
    element: dialog,
    /** Opens on image `at` of `shown`; `from`: the control that gets the focus back. */
    open(shown: readonly ViewerImage[], at: number, from: HTMLElement): void {
      if (shown.length === 0) return;
      images = shown;
      opener = from;
      show(at);
      if (!dialog.isConnected) document.body.append(dialog);
      dialog.showModal();
      close.focus();
    },
    dispose(): void {
      if (dialog.open) dialog.close();
      dialog.remove();
    },
  };
}
