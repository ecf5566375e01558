import { ApiError, createApi, type Api } from "./api.js";
import { createCreateView } from "./create-view.js";
import { h, replaceChildren } from "./dom.js";
import { createGalleryView } from "./gallery-view.js";
import { createKeyStore } from "./key-store.js";
import { parseRoute, routeHash, type Route } from "./routes.js";
import { createSignInView } from "./sign-in-view.js";
import { createTaskView } from "./task-view.js";

/** The API beside the console: `/console/` -> `/v1/`, also behind a proxy's path prefix. */
const API_BASE = new URL("../v1/", location.href).href;
const keys = createKeyStore(sessionStorage);
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
}

let session: Session | undefined;

function signedOut(notice?: string): void {
  session?.create?.dispose();
  session?.gallery?.dispose();
  session?.task?.dispose();
  session = undefined;
  keys.clear();
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
 * Checks the key by listing its models, keeps it, and shows the console;
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
    h("a", { href: routeHash({ name: "gallery" }), "data-route": "gallery" }, "Gallery"),
  );
  session = { api, models };
  show(parseRoute(location.hash), !signedIn);
}

/**
 * Shows a route's view; the create view is kept (its form and live task
 * survive a visit elsewhere). `onLoad`: as the page opens, where the focus
 * stays at the top.
 */
function show(route: Route, onLoad = false): void {
  const s = session;
  if (!s) return;
  s.task?.dispose();
  s.task = undefined;
  s.gallery?.dispose();
  let view: View;
  if (route.name === "create") {
    s.create ??= createCreateView({ api: s.api, models: s.models, onUnauthorized: unauthorized });
    view = s.create;
  } else if (route.name === "gallery") {
    s.gallery ??= createGalleryView({ api: s.api, onUnauthorized: unauthorized });
    void s.gallery.show();
    view = s.gallery;
  } else {
    s.task = createTaskView({ api: s.api, id: route.id, onUnauthorized: unauthorized });
    view = s.task;
  }
  replaceChildren(main, view.element);
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.route === route.name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${view.heading.textContent} · image-task-sidecar`;
  // A new page: where a screen reader and the keyboard go on from.
  if (!onLoad) view.heading.focus();
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
