import { z } from "zod";
import { fromText, positiveInt, url } from "./field-types.js";
import { imagesUrlProblem } from "./images-url.js";

/** An optional text field where "" (an unset `${VAR}`) means unset. */
const optionalText = z
  .string({ error: "must be a string" })
  .transform((value) => value || undefined)
  .optional();

/** Where an `s3://` image store is and how to sign in to it. */
const s3Schema = z
  .object({
    endpoint: z
      .preprocess((value) => (value === "" ? undefined : value), url.optional())
      .meta({
        description:
          "An S3-compatible endpoint, e.g. `http://minio:9000` or " +
          "`https://<account>.r2.cloudflarestorage.com`. Default: AWS S3 in `region` (also when " +
          "empty, as an unset `${VAR}` is).",
      }),
    region: z
      .string({ error: "must be a string" })
      .min(1, "must not be empty")
      .default("us-east-1")
      .meta({ description: "The bucket's region (Cloudflare R2: `auto`)." }),
    forcePathStyle: fromText(z.boolean({ error: "must be true or false" }))
      .default(false)
      .meta({
        description:
          "Address objects as `http://endpoint/bucket/key` rather than " +
          "`http://bucket.endpoint/key`: true for MinIO and most self-hosted stores.",
      }),
    accessKeyId: optionalText.meta({
      description:
        "Access key id, with `secretAccessKey`. Default: the SDK's own chain " +
        "(`AWS_ACCESS_KEY_ID`, a profile, an instance or pod role), also when empty.",
    }),
    secretAccessKey: optionalText.meta({
      description: "The secret of `accessKeyId`; never printed or logged.",
    }),
    sessionToken: optionalText.meta({
      description: "A session token for temporary credentials. Default: none.",
    }),
  })
  .strict()
  .refine((s3) => Boolean(s3.accessKeyId) === Boolean(s3.secretAccessKey), {
    error: "accessKeyId and secretAccessKey go together: set both, or neither",
    path: ["secretAccessKey"],
  });

/** Where image bytes live, apart from the task store, and how clients reach them. */
export const imagesSchema = z
  .object({
    url: z
      .string({ error: "must be an image store URL" })
      .superRefine((value, ctx) => {
        const problem = imagesUrlProblem(value);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional()
      .meta({
        description:
          "The image store: `memory://` (this process), `file://./data/images` (a directory, " +
          "relative to the working directory) or `s3://bucket/prefix` (any S3-compatible " +
          "store). Default: `memory://` with the memory task store, else `file://` beside the " +
          "SQLite file (`./data/images` in the embedded defaults); with Redis " +
          "`file://./data/images`, which every replica must mount (start-up warns). " +
          "`IMAGES_URL` overrides it.",
      }),
    s3: s3Schema.prefault({}).meta({
      description: "Only with `s3://`: endpoint, region, addressing and credentials.",
    }),
    connectTimeoutSec: positiveInt("seconds")
      .default(10)
      .meta({
        description:
          "Seconds start-up waits for an image store that does not answer (an endpoint that " +
          "refuses or drops connections) before it gives up with exit code 2 and a line naming " +
          "the field and the error. A store that answers with a refusal that cannot heal (no " +
          "bucket, a wrong key, no rights, a directory that cannot be written) stops start-up at " +
          "once.",
      }),
    writeRetrySec: positiveInt("seconds")
      .default(60)
      .meta({
        description:
          "Seconds a running task retries writing its images while the image store fails " +
          "(within the task's own timeout), before the task fails `storage_unavailable`. A " +
          "refusal that cannot heal fails the task at once.",
      }),
    checkIntervalSec: positiveInt("seconds")
      .default(15)
      .meta({
        description:
          "Seconds between checks of the image store while it works (on `s3://`, a check is a " +
          "`HeadBucket` and a small object written, read and deleted); every 2 s while it " +
          "fails, and at once when a real write fails; a check with no answer within 5 s " +
          "counts once the next, 2 s later, has none either. `/readyz` reports the last check " +
          "and never checks itself, so however often it is called the store sees no more than " +
          "this.",
      }),
    links: z
      .enum(["service", "presigned", "public"], {
        error: "must be service, presigned or public",
      })
      .default("service")
      .meta({
        description:
          "What `url` items point at: `service` (the service's own signed links, streamed from " +
          "the image store), `presigned` (S3 presigned links, valid until the task expires, at " +
          "most 7 days; `s3://` only) or `public` (`publicBaseUrl` + the object key, for a CDN " +
          "or a public bucket).",
      }),
    publicBaseUrl: z
      .string({ error: "must be a URL" })
      .refine((value) => {
        try {
          const url = new URL(value);
          return (url.protocol === "https:" || url.protocol === "http:") && !url.search;
        } catch {
          return false;
        }
      }, "must be an http(s) URL without a query, such as https://cdn.example.com/images")
      .transform((value) => value.replace(/\/+$/, ""))
      .optional()
      .meta({
        description:
          "Only with `links: public` (and required there): the base of image links, e.g. " +
          "`https://cdn.example.com/images`.",
      }),
  })
  .strict()
  .superRefine((images, ctx) => {
    if (images.links === "presigned" && !images.url?.startsWith("s3://")) {
      ctx.addIssue({
        code: "custom",
        path: ["links"],
        message: "presigned links need an s3:// image store (images.url)",
      });
    }
    if (images.links === "public" && !images.publicBaseUrl) {
      ctx.addIssue({
        code: "custom",
        path: ["publicBaseUrl"],
        message: "is required with links: public",
      });
    }
  })
  .prefault({})
  .meta({
    description:
      "The image store: where image bytes live (results, and an edit task's input images), " +
      "apart from the task store, and how clients reach them.",
  });

/** The `images` section, defaults filled in. */
export type ImagesConfig = z.infer<typeof imagesSchema>;
