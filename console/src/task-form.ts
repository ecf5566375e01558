/**
 * The generate / edit form as the page reads it: every field as the text its
 * control holds ("" when left at the default), and the picked files.
 */
export interface TaskFormInput {
  mode: "generate" | "edit";
  model: string;
  prompt: string;
  size: string;
  quality: string;
  n: string;
  background: string;
  outputFormat: string;
  outputCompression: string;
  moderation: string;
  style: string;
  partialImages: string;
  responseFormat: string;
  inputFidelity: string;
  user: string;
  webhookUrl: string;
  /** Edits: the images to edit (1 to 16) and an optional mask. */
  images: readonly Blob[];
  mask?: Blob;
}

/** A field the API would refuse, named by the form control's field name. */
export interface FieldProblem {
  field: keyof TaskFormInput;
  message: string;
}

/** A submission ready to send: a JSON body, or an edit's fields and files. */
export type TaskSubmission =
  | { kind: "generate"; body: Record<string, string | number> }
  | {
      kind: "edit";
      /** The fields as a JSON body would carry them (numbers as numbers). */
      body: Record<string, string | number>;
      /** The same fields as a multipart body carries them. */
      fields: Array<[string, string]>;
      images: readonly Blob[];
      mask?: Blob;
    };

export const MAX_PROMPT = 32000;
export const MAX_EDIT_IMAGES = 16;
const SIZE = /^(auto|[1-9]\d{1,4}x[1-9]\d{1,4})$/;

/** An integer in `min..max` from the control's text, or undefined when it is not one. */
function integer(text: string, min: number, max: number): number | undefined {
  if (!/^\d{1,6}$/.test(text.trim())) return undefined;
  const value = Number(text.trim());
  return value >= min && value <= max ? value : undefined;
}

/**
 * Checks the form the way the API does (so a mistake is named next to its
 * field before anything is sent) and builds the submission: the fields left
 * at their default are not sent, so the API's own defaults apply.
 */
export function buildSubmission(
  input: TaskFormInput,
): { ok: true; submission: TaskSubmission } | { ok: false; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const problem = (field: FieldProblem["field"], message: string) =>
    problems.push({ field, message });
  const values: Record<string, string | number> = {};
  const text = (name: string, value: string) => {
    if (value.trim() !== "") values[name] = value.trim();
  };
  const number = (
    name: string,
    field: FieldProblem["field"],
    value: string,
    [min, max]: [number, number],
  ) => {
    if (value.trim() === "") return;
    const parsed = integer(value, min, max);
    if (parsed === undefined) problem(field, `Must be a whole number from ${min} to ${max}.`);
    else values[name] = parsed;
  };

  if (!input.model) problem("model", "Choose a model.");
  else values.model = input.model;
  if (input.prompt.trim() === "") problem("prompt", "Describe the image.");
  else if (input.prompt.length > MAX_PROMPT) {
    problem("prompt", `At most ${MAX_PROMPT} characters.`);
  } else values.prompt = input.prompt;
  if (input.size.trim() !== "" && !SIZE.test(input.size.trim())) {
    problem("size", "auto, or WIDTHxHEIGHT such as 1024x1024.");
  }
  text("size", input.size);
  text("quality", input.quality);
  number("n", "n", input.n, [1, 10]);
  text("background", input.background);
  text("output_format", input.outputFormat);
  number("output_compression", "outputCompression", input.outputCompression, [0, 100]);
  text("moderation", input.moderation);
  text("style", input.style);
  number("partial_images", "partialImages", input.partialImages, [0, 3]);
  if (values.partial_images === 0) delete values.partial_images;
  text("response_format", input.responseFormat);
  text("user", input.user);
  text("webhook_url", input.webhookUrl);

  if (input.mode === "edit") {
    text("input_fidelity", input.inputFidelity);
    if (input.images.length === 0) problem("images", "Pick at least one image to edit.");
    if (input.images.length > MAX_EDIT_IMAGES) {
      problem("images", `At most ${MAX_EDIT_IMAGES} images.`);
    }
  }
  if (problems.length > 0) return { ok: false, problems };
  if (input.mode === "generate")
    return { ok: true, submission: { kind: "generate", body: values } };
  return {
    ok: true,
    submission: {
      kind: "edit",
      body: values,
      fields: Object.entries(values).map(([name, value]) => [name, String(value)]),
      images: input.images,
      ...(input.mask ? { mask: input.mask } : {}),
    },
  };
}

/**
 * An edit as OpenAI's multipart body: the fields, then `image` (one) or
 * `image[]` (several), then `mask`. File names are not the user's (the
 * service does not keep them either).
 */
export function editFormData(submission: Extract<TaskSubmission, { kind: "edit" }>): FormData {
  const form = new FormData();
  for (const [name, value] of submission.fields) form.append(name, value);
  const field = submission.images.length > 1 ? "image[]" : "image";
  submission.images.forEach((image, index) => form.append(field, image, `image-${index}`));
  if (submission.mask) form.append("mask", submission.mask, "mask");
  return form;
}
