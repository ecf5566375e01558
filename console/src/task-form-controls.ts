import { field, h, replaceChildren, select } from "./dom.js";
import { ONE_CONTROL_FIELDS, type FormFields } from "./form-state.js";
import { MAX_PROMPT, type FieldProblem, type TaskFormInput } from "./task-form.js";

const DEFAULT = ["", "Default"] as const;
const SIZES = ["auto", "1024x1024", "1536x1024", "1024x1536"];

/** Where each field's problem is shown, by the field's name. */
export type ProblemSlots = Map<FieldProblem["field"], HTMLElement>;

/** The form's controls, made once. */
export type Controls = ReturnType<typeof makeControls>;

type Options = ReadonlyArray<readonly [string, string]>;

/** The choices of the task API's options that take one of a few values ("" = the API's default). */
const CHOICES: Record<string, Options> = {
  quality: [DEFAULT, ["auto", "Auto"], ["low", "Low"], ["medium", "Medium"], ["high", "High"]],
  background: [DEFAULT, ["auto", "Auto"], ["opaque", "Opaque"], ["transparent", "Transparent"]],
  output_format: [DEFAULT, ["png", "PNG"], ["jpeg", "JPEG"], ["webp", "WebP"]],
  partial_images: [
    ["0", "None"],
    ["1", "1"],
    ["2", "2"],
    ["3", "3"],
  ],
  moderation: [DEFAULT, ["auto", "Auto"], ["low", "Low"]],
  style: [DEFAULT, ["vivid", "Vivid"], ["natural", "Natural"]],
  response_format: [
    ["url", "Links (url)"],
    ["b64_json", "Base64 (b64_json)"],
  ],
  input_fidelity: [DEFAULT, ["low", "Low"], ["high", "High"]],
};

const IMAGE_TYPES = "image/png,image/jpeg,image/webp";

function choice(name: string, value = ""): HTMLSelectElement {
  return select(name, CHOICES[name] ?? [], value);
}

function wholeNumber(name: string, min: number, max: number, value?: number): HTMLInputElement {
  return h("input", { name, type: "number", min, max, step: 1, value, inputmode: "numeric" });
}

function text(name: string, extra: Record<string, string | number> = {}): HTMLInputElement {
  return h("input", { name, autocomplete: "off", spellcheck: "false", ...extra });
}

/** Every control of the form: the task API's options, and an edit's files. */
export function makeControls(models: readonly string[]) {
  const modeRadios = (["generate", "edit"] as const).map((value) =>
    h("input", { type: "radio", name: "mode", value, checked: value === "generate" }),
  );
  return {
    modeRadios,
    mode: () =>
      (modeRadios.find((radio) => radio.checked)?.value ?? "generate") as "generate" | "edit",
    prompt: h("textarea", { name: "prompt", rows: 4, maxlength: MAX_PROMPT, required: true }),
    model: select(
      "model",
      models.map((id) => [id, id] as const),
      models[0] ?? "",
    ),
    size: text("size", { list: "size-suggestions", placeholder: "auto" }),
    sizes: h(
      "datalist",
      { id: "size-suggestions" },
      ...SIZES.map((size) => h("option", { value: size })),
    ),
    quality: choice("quality"),
    n: wholeNumber("n", 1, 10, 1),
    background: choice("background"),
    outputFormat: choice("output_format"),
    partialImages: choice("partial_images", "1"),
    outputCompression: wholeNumber("output_compression", 0, 100),
    moderation: choice("moderation"),
    style: choice("style"),
    responseFormat: choice("response_format", "url"),
    user: text("user", { maxlength: 256 }),
    webhookUrl: text("webhook_url", { type: "url", placeholder: "https://" }),
    images: h("input", { name: "image", type: "file", multiple: true, accept: IMAGE_TYPES }),
    mask: h("input", { name: "mask", type: "file", accept: IMAGE_TYPES }),
    inputFidelity: choice("input_fidelity"),
    previews: h("ul", { class: "input-previews", "aria-label": "Picked images" }),
    editInputs: h("fieldset", { class: "edit-inputs" }),
    submit: h("button", { type: "submit", class: "primary" }, "Generate"),
    formStatus: h("p", { class: "form-status", role: "status" }),
  };
}

type AddField = (
  name: FieldProblem["field"],
  label: string,
  control: Parameters<typeof field>[1],
  hint?: string,
) => HTMLElement;

/** The form laid out: the fields and where each one's problem is shown. */
export function layoutForm(c: Controls) {
  const problems: ProblemSlots = new Map();
  const add: AddField = (name, label, control, hint) => {
    const made = field(label, control, hint);
    problems.set(name, made.problem);
    return made.wrapper;
  };
  replaceChildren(
    c.editInputs,
    h("legend", {}, "Images to edit"),
    add("images", "Images (1 to 16)", c.images, "PNG, JPEG or WebP."),
    add("mask", "Mask (optional)", c.mask, "Transparent where the image may change."),
    c.previews,
    add("inputFidelity", "Input fidelity", c.inputFidelity),
  );
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "create-heading" },
    modeChoice(c),
    add("prompt", "Prompt", c.prompt),
    h(
      "div",
      { class: "grid" },
      add("model", "Model", c.model),
      add("size", "Size", c.size, "auto or WIDTHxHEIGHT"),
      add("quality", "Quality", c.quality),
      add("n", "Images", c.n),
      add("background", "Background", c.background),
      add("outputFormat", "Output format", c.outputFormat),
      add("partialImages", "Partial images", c.partialImages, "Drafts shown while it is made."),
    ),
    c.sizes,
    c.editInputs,
    moreOptions(c, add),
    h("div", { class: "actions" }, c.submit),
    c.formStatus,
  );
  return { form, problems };
}

