import { describe, expect, it } from "vitest";
import { buildSubmission, editFormData, type TaskFormInput } from "../../console/src/task-form.js";

const EMPTY: TaskFormInput = {
  mode: "generate",
  model: "gpt-image-1",
  prompt: "a lighthouse",
  size: "",
  quality: "",
  n: "",
  background: "",
  outputFormat: "",
  outputCompression: "",
  moderation: "",
  style: "",
  partialImages: "",
  responseFormat: "",
  inputFidelity: "",
  user: "",
  webhookUrl: "",
  images: [],
};

describe("buildSubmission", () => {
  it("sends only what was set, numbers as numbers, so the API's defaults apply", () => {
    expect(buildSubmission(EMPTY)).toEqual({
      ok: true,
      submission: { kind: "generate", body: { model: "gpt-image-1", prompt: "a lighthouse" } },
    });
    const full = buildSubmission({
      ...EMPTY,
      prompt: "  keeps its blanks  ",
      size: " 1536x1024 ",
      quality: "high",
      n: "3",
      background: "transparent",
      outputFormat: "webp",
      outputCompression: "0",
      moderation: "low",
      style: "vivid",
      partialImages: "2",
      responseFormat: "url",
      user: "u-1",
      webhookUrl: "https://hooks.example/in",
    });
    expect(full).toEqual({
      ok: true,
      submission: {
        kind: "generate",
        body: {
          model: "gpt-image-1",
          prompt: "  keeps its blanks  ",
          size: "1536x1024",
          quality: "high",
          n: 3,
          background: "transparent",
          output_format: "webp",
          output_compression: 0,
          moderation: "low",
          style: "vivid",
          partial_images: 2,
          response_format: "url",
          user: "u-1",
          webhook_url: "https://hooks.example/in",
        },
      },
    });
    // No partial images is the API's default: not sent.
    const none = buildSubmission({ ...EMPTY, partialImages: "0" });
    expect(
      none.ok && none.submission.kind === "generate" && none.submission.body,
    ).not.toHaveProperty("partial_images");
  });

  it("names every field the API would refuse, before anything is sent", () => {
    const result = buildSubmission({
      ...EMPTY,
      model: "",
      prompt: "   ",
      size: "big",
      n: "11",
      outputCompression: "-1",
      partialImages: "4",
    });
    expect(result.ok).toBe(false);
    expect(!result.ok && result.problems.map((problem) => problem.field)).toEqual([
      "model",
      "prompt",
      "size",
      "n",
      "outputCompression",
      "partialImages",
    ]);
    const long = buildSubmission({ ...EMPTY, prompt: "x".repeat(32001) });
    expect(!long.ok && long.problems).toEqual([
      { field: "prompt", message: "At most 32000 characters." },
    ]);
  });

  it("needs 1 to 16 images for an edit", () => {
    const none = buildSubmission({ ...EMPTY, mode: "edit" });
    expect(!none.ok && none.problems.map((problem) => problem.field)).toEqual(["images"]);
    const many = buildSubmission({
      ...EMPTY,
      mode: "edit",
      images: Array.from({ length: 17 }, () => new Blob(["x"])),
    });
    expect(!many.ok && many.problems[0]?.message).toBe("At most 16 images.");
  });
});

describe("editFormData", () => {
  const png = (text: string) => new Blob([text], { type: "image/png" });

  it("sends one image as `image`, several as `image[]`, then the mask, fields as text", async () => {
    const one = buildSubmission({
      ...EMPTY,
      mode: "edit",
      n: "2",
      inputFidelity: "high",
      images: [png("a")],
      mask: png("m"),
    });
    if (!one.ok || one.submission.kind !== "edit") throw new Error("not an edit");
    const form = editFormData(one.submission);
    expect([...form.keys()]).toEqual(["model", "prompt", "n", "input_fidelity", "image", "mask"]);
    expect(form.get("n")).toBe("2");
    expect(await (form.get("image") as Blob).text()).toBe("a");
    expect(await (form.get("mask") as Blob).text()).toBe("m");

    const two = buildSubmission({ ...EMPTY, mode: "edit", images: [png("a"), png("b")] });
    if (!two.ok || two.submission.kind !== "edit") throw new Error("not an edit");
    const several = editFormData(two.submission);
    expect(several.getAll("image[]")).toHaveLength(2);
    expect(several.has("image")).toBe(false);
    expect(several.has("mask")).toBe(false);
  });
});
