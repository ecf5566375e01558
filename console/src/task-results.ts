import { h } from "./dom.js";
import { downloadName, imageSource } from "./format.js";
import { imageBlob } from "./image-bytes.js";
import type { ViewerImage } from "./image-viewer.js";
import type { Task, TaskImage } from "./task-types.js";
import { zipStore, type ZipEntry } from "./zip.js";

export interface ResultsOptions {
  /** The task's images with links the page may fetch (for "Download all"). */
  fetchable(task: Task): Promise<TaskImage[]>;
  /** Opens the images full size, on image `index`; `from` gets the focus back. */
  view(images: readonly ViewerImage[], index: number, from: HTMLElement): void;
  /** "Edit image N": offered when given. */
  onEditImage?(index: number): void;
}

/**
 * A finished task's images: each opens full size on a click or Enter, with
 * its download link (and "Edit image N" where offered); "Download all" when
 * there are several.
 */
export function resultNodes(task: Task, options: ResultsOptions): Node[] {
  const images = task.data ?? [];
  const about = task.prompt ? `: ${task.prompt.slice(0, 120)}` : "";
  const shown: ViewerImage[] = [];
  const items = images.map((image, index) => {
    const source = imageSource(image);
    const label = `Image ${index + 1} of ${images.length}`;
    if (!source) {
      return h("li", {}, h("p", { class: "hint" }, `${label}: open the task to see it.`));
    }
    const at = shown.length;
    const name = downloadName(task, index, source);
    shown.push({ source, alt: `${label}${about}`, downloadName: name });
    const open = h(
      "button",
      { type: "button", class: "image-open", "aria-label": `View image ${index + 1} full size` },
      h("img", { src: source, alt: `${label}${about}`, "data-kind": "result" }),
    );
    open.addEventListener("click", () => options.view(shown, at, open));
    const edit = options.onEditImage
      ? h("button", { type: "button", class: "secondary" }, `Edit image ${index + 1}`)
      : undefined;
    edit?.addEventListener("click", () => options.onEditImage?.(index));
    return h(
      "li",
      {},
      h(
        "figure",
        {},
        open,
        h(
          "figcaption",
          { class: "actions" },
          h("a", { href: source, download: name, class: "button" }, `Download image ${index + 1}`),
          edit,
        ),
      ),
    );
  });
  const nodes: Node[] = [h("ul", { class: "results" }, ...items)];
  if (shown.length > 1) nodes.push(downloadAllControl(task, options));
  return nodes;
}

/** "Download all": the images in one ZIP file, `task_….zip`, made in the page. */
function downloadAllControl(task: Task, options: ResultsOptions): HTMLElement {
  const button = h("button", { type: "button", class: "secondary" }, "Download all (ZIP)");
  const status = h("span", { class: "hint", role: "status" });
  let busy = false;
  button.addEventListener("click", () => {
    if (busy) return;
    busy = true;
    button.setAttribute("aria-busy", "true");
    status.textContent = "Packing the images…";
    options
      .fetchable(task)
      .then((images) => zipOfTask({ ...task, data: images }))
      .then((zip) => {
        saveFile(zip, `${task.id}.zip`);
        status.textContent = `Saved ${task.id}.zip.`;
      })
      .catch((err: unknown) => {
        status.textContent = `Could not pack them: ${err instanceof Error ? err.message : String(err)} Download them one by one.`;
      })
      .finally(() => {
        busy = false;
        button.removeAttribute("aria-busy");
      });
  });
  return h("div", { class: "actions download-all" }, button, status);
}

/** The task's images as a ZIP archive, each under the name its own download link uses. */
export async function zipOfTask(task: Task): Promise<Blob> {
  const entries: ZipEntry[] = [];
  const modified = new Date((task.completed_at ?? task.created) * 1000);
  for (const [index, image] of (task.data ?? []).entries()) {
    const source = imageSource(image);
    if (!source) continue;
    const bytes = new Uint8Array(await (await imageBlob(image)).arrayBuffer());
    entries.push({ name: downloadName(task, index, source), bytes, modified });
  }
  return new Blob([zipStore(entries)], { type: "application/zip" });
}

/** Saves `blob` as a download named `name`, through a `blob:` link clicked once. */
export function saveFile(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  // The download has its own reference by now; the URL would only keep the bytes alive.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