function modeChoice(c: Controls): HTMLElement {
  const labels = { generate: "A new image", edit: "An edit of images" };
  return h(
    "fieldset",
    { class: "mode" },
    h("legend", {}, "Make"),
    ...c.modeRadios.map((radio) => {
      radio.id = `mode-${radio.value}`;
      return h(
        "label",
        { for: radio.id, class: "choice" },
        radio,
        labels[radio.value as keyof typeof labels],
      );
    }),
  );
}

/** The options fewer people need, folded away. */
function moreOptions(c: Controls, add: AddField): HTMLElement {
  return h(
    "details",
    { class: "more" },
    h("summary", {}, "More options"),
    h(
      "div",
      { class: "grid" },
      add("outputCompression", "Compression (0 to 100)", c.outputCompression, "JPEG, WebP."),
      add("moderation", "Moderation", c.moderation),
      add("style", "Style", c.style, "Accepted; gpt-image models ignore it."),
      add("responseFormat", "Images as", c.responseFormat, "Links show in the gallery."),
      add("user", "End-user id", c.user, "Sent on to the channel; never shown."),
      add("webhookUrl", "Webhook URL", c.webhookUrl, "Needs webhooks.secret in the config."),
    ),
  );
}

/** Thumbnails of the picked files, from `blob:` URLs (freed when replaced). */
export function showPreviews(c: Controls): void {
  for (const img of c.previews.querySelectorAll("img")) URL.revokeObjectURL(img.src);
  const files = [...(c.images.files ?? [])].map(
    (file, index) => [file, `Image ${index + 1}`] as const,
  );
  const mask = c.mask.files?.[0];
  replaceChildren(
    c.previews,
    ...[...files, ...(mask ? ([[mask, "Mask"]] as const) : [])].map(([file, label]) =>
      h(
        "li",
        {},
        h("img", { src: URL.createObjectURL(file), alt: `${label}: ${file.name}` }),
        h("span", {}, label),
      ),
    ),
  );
}

/** The form's values as `buildSubmission` (task-form.ts) takes them. */
export function readForm(c: Controls): TaskFormInput {
  const mask = c.mask.files?.[0];
  return {
    ...readFields(c),
    images: [...(c.images.files ?? [])],
    ...(mask ? { mask } : {}),
  };
}

/** The form's fields without its files: what a reload keeps. */
export function readFields(c: Controls): FormFields {
  return {
    mode: c.mode(),
    model: c.model.value,
    prompt: c.prompt.value,
    size: c.size.value,
    quality: c.quality.value,
    n: c.n.value,
    background: c.background.value,
    outputFormat: c.outputFormat.value,
    outputCompression: c.outputCompression.value,
    moderation: c.moderation.value,
    style: c.style.value,
    partialImages: c.partialImages.value,
    responseFormat: c.responseFormat.value,
    inputFidelity: c.inputFidelity.value,
    user: c.user.value,
    webhookUrl: c.webhookUrl.value,
  };
}

/** Each of these fields is a control of the same name (checked here). */
const ONE_CONTROL = ONE_CONTROL_FIELDS satisfies ReadonlyArray<keyof Controls>;

/**
 * Sets the fields given (the others keep their value). A model the key
 * does not have is added to the list, so that the form shows the task as it
 * was and the API names the problem if there is one.
 */
export function writeFields(c: Controls, fields: Partial<FormFields>): void {
  if (fields.mode) for (const radio of c.modeRadios) radio.checked = radio.value === fields.mode;
  if (fields.model && ![...c.model.options].some((option) => option.value === fields.model)) {
    c.model.append(h("option", { value: fields.model }, fields.model));
  }
  for (const name of ONE_CONTROL) {
    const value = fields[name];
    if (value === undefined) continue;
    const control = c[name];
    control.value = value;
    // A value no option has (kept from an older console, say): the first option, the default.
    if (control instanceof HTMLSelectElement && control.selectedIndex < 0) {
      control.selectedIndex = 0;
    }
  }
}

/** Puts `files` in the images field (and empties the mask), as if picked. */
export function setImages(c: Controls, files: readonly File[]): void {
  const picked = new DataTransfer();
  for (const file of files) picked.items.add(file);
  c.images.files = picked.files;
  c.mask.value = "";
  showPreviews(c);
}

/** Names each problem next to its field and marks the field invalid; focuses the first. */
export function showProblems(c: Controls, problems: ProblemSlots, found: FieldProblem[]) {
  for (const [name, node] of problems) {
    node.hidden = true;
    node.textContent = "";
    controlOf(c, name)?.removeAttribute("aria-invalid");
  }
  for (const { field: name, message } of found) {
    const node = problems.get(name);
    if (node) {
      node.hidden = false;
      node.textContent = message;
    }
    controlOf(c, name)?.setAttribute("aria-invalid", "true");
  }
  const first = found[0];
  if (first) {
    const control = controlOf(c, first.field);
    if (control?.closest("details")) control.closest("details")!.open = true;
    control?.focus();
  }
}

function controlOf(c: Controls, name: FieldProblem["field"]): HTMLElement | undefined {
  const control = (c as unknown as Record<string, unknown>)[name];
  return control instanceof HTMLElement ? control : undefined;
}
