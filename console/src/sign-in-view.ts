import { ApiError } from "./api.js";
import { field, h } from "./dom.js";
import { cleanKey } from "./key-store.js";

export interface SignInOptions {
  /** Checks the key (it lists the key's models); rejects with the API's refusal. */
  signIn(key: string): Promise<void>;
  /** Why the user is here again (the key was refused), if so. */
  notice?: string;
}

/** The sign-in page: one field for the key, kept in this tab only. */
export function createSignInView(options: SignInOptions) {
  const key = h("input", {
    name: "key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    autocapitalize: "off",
    required: true,
  });
  const keyField = field(
    "API key",
    key,
    "Kept in this browser tab only (sessionStorage) until you sign out or close the tab, and " +
      "sent only to this service. The demo defaults print their key in the start-up banner.",
  );
  const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
  const status = h("p", { class: "form-status", role: "status" }, options.notice ?? "");
  const heading = h("h2", { id: "sign-in-heading", tabindex: "-1" }, "Sign in");
  const form = h(
    "form",
    { class: "panel sign-in", "aria-labelledby": "sign-in-heading", novalidate: true },
    heading,
    h(
      "p",
      {},
      "Make images, watch them being made and find them again, with your key for this service.",
    ),
    keyField.wrapper,
    h("div", { class: "actions" }, submit),
    status,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = cleanKey(key.value);
    if (!value) {
      keyField.problem.hidden = false;
      keyField.problem.textContent = "Paste your API key.";
      key.setAttribute("aria-invalid", "true");
      key.focus();
      return;
    }
    submit.disabled = true;
    status.textContent = "Checking the key…";
    options
      .signIn(value)
      .catch((err: unknown) => {
        const refused = err instanceof ApiError && err.status === 401;
        keyField.problem.hidden = !refused;
        keyField.problem.textContent = refused ? "This key was refused." : "";
        if (refused) key.setAttribute("aria-invalid", "true");
        status.textContent = refused
          ? `Not signed in: ${(err as ApiError).message}`
          : `Not signed in: ${err instanceof Error ? err.message : "the service could not be reached."}`;
        key.focus();
      })
      .finally(() => (submit.disabled = false));
  });
  return { element: form, heading, focus: () => key.focus() };
}
