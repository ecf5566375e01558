import { ApiError, type Api } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { routeHash } from "./routes.js";
import { createTaskPanel, type TaskPanel } from "./task-panel.js";
import { buildSubmission, editFormData, type FieldProblem } from "./task-form.js";
import {
  layoutForm,
  makeControls,
  readForm,
  showPreviews,
  showProblems,
  type Controls,
  type ProblemSlots,
} from "./task-form-controls.js";
import type { Task } from "./task-types.js";

export interface CreateViewOptions {
  api: Api;
  /** The key's `gpt-image-*` models. */
  models: readonly string[];
  onUnauthorized(error: ApiError): void;
}

/**
 * The page to make an image: the form (generate, or edit images with an
 * optional mask; every option of the task API) and, beside it, the task just
 * submitted, followed live.
 */
export function createCreateView(options: CreateViewOptions) {
  const controls = makeControls(options.models);
  const { form, problems } = layoutForm(controls);
  const live = h("div", { class: "live-body" });
  const heading = h("h2", { id: "create-heading", tabindex: "-1" }, "New image");
  const element = h(
    "section",
    { class: "create-view", "aria-labelledby": "create-heading" },
    h("div", { class: "panel form-panel" }, heading, form),
    h(
      "section",
      { class: "panel live-panel", "aria-labelledby": "live-heading" },
      h("h2", { id: "live-heading" }, "Live"),
      live,
    ),
  );
  let panel: TaskPanel | undefined;
  const showTask = (task: Task) => {
    panel?.dispose();
    panel = createTaskPanel({ api: options.api, task, onUnauthorized: options.onUnauthorized });
    replaceChildren(
      live,
      panel.element,
      h(
        "p",
        { class: "hint" },
        "Kept in the gallery until it expires. ",
        h("a", { href: routeHash({ name: "task", id: task.id }) }, "Open this task"),
      ),
    );
  };
  replaceChildren(live, h("p", { class: "empty" }, "Your image appears here as it is made."));

  const setMode = () => {
    const edit = controls.mode() === "edit";
    controls.editInputs.hidden = !edit;
    controls.submit.textContent = edit ? "Edit images" : "Generate";
  };
  for (const radio of controls.modeRadios) radio.addEventListener("change", setMode);
  controls.images.addEventListener("change", () => showPreviews(controls));
  controls.mask.addEventListener("change", () => showPreviews(controls));
  setMode();

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void submit(options, controls, problems, showTask);
  });
  if (options.models.length === 0) {
    controls.submit.disabled = true;
    controls.formStatus.textContent =
      "This key may not use any gpt-image-* model: there is nothing to make here.";
  }
  return { element, heading, dispose: () => panel?.dispose() };
}

/** The API's `param` as the form's field, for its refusals. */
const PARAM_FIELDS: Record<string, FieldProblem["field"]> = {
  prompt: "prompt",
  model: "model",
  size: "size",
  n: "n",
  quality: "quality",
  background: "background",
  output_format: "outputFormat",
  output_compression: "outputCompression",
  moderation: "moderation",
  style: "style",
  partial_images: "partialImages",
  response_format: "responseFormat",
  user: "user",
  webhook_url: "webhookUrl",
  image: "images",
  "image[]": "images",
  mask: "mask",
  input_fidelity: "inputFidelity",
};

async function submit(
  options: CreateViewOptions,
  c: Controls,
  problems: ProblemSlots,
  showTask: (task: Task) => void,
): Promise<void> {
  const built = buildSubmission(readForm(c));
  if (!built.ok) {
    showProblems(c, problems, built.problems);
    c.formStatus.textContent = "Check the fields marked above.";
    return;
  }
  showProblems(c, problems, []);
  c.submit.disabled = true;
  c.formStatus.textContent = "Submitting…";
  try {
    const { submission } = built;
    const task =
      submission.kind === "generate"
        ? await options.api.submit(submission.body)
        : await options.api.submitEdit(editFormData(submission));
    c.formStatus.textContent = "Submitted.";
    showTask(task);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return options.onUnauthorized(err);
    const message = err instanceof Error ? err.message : "The task could not be submitted.";
    const name = err instanceof ApiError && err.param ? PARAM_FIELDS[err.param] : undefined;
    if (name) showProblems(c, problems, [{ field: name, message }]);
    c.formStatus.textContent = `Not submitted: ${message}`;
  } finally {
    c.submit.disabled = false;
  }
}
