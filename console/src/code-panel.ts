import {
  curlSnippet,
  javascriptSnippet,
  pythonSnippet,
  type SnippetRequest,
} from "./code-snippets.js";
import { copyText } from "./copy-text.js";
import { h } from "./dom.js";

const LANGUAGES = [
  ["curl", "curl command", curlSnippet],
  ["Python", "Python code", pythonSnippet],
  ["JavaScript", "JavaScript code", javascriptSnippet],
] as const;

export interface CodePanelOptions {
  /** The form as filled, as code takes it; undefined when the form has a problem (shown). */
  request(): SnippetRequest | undefined;
  /** The API's base URL, e.g. `https://host/v1`. */
  apiBase: string;
}

/**
 * "Show the code": the form as filled, as a curl command or as Python or
 * JavaScript with the `openai` SDK, copied to the clipboard and shown (to
 * read, or to copy by hand where the browser does not allow copying).
 */
export function createCodePanel(options: CodePanelOptions): HTMLElement {
  const code = h("code");
  const pre = h(
    "pre",
    { class: "code", tabindex: "0", "aria-label": "The code", hidden: true },
    code,
  );
  const status = h("p", { class: "hint", role: "status" });
  const buttons = LANGUAGES.map(([language, what, write]) => {
    const button = h("button", { type: "button", class: "secondary" }, `Copy as ${language}`);
    button.addEventListener("click", () => {
      const request = options.request();
      if (!request) {
        status.textContent = "Check the fields marked above first.";
        return;
      }
      const text = write(request, options.apiBase);
      code.textContent = text;
      pre.hidden = false;
      status.textContent = "Copying…";
      void copyText(text).then((copied) => {
        status.textContent = copied
          ? `Copied the ${what}. It reads the key from OPENAI_API_KEY.`
          : `Select the ${what} below and copy it: the browser did not allow copying.`;
      });
    });
    return button;
  });
  return h(
    "details",
    { class: "more show-code" },
    h("summary", {}, "Show the code"),
    h(
      "p",
      { class: "hint" },
      "The form as filled, for a script: the key is read from OPENAI_API_KEY, never written in.",
    ),
    h("div", { class: "actions" }, ...buttons),
    status,
    pre,
  );
}
