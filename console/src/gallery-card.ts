import { h } from "./dom.js";
import {
  askedSize,
  cardPicture,
  formatTime,
  imageCount,
  pixelSize,
  statusLabel,
  statusTone,
} from "./format.js";
import { routeHash } from "./routes.js";
import type { Task } from "./task-types.js";

/** A task's card in the gallery, updated in place as the task moves on. */
export interface GalleryCard {
  element: HTMLLIElement;
  /** "Select": for deleting several tasks at once. */
  checkbox: HTMLInputElement;
  task(): Task;
  update(task: Task): void;
  /** A `b64_json` task's picture, read from the task itself; its pixel size as given. */
  setPicture(source: string, width: number, height: number): void;
  /** Its picture is only in the task itself (`GET`), not in the list. */
  needsTask(): boolean;
}

/**
 * A card: a link to the task with its picture (the first image, or a
 * running task's latest partial image), status, prompt, time, model and
 * size (as asked, and the image's pixel size once it is loaded), and a
 * checkbox to select it. The parts are updated in place, so a card that is
 * focused or checked stays so while the gallery follows the task.
 */
export function createCard(first: Task): GalleryCard {
  let task = first;
  /** Which picture is shown: "final", or the partial images' count; "" none. */
  let shownKey = "";
  let pixels = "";
  const image = h("img", { alt: "", class: "thumb", hidden: true });
  const empty = h("span", { class: "thumb thumb-empty", "aria-hidden": "true" });
  const badge = h("span", { class: "badge" });
  const prompt = h("span", { class: "card-prompt" });
  const time = h("span", { class: "card-meta" });
  const size = h("span", { class: "card-meta card-size" });
  const checkbox = h("input", { type: "checkbox", name: "select" });
  const hiddenName = h("span", { class: "visually-hidden" });
  const element = h(
    "li",
    { class: "card-item" },
    h(
      "a",
      { class: "card", href: routeHash({ name: "task", id: first.id }) },
      image,
      empty,
      badge,
      prompt,
      time,
      size,
    ),
    h("label", { class: "card-select" }, checkbox, "Select", hiddenName),
  );
  element.dataset.taskId = first.id;

  const renderSize = () => {
    const parts = [task.kind === "edit" ? "edit" : "", task.model, askedSize(task), pixels];
    size.textContent = [...parts, imageCount(task)].filter(Boolean).join(" · ");
  };
  const showPicture = (source: string, key: string) => {
    shownKey = key;
    image.src = source;
    image.hidden = false;
    empty.hidden = true;
  };
  image.addEventListener("load", () => {
    // A partial image is a draft; only the result's size is the image's.
    if (shownKey !== "final" || pixels) return;
    pixels = pixelSize(image.naturalWidth, image.naturalHeight);
    renderSize();
  });

  const update = (next: Task) => {
    task = next;
    badge.className = `badge badge-${statusTone(task)}`;
    badge.textContent = statusLabel(task);
    prompt.textContent = task.prompt ?? task.id;
    hiddenName.textContent = `task: ${task.prompt?.slice(0, 80) ?? task.id}`;
    time.textContent = formatTime(task.created);
    const picture = cardPicture(task);
    const key = picture.final ? "final" : String(task.partial_images?.length ?? 0);
    if (picture.source && key !== shownKey) showPicture(picture.source, key);
    renderSize();
  };
  update(first);
  return {
    element,
    checkbox,
    task: () => task,
    update,
    setPicture(source, width, height) {
      pixels = pixelSize(width, height);
      showPicture(source, "final");
      renderSize();
    },
    needsTask: () => shownKey !== "final" && cardPicture(task).needsTask,
  };
}
