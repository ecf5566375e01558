import { z } from "zod";
import { fromText, url } from "./field-types.js";

/** `s3://bucket` or `s3://bucket/some/prefix`: a bucket name as S3, R2 and MinIO take them. */
const S3_URL = /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[A-Za-z0-9!_.*'()/-]*)?$/;

/** An optional text field where "" (an unset `${VAR}`) means unset. */
const optionalText = z
  .string({ error: "must be a string" })
  .transform((value) => value || undefined)
  .optional();

/** Where an `s3://` image store is and how to sign in to it. */
const s3Schema = z
  .object({
    /**
     * An S3-compatible endpoint, e.g. `http://minio:9000` or
     * `https://<account>.r2.cloudflarestorage.com`. Default: AWS S3 in
     * `region` (also when empty, as an unset `${VAR}` is).
     */
    endpoint: z.preprocess((value) => (value === "" ? undefined : value), url.optional()),
    /** The bucket's region. Default `us-east-1` (R2: `auto`). */
    region: z
      .string({ error: "must be a string" })
      .min(1, "must not be empty")
      .default("us-east-1"),
    /**
     * `http://endpoint/bucket/key` rather than `http://bucket.endpoint/key`:
     * true for MinIO and most self-hosted stores. Default false.
     */
    forcePathStyle: fromText(z.boolean({ error: "must be true or false" })).default(false),
    /**
     * Access key id; with {@link secretAccessKey}. Default: the SDK's own chain
     * (`AWS_ACCESS_KEY_ID`, a profile, an instance or pod role), also when
     * empty.
     */
    accessKeyId: optionalText,
    /** The secret of {@link accessKeyId}; never printed or logged. */
    secretAccessKey: optionalText,
    /** A session token for temporary credentials. Default: none. */
    sessionToken: optionalText,
  })
  .strict()
  .refine((s3) => Boolean(s3.accessKeyId) === Boolean(s3.secretAccessKey), {
    error: "accessKeyId and secretAccessKey go together: set both, or neither",
    path: ["secretAccessKey"],
  });

/** Where image bytes live, apart from the task store, and how clients reach them. */
export const imagesSchema = z
  .object({
    /**
     * `memory://` (this process), `file://./data/images` (a directory;
     * relative to the working directory) or `s3://bucket/prefix` (any
     * S3-compatible store). Default: `memory://` with the memory task store,
     * else `file://` beside the SQLite file (`./data/images` in the embedded
     * defaults); with Redis, `file://./data/images`, which every replica must
     * mount (start-up warns). `IMAGES_URL` overrides it.
     */
    url: z
      .string({ error: "must be an image store URL" })
      .refine(
        (value) => value === "memory://" || /^file:\/\/.+/.test(value) || S3_URL.test(value),
        "must be memory://, file://<directory> or s3://<bucket>[/<prefix>]",
      )
      .optional(),
    /** Only with `s3://`: endpoint, region, addressing and credentials. */
    s3: s3Schema.prefault({}),
    /**
     * What `url` items point at: `service` (default: the service's own signed
     * links, streamed from the image store), `presigned` (S3 presigned links,
     * valid until the task expires, at most 7 days; `s3://` only) or `public`
     * (`publicBaseUrl` + the object key, for a CDN or a public bucket).
     */
    links: z
      .enum(["service", "presigned", "public"], {
        error: "must be service, presigned or public",
      })
      .default("service"),
    /** Only with `links: public`: the base of image links, e.g. `https://cdn.example.com/images`. */
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
      .optional(),
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
  .prefault({});

/** The `images` section, defaults filled in. */
export type ImagesConfig = z.infer<typeof imagesSchema>;
