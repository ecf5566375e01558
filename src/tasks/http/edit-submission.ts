import { sniffImageType } from "../../images/image-type.js";
import { ServiceError } from "../../errors/service-error.js";
import { parseBody, requireJsonObject } from "../../errors/parse-body.js";
import type { MultipartForm } from "./read-multipart-form.js";
import type { TaskInput } from "../core/task-record.js";
import { submitEditSchema } from "../service/task-schemas.js";
import type { EditInput, Submission } from "../service/task-service.js";

/** Images one edit may take (OpenAI's own limit for gpt-image models), besides the mask. */
export const MAX_EDIT_IMAGES = 16;
/** The form fields that carry files. */
export const EDIT_FILE_FIELDS: ReadonlySet<string> = new Set(["image", "image[]", "mask"]);
/** Fields that are numbers in JSON; a form sends them as text. */
const NUMBER_FIELDS = new Set(["n", "output_compression", "partial_images"]);

/**
 * An edit from OpenAI's multipart body: `image` or `image[]` files (as the
 * SDKs send one or several), an optional `mask`, and the task's other fields
 * as text. A text field sent twice is refused (which one would count?); the
 * images keep the field name they came in, so the channel gets the same form.
 *
 * @throws ServiceError `invalid_value` / `missing_required_parameter`, naming the field
 */
export function editFromForm(form: MultipartForm): Submission {
  const fields: Record<string, unknown> = {};
  for (const { name, value } of form.fields) {
    if (EDIT_FILE_FIELDS.has(name)) {
      throw invalid(name, `'${name}' must be a file, not a text field.`);
    }
    if (Object.hasOwn(fields, name)) {
      throw invalid(name.slice(0, 100), `'${name.slice(0, 100)}' was given more than once.`);
    }
    fields[name] = NUMBER_FIELDS.has(name) && /^\d{1,6}$/.test(value) ? Number(value) : value;
  }
  const masks = form.files.filter((file) => file.name === "mask");
  if (masks.length > 1) throw invalid("mask", "'mask' was given more than once.");
  const images = form.files.filter((file) => file.name !== "mask");
  return edit(
    fields,
    images.map((file) => ({ field: file.name as TaskInput["field"], bytes: file.bytes })),
    masks[0]?.bytes,
  );
}

/**
 * An edit from OpenAI's JSON body: `images: [{"image_url": "data:..."}]` and
 * an optional `mask: {"image_url": "data:..."}`. Only base64 `data:` URLs are
 * taken: fetching a client's URL would make the service a fetcher for anyone
 * (and `file_id`s belong to OpenAI's Files API, which is not here).
 *
 * @throws ServiceError `invalid_json`, `invalid_value` / `missing_required_parameter`
 */
export function editFromJson(body: unknown): Submission {
  const { images, mask, ...fields } = requireJsonObject(body);
  if (images === undefined || images === null) {
    throw new ServiceError("missing_required_parameter", "Missing required parameter: 'images'.", {
      param: "images",
    });
  }
  if (!Array.isArray(images)) {
    throw invalid("images", `'images' must be a list of {"image_url": "data:..."} objects.`);
  }
  const decoded = images.map((image: unknown, index) =>
    imageUrlBytes(image, `images[${index}].image_url`),
  );
  const field = decoded.length > 1 ? "image[]" : "image";
  return edit(
    fields,
    decoded.map((bytes) => ({ field, bytes })),
    mask === undefined || mask === null ? undefined : imageUrlBytes(mask, "mask.image_url"),
  );
}

/** The submission: fields parsed like a task's, images checked to be PNG, JPEG or WebP. */
function edit(
  fields: Record<string, unknown>,
  images: Array<{ field: TaskInput["field"]; bytes: Buffer }>,
  mask: Buffer | undefined,
): Submission {
  const request = parseBody(submitEditSchema, fields);
  if (images.length === 0) {
    throw new ServiceError("missing_required_parameter", "Missing required parameter: 'image'.", {
      param: "image",
    });
  }
  if (images.length > MAX_EDIT_IMAGES) {
    throw invalid("image", `At most ${MAX_EDIT_IMAGES} images may be edited at once.`);
  }
  const inputs: EditInput[] = images.map(({ field, bytes }) => checked(field, bytes));
  if (mask) inputs.push(checked("mask", mask));
  return { request, inputs };
}

function checked(field: TaskInput["field"], bytes: Buffer): EditInput {
  const type = sniffImageType(bytes);
  if (!type) {
    throw invalid(field, `Every '${field}' must be a PNG, JPEG or WebP image.`);
  }
  return { field, mime: type.mimeType, bytes };
}

/** The bytes of `{"image_url": "data:<type>;base64,<data>"}`. */
function imageUrlBytes(value: unknown, param: string): Buffer {
  const url =
    value && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>).image_url
      : undefined;
  if (typeof url !== "string") {
    throw invalid(param, `'${param}' must be a data: URL (base64); file_id is not supported.`);
  }
  const match = /^data:[\w.+-]+\/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,/i.exec(url);
  if (!match) {
    throw invalid(
      param,
      `'${param}' must be a base64 data: URL (data:image/png;base64,...); other URLs are not fetched.`,
    );
  }
  const data = url.slice(match[0].length);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data)) {
    throw invalid(param, `'${param}' is not valid base64.`);
  }
  return Buffer.from(data, "base64");
}

function invalid(param: string, message: string): ServiceError {
  return new ServiceError("invalid_value", message, { param });
}
