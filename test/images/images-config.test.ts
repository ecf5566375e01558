import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import { parseConfig } from "../../src/config/load-config.js";
import { parseS3Url } from "../../src/config/deployment.js";

const BASE = `groups:
  default: { models: ["*"] }
channels:
  - name: one
    baseUrl: http://127.0.0.1:9000/v1
    models: ["gpt-image-1"]
`;

const parse = (yaml: string, env: NodeJS.ProcessEnv = {}) => parseConfig(parseYaml(yaml), env);

function problemsOf(yaml: string): string[] {
  try {
    parse(yaml);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected the configuration to be refused");
}

describe("images config", () => {
  it("takes the section as documented, S3 credentials from the environment", () => {
    const config = parse(
      `${BASE}images:
  url: s3://my-bucket/some/prefix
  s3:
    endpoint: http://127.0.0.1:9000
    region: us-east-1
    forcePathStyle: true
    accessKeyId: \${S3_ACCESS_KEY_ID}
    secretAccessKey: \${S3_SECRET_ACCESS_KEY}
  links: presigned
`,
      { S3_ACCESS_KEY_ID: "AKIAEXAMPLE", S3_SECRET_ACCESS_KEY: "secret-example" },
    );
    expect(config.images).toEqual({
      url: "s3://my-bucket/some/prefix",
      s3: {
        endpoint: "http://127.0.0.1:9000",
        region: "us-east-1",
        forcePathStyle: true,
        accessKeyId: "AKIAEXAMPLE",
        secretAccessKey: "secret-example",
      },
      links: "presigned",
      connectTimeoutSec: 10,
      writeRetrySec: 60,
      checkIntervalSec: 15,
    });
    expect(parseS3Url(config.images.url!)).toEqual({ bucket: "my-bucket", prefix: "some/prefix" });
    expect(parseS3Url("s3://bucket")).toEqual({ bucket: "bucket", prefix: "" });
  });

  it("defaults to memory beside memory://, a directory beside the SQLite file, ./data/images beside Redis", () => {
    const of = (store: string) =>
      parse(`${BASE}store: { url: "${store}" }\n`).deployment.images.url;
    expect(of("memory://")).toBe("memory://");
    expect(of("sqlite:///var/lib/sidecar/tasks.db")).toBe("file:///var/lib/sidecar/images");
    expect(of("sqlite://./data/sidecar.db")).toBe(`file://${process.cwd()}/data/images`);
    expect(of("redis://127.0.0.1:6379")).toBe("file://./data/images");
    const config = parse(`${BASE}store: { url: "redis://127.0.0.1:6379" }\n`);
    expect(config.images).toMatchObject({ links: "service", s3: { region: "us-east-1" } });
  });

  it("takes IMAGES_URL over the file", () => {
    const config = parse(`${BASE}images: { url: "file:///srv/images" }\n`, {
      IMAGES_URL: "s3://from-env/prefix",
    });
    expect(config.images.url).toBe("s3://from-env/prefix");
  });

  it("refuses what cannot work, naming the field", () => {
    expect(problemsOf(`${BASE}images: { url: "ftp://x" }\n`)).toEqual([
      "images.url: must be memory://, file://<directory> or s3://<bucket>[/<prefix>]",
    ]);
    expect(problemsOf(`${BASE}images: { url: "s3://Bad_Bucket/x" }\n`)[0]).toMatch(/^images\.url:/);
    expect(problemsOf(`${BASE}images: { links: presigned }\n`)).toEqual([
      "images.links: presigned links need an s3:// image store (images.url)",
    ]);
    expect(problemsOf(`${BASE}images: { url: "s3://bucket", links: public }\n`)).toEqual([
      "images.publicBaseUrl: is required with links: public",
    ]);
    // Nothing but the service can serve memory:// images: such links could never work.
    const cdn = `publicBaseUrl: "https://cdn.example.com/i"`;
    for (const yaml of [
      `${BASE}images: { links: public, ${cdn} }\n`,
      `${BASE}store: { url: "sqlite://./x.db" }\nimages: { url: "memory://", links: public, ${cdn} }\n`,
    ]) {
      expect(problemsOf(yaml)).toEqual([
        "images.links: public links need an image store something else can serve (a file:// directory or s3://); memory:// images can only be reached through the service (links: service)",
      ]);
    }
    expect(problemsOf(`${BASE}images: { links: sometimes }\n`)).toEqual([
      "images.links: must be service, presigned or public",
    ]);
    expect(
      problemsOf(`${BASE}images: { url: "s3://bucket", s3: { accessKeyId: "AKIA" } }\n`),
    ).toEqual([
      "images.s3.secretAccessKey: accessKeyId and secretAccessKey go together: set both, or neither",
    ]);
    expect(problemsOf(`${BASE}images: { s3: { endpoint: "minio:9000" } }\n`)).toEqual([
      "images.s3.endpoint: must be a URL",
    ]);
    expect(problemsOf(`${BASE}images: { bucket: x }\n`)).toEqual(["images.bucket: unknown field"]);
  });

  it("keeps a public base URL without its trailing slash", () => {
    const config = parse(
      `${BASE}images: { url: "s3://bucket", links: public, publicBaseUrl: "https://cdn.example.com/images/" }\n`,
    );
    expect(config.images.publicBaseUrl).toBe("https://cdn.example.com/images");
  });
});
