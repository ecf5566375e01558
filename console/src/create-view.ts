import { ApiError, isAbort, type Api } from "./api.js";
import { createCodePanel } from "./code-panel.js";
import type { SnippetFile, SnippetRequest } from "./code-snippets.js";
import { h, replaceChildren } from "./dom.js";
import { downloadName, imageSource } from "./format.js";
import { formFromTask, type createSessionState, type FormFields } from "./form-state.js";
import { fetchableImages, imageBlob } from "./image-bytes.js";
import { routeHash } from "./routes.js";
import { createTaskPanel, type TaskPanel } from "./task-panel.js";
import { buildSubmission, editFormData, type FieldProblem } from "./task-form.js";
import {
  layoutForm,
  makeControls,
  readFields,
  readForm,
  setImages,
  showPreviews,
  showProblems,
  writeFields,
  type Controls,
  type ProblemSlots,
} from "./task-form-controls.js";
import type { Task } from "./task-types.js";

export interface CreateViewOptions {
  api: Api;
  /** The key's `gpt-image-*` models. */
  models: readonly string[];
  onUnauthorized(error: ApiError): void;
  /** Where the form and the task being watched are kept across a reload. */
  state: ReturnType<typeof createSessionState>;
  /** The API's base URL for the code shown, e.g. `https://host/v1`. */
  apiBase: string;
}

/** The create page's parts that submitting and filling the form use. */
interface Parts {
  options: CreateViewOptions;
  controls: Controls;
  problems: ProblemSlots;
  /** A submission is on its way. */
  busy: boolean;
  /** Fills the form: the fields given, the images to edit, and a line on what happened. */
  fill(fields: Partial<FormFields>, images: readonly File[], note: string): void;
  focusForm(): void;
  showTask(task: Task): void;
  clearLive(): void;
  reveal(): void;
  /** Shows the edit inputs, and names the button, for the mode chosen. */
  setMode(): void;
  /** Keeps the form across a reload. */
  save(): void;
  /** Stops following the live task. */
  dispose(): void;
}

/**
 * The page to make an image: the form (generate, or edit images with an
 * optional mask; every option of the task API; the form as code) and,
 * beside it, the task just submitted, followed live. The form and that
 * task are kept across a reload of the tab.
 */
export function createCreateView(options: CreateViewOptions) {
  const controls = makeControls(options.models);
  const layout = createLayout(controls);
  const parts = createParts(options, controls, layout);
  listen(parts, layout.form);
  if (options.models.length === 0) {
    controls.submit.disabled = true;
    controls.formStatus.textContent =
      "This key may not use any gpt-image-* model: there is nothing to make here.";
  }
  const kept = options.state.form();
  if (kept) writeFields(controls, kept);
  parts.setMode();
  resumeLive(parts);

  return {
    element: layout.element,
    heading: layout.heading,
    /**
     * "Use these settings": the form as `task` was submitted. An edit's input
     * images are not kept with a task: the form asks for them again.
     */
    useSettings(task: Task): void {
      const fields = formFromTask(task);
      parts.fill(
        fields,
        [],
        fields.mode === "edit"
          ? "Filled in from the task. Its input images are not kept: pick them again."
          : "Filled in from the task.",
      );
    },
    /** "Edit image N": resolves false (the reason shown) when the image could not be read. */
    editImage: (task: Task, index: number) => editImage(parts, task, index),
    /** Where the focus goes after the form was filled: the prompt, or the images to pick. */
    focusForm: parts.focusForm,
    dispose: () => parts.dispose(),
  };
}

/** The page: the form in one panel, the live task in the other (a placeholder at first). */
function createLayout(controls: Controls) {
  const { form, problems } = layoutForm(controls);
  const live = h("div", { class: "live-body" }, placeholder());
  const heading = h("h2", { id: "create-heading", tabindex: "-1" }, "New image");
  const formPanel = h("div", { class: "panel form-panel" }, heading, form);
  const livePanel = h(
    "section",
    { class: "panel live-panel", "aria-labelledby": "live-heading" },
    h("h2", { id: "live-heading" }, "Live"),
    live,
  );
  const element = h(
    "section",
    { class: "create-view", "aria-labelledby": "create-heading" },
    formPanel,
    livePanel,
  );
  return { form, problems, live, heading, formPanel, livePanel, element };
}

