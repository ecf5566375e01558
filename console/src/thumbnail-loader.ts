import { isAbort, type Api } from "./api.js";
import type { GalleryCard } from "./gallery-card.js";
import { base64Bytes } from "./image-bytes.js";

/** A picture read for a card: a small `blob:` copy of the image, and the image's own size. */
interface Thumbnail {
  url: string;
  width: number;
  height: number;
}

/** Tasks read at once; thumbnails kept (the oldest is let go past it). */
const CONCURRENT = 2;
const KEPT = 48;
const EDGE = 320;

/**
 * Pictures for the cards of `b64_json` tasks whose list item has no link:
 * the task itself is read (`GET`, which carries the base64) for a card that
 * is on screen, two at a time, and the first image is kept as a small
 * thumbnail (at most 320 px, a `blob:` URL), a bounded number of them.
 * A list with `thumbnail_url` needs none of this.
 */
export function createThumbnailLoader(api: Api) {
  const kept = new Map<string, Thumbnail>();
  /** Ids watched, waiting or being read (or that failed) since the page was shown. */
  const tracked = new Set<string>();
  const waiting: GalleryCard[] = [];
  let running = 0;
  let controller = new AbortController();
  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      const card = cards.get(entry.target);
      observer.unobserve(entry.target);
      if (card) waiting.push(card);
    }
    pump();
  });
  const cards = new WeakMap<Element, GalleryCard>();

  const pump = () => {
    while (running < CONCURRENT && waiting.length > 0) {
      const card = waiting.shift()!;
      if (!card.element.isConnected || !card.needsTask()) continue;
      running += 1;
      const { signal } = controller;
      void thumbnailOf(api, card.task().id, signal)
        .then((thumbnail) => {
          if (!thumbnail || signal.aborted) return;
          keep(card.task().id, thumbnail);
          card.setPicture(thumbnail.url, thumbnail.width, thumbnail.height);
        })
        .catch((err: unknown) => {
          if (!isAbort(err)) card.element.dataset.thumbnail = "unavailable";
        })
        .finally(() => {
          running -= 1;
          pump();
        });
    }
  };
  const keep = (id: string, thumbnail: Thumbnail) => {
    kept.set(id, thumbnail);
    for (const [oldId, old] of kept) {
      if (kept.size <= KEPT) break;
      kept.delete(oldId);
      URL.revokeObjectURL(old.url);
    }
  };

  return {
    /** Shows a kept thumbnail at once, or reads it once the card comes on screen. */
    watch(card: GalleryCard): void {
      if (!card.needsTask()) return;
      const known = kept.get(card.task().id);
      if (known) return card.setPicture(known.url, known.width, known.height);
      if (tracked.has(card.task().id)) return;
      tracked.add(card.task().id);
      cards.set(card.element, card);
      observer.observe(card.element);
    },
    /** Stops reading (the page changes); the kept thumbnails stay for the next visit. */
    stop(): void {
      observer.disconnect();
      waiting.length = 0;
      tracked.clear();
      controller.abort();
      controller = new AbortController();
    },
  };
}

/** The task's first image, made small; undefined when the task has none to give. */
async function thumbnailOf(api: Api, id: string, signal: AbortSignal) {
  const task = await api.get(id, signal);
  const b64 = task.data?.[0]?.b64_json;
  if (!b64) return undefined;
  const original = new Blob([base64Bytes(b64)]);
  const bitmap = await createImageBitmap(original);
  const { width, height } = bitmap;
  const scale = Math.min(1, EDGE / Math.max(width, height));
  const canvas = new OffscreenCanvas(
    Math.max(1, Math.round(width * scale)),
    Math.max(1, Math.round(height * scale)),
  );
  canvas.getContext("2d")!.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  bitmap.close();
  const small = await canvas.convertToBlob({ type: "image/png" });
  return { url: URL.createObjectURL(small), width, height };
}
