import { ApiError, createApi, type Api } from "./api.js";
import { createCreateView } from "./create-view.js";
import { h, replaceChildren } from "./dom.js";
import { createSessionState } from "./form-state.js";
import { createGalleryView } from "./gallery-view.js";
import { createKeyStore } from "./key-store.js";
import { GALLERY, parseRoute, routeHash, type Route } from "./routes.js";
import { createSignInView } from "./sign-in-view.js";
import { createTaskView } from "./task-view.js";
import type { Task } from "./task-types.js";

/** The API beside the console: `/console/` -> `/v1/`, also behind a proxy's path prefix. */
const API_BASE = new URL("../v1/", location.href).href;
const keys = createKeyStore(sessionStorage);
const state = createSessionState(sessionStorage);
const main = document.getElementById("main")!;
const account = document.getElementById("account")!;
const nav = document.getElementById("nav")!;

/** A view on screen: its root, the heading focus moves to, and how to let it go. */
interface View {
  element: HTMLElement;
  heading: HTMLElement;
  dispose(): void;
}

/** The signed-in console: the key's API and models, and its views. */
interface Session {
  api: Api;
  models: string[];
  create?: ReturnType<typeof createCreateView>;
  gallery?: ReturnType<typeof createGalleryView>;
  task?: View;
  /** The route on screen. */
  route?: Route;
  /** Where the focus goes when the next page is shown, instead of its heading. */
  focusNext?: () => void;
  /** A line the gallery shows first when it is shown next. */
  galleryNotice?: string;
  /** The gallery's page last shown: where "Gallery" and "← Gallery" go back to. */
  galleryRoute: Route;
}

let session: Session | undefined;

function signedOut(notice?: string): void {
  session?.create?.dispose();
  session?.gallery?.dispose();
  session?.task?.dispose();
  session = undefined;
  keys.clear();
  state.clear();
  replaceChildren(nav);
  replaceChildren(account);
  const view = createSignInView({
    ...(notice ? { notice } : {}),
    signIn: (key) => start(key, true),
  });
  replaceChildren(main, view.element);
  view.focus();
}

function unauthorized(error: ApiError): void {
  signedOut(`Signed out: the service refused the key (${error.message})`);
}

/**
 * Checks the key by listing its models, keeps it, and shows the console on
 * the page the URL names (a shared link lands there after signing in);
 * `signedIn`: just now, from the sign-in page (the focus moves to the page shown).
 */
async function start(key: string, signedIn = false): Promise<void> {
  const api = createApi({ base: API_BASE, key });
  const models = (await api.models()).filter((id) => id.startsWith("gpt-image-"));
  keys.set(key);
  const signOut = h("button", { type: "button", class: "secondary" }, "Sign out");
  signOut.addEventListener("click", () => signedOut("Signed out."));
  replaceChildren(account, signOut);
  replaceChildren(
    nav,
    h("a", { href: routeHash({ name: "create" }), "data-route": "create" }, "New image"),
    h("a", { href: routeHash(GALLERY), "data-route": "gallery" }, "Gallery"),
  );
  session = { api, models, galleryRoute: GALLERY };
  show(parseRoute(location.hash), !signedIn);
}

/** The create view, made once: its form and live task survive a visit elsewhere. */
function createView(s: Session) {
  s.create ??= createCreateView({
    api: s.api,
    models: s.models,
    onUnauthorized: unauthorized,
    state,
    apiBase: API_BASE.replace(/\/$/, ""),
  });
  return s.create;
}

/** Goes to the create page with the focus in the form just filled. */
function toForm(s: Session): void {
  const create = createView(s);
  s.focusNext = () => create.focusForm();
  if (s.route?.name === "create") show(s.route);
  else location.hash = routeHash({ name: "create" });
}

function taskView(s: Session, id: string): View {
  return createTaskView({
    api: s.api,
    id,
    onUnauthorized: unauthorized,
    onUseSettings(task: Task) {
      createView(s).useSettings(task);
      toForm(s);
    },
    onEditImage(task: Task, index: number) {
      void createView(s)
        .editImage(task, index)
        .then((done) => done && toForm(s));
    },
    onDeleted(task: Task) {
      s.galleryNotice = `Deleted ${task.id}.`;
      location.hash = routeHash(s.galleryRoute);
    },
    galleryHash: routeHash(s.galleryRoute),
  });
}

/**
 * Shows a route's view. `onLoad`: as the page opens, where the focus stays
 * at the top; moving between the gallery's pages keeps it where it is (on
 * the button pressed).
 */
function show(route: Route, onLoad = false): void {
  const s = session;
  if (!s) return;
  const withinGallery = s.route?.name === "gallery" && route.name === "gallery";
  s.route = route;
  s.task?.dispose();
  s.task = undefined;
  s.gallery?.dispose();
  let view: View;
  if (route.name === "create") {
    view = createView(s);
  } else if (route.name === "gallery") {
    s.gallery ??= createGalleryView({ api: s.api, onUnauthorized: unauthorized });
    s.galleryRoute = route;
    nav.querySelector("[data-route=gallery]")?.setAttribute("href", routeHash(route));
    void s.gallery.show(route.paging, s.galleryNotice);
    s.galleryNotice = undefined;
    view = s.gallery;
  } else {
    s.task = taskView(s, route.id);
    view = s.task;
  }
  // Put back only when it is not there already: moving a node drops its focus.
  if (main.childElementCount !== 1 || main.firstElementChild !== view.element) {
    replaceChildren(main, view.element);
  }
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.route === route.name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${view.heading.textContent} · image-task-sidecar`;
  const focus = s.focusNext;
  s.focusNext = undefined;
  // A new page: where a screen reader and the keyboard go on from.
  if (focus) focus();
  else if (!onLoad && !withinGallery) view.heading.focus();
}

window.addEventListener("hashchange", () => show(parseRoute(location.hash)));
// The skip link moves the focus; as a plain link it would change the route (`#main`).
document.querySelector(".skip")?.addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});

const saved = keys.get();
if (saved) {
  start(saved).catch((err: unknown) =>
    signedOut(
      err instanceof ApiError && err.status === 401
        ? `Signed out: the service refused the key (${err.message})`
        : `Could not reach the service: ${err instanceof Error ? err.message : String(err)}`,
    ),
  );
} else {
  signedOut();
}