/** What submitting and filling the form work on (see {@link Parts}). */
function createParts(
  options: CreateViewOptions,
  controls: Controls,
  layout: ReturnType<typeof createLayout>,
): Parts {
  const { live, formPanel, livePanel } = layout;
  let panel: TaskPanel | undefined;
  const parts: Parts = {
    options,
    controls,
    problems: layout.problems,
    busy: false,
    fill(fields, images, note) {
      showProblems(controls, layout.problems, []);
      writeFields(controls, fields);
      setImages(controls, images);
      parts.setMode();
      parts.save();
      controls.formStatus.textContent = note;
    },
    focusForm() {
      const pick = controls.mode() === "edit" && !controls.images.files?.length;
      (pick ? controls.images : controls.prompt).focus();
    },
    showTask(task) {
      panel?.dispose();
      panel = createTaskPanel({
        api: options.api,
        task,
        onUnauthorized: options.onUnauthorized,
        onEditImage: (shown, index) =>
          void editImage(parts, shown, index).then((done) => done && parts.focusForm()),
        actions: [h("a", { href: routeHash({ name: "task", id: task.id }) }, "Open this task")],
      });
      replaceChildren(
        live,
        panel.element,
        h("p", { class: "hint" }, "Kept in the gallery until it expires."),
      );
    },
    clearLive() {
      panel?.dispose();
      panel = undefined;
      options.state.saveLiveTask(undefined);
      replaceChildren(live, placeholder());
    },
    // One column (a phone): the live task is below the form, out of sight after Generate.
    reveal() {
      if (livePanel.offsetTop <= formPanel.offsetTop) return;
      const still = matchMedia("(prefers-reduced-motion: reduce)").matches;
      livePanel.scrollIntoView({ block: "start", behavior: still ? "auto" : "smooth" });
    },
    setMode() {
      const edit = controls.mode() === "edit";
      controls.editInputs.hidden = !edit;
      controls.submit.textContent = edit ? "Edit images" : "Generate";
    },
    save: () => options.state.saveForm(readFields(controls)),
    dispose: () => panel?.dispose(),
  };
  return parts;
}

/** The form's events: mode, previews, saving, the code panel, submitting (also Ctrl+Enter). */
function listen(parts: Parts, form: HTMLFormElement): void {
  const { controls, options } = parts;
  for (const radio of controls.modeRadios) radio.addEventListener("change", parts.setMode);
  controls.images.addEventListener("change", () => showPreviews(controls));
  controls.mask.addEventListener("change", () => showPreviews(controls));
  form.append(createCodePanel({ request: () => snippetRequest(parts), apiBase: options.apiBase }));
  form.addEventListener("input", parts.save);
  form.addEventListener("change", parts.save);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void submit(parts);
  });
  form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
}

function placeholder(): HTMLElement {
  return h("p", { class: "empty" }, "Your image appears here as it is made.");
}

/** After a reload: the task that was being watched, watched again (and the last result shown). */
function resumeLive(parts: Parts): void {
  const id = parts.options.state.liveTask();
  if (!id) return;
  parts.options.api.get(id).then(parts.showTask, (err: unknown) => {
    if (err instanceof ApiError && err.status === 401) return parts.options.onUnauthorized(err);
    if (!isAbort(err)) parts.clearLive();
  });
}

/** "Edit image N": an edit whose input is that image, the task's model and size kept. */
async function editImage(parts: Parts, task: Task, index: number): Promise<boolean> {
  const shown = task.data?.[index];
  const source = shown && imageSource(shown);
  if (!shown || !source) return false;
  try {
    const image = (await fetchableImages(parts.options.api, task))[index];
    if (!image) throw new Error("The image is no longer there.");
    const blob = await imageBlob(image);
    const file = new File([blob], downloadName(task, index, source), { type: blob.type });
    const fields = { ...formFromTask(task), mode: "edit", prompt: "", n: "1" } as const;
    parts.fill(fields, [file], `Editing image ${index + 1} of ${task.id}: describe the change.`);
    return true;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    parts.controls.formStatus.textContent = `The image could not be read: ${reason}`;
    return false;
  }
}

/** The form as code takes it; undefined (with the problems shown) when it has any. */
function snippetRequest({ controls: c, problems }: Parts): SnippetRequest | undefined {
  const input = readForm(c);
  const built = buildSubmission(input);
  if (!built.ok) {
    showProblems(c, problems, built.problems);
    return undefined;
  }
  showProblems(c, problems, []);
  const { submission } = built;
  if (submission.kind === "generate") return { kind: "generate", body: submission.body };
  const file = (blob: Blob, fallback: string): SnippetFile => ({
    name: blob instanceof File && blob.name ? blob.name : fallback,
    type: blob.type || "image/png",
  });
  return {
    kind: "edit",
    body: submission.body,
    images: submission.images.map((image, index) => file(image, `image-${index + 1}.png`)),
    ...(submission.mask ? { mask: file(submission.mask, "mask.png") } : {}),
  };
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

async function submit(parts: Parts): Promise<void> {
  const { options, controls: c, problems } = parts;
  if (parts.busy || c.submit.disabled) return;
  const built = buildSubmission(readForm(c));
  if (!built.ok) {
    showProblems(c, problems, built.problems);
    c.formStatus.textContent = "Check the fields marked above.";
    return;
  }
  showProblems(c, problems, []);
  // Not `disabled`: a focused button that is disabled drops the focus to <body>.
  parts.busy = true;
  c.submit.setAttribute("aria-disabled", "true");
  c.formStatus.textContent = "Submitting…";
  try {
    const { submission } = built;
    const task =
      submission.kind === "generate"
        ? await options.api.submit(submission.body)
        : await options.api.submitEdit(editFormData(submission));
    c.formStatus.textContent = "Submitted.";
    options.state.saveLiveTask(task.id);
    parts.showTask(task);
    parts.reveal();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return options.onUnauthorized(err);
    // The live panel shows what this submission made: nothing.
    parts.clearLive();
    const message = err instanceof Error ? err.message : "The task could not be submitted.";
    const name = err instanceof ApiError && err.param ? PARAM_FIELDS[err.param] : undefined;
    if (name) showProblems(c, problems, [{ field: name, message }]);
    c.formStatus.textContent = `Not submitted: ${message}`;
  } finally {
    parts.busy = false;
    c.submit.removeAttribute("aria-disabled");
  }
}
