import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { dayOf, resultKey } from "../../src/images/image-keys.js";
import { createFileImageStore } from "../../src/images/file-image-store.js";

/*
 * Two replicas on one `file://` directory (the documented alternative to S3):
 * one writes images into today's and tomorrow's folders while the other runs
 * the store check and deletes what it wrote, as expiry and cancels do. Before
 * day folders were kept, the deleting side removed a folder the writing side
 * had just made, and the write failed with ENOENT.
 */

let dir: string;
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("a file:// image directory shared by two replicas", () => {
  it("never refuses a write because the other replica checked or deleted meanwhile", async () => {
    dir = await mkdtemp(join(tmpdir(), "shared-images-"));
    const writer = createFileImageStore({ dir });
    const other = createFileImageStore({ dir });
    const nowSec = Math.floor(Date.now() / 1000);
    const png = Buffer.from("not really a png, but bytes");
    const failures: unknown[] = [];
    let writing = true;

    // The other replica: checks and deletes its own images in today's folder, in a loop.
    const churn = (async () => {
      let n = 0;
      while (writing) {
        await other.check().catch((err: unknown) => failures.push(err));
        const key = resultKey(nowSec, `task_other${String(n++).padStart(20, "0")}`, 0, "image/png");
        await other.put(key, png, "image/png").catch((err: unknown) => failures.push(err));
        await other.delete([key]).catch((err: unknown) => failures.push(err));
      }
    })();
    const writes = Array.from({ length: 400 }, (_, n) =>
      writer.put(
        resultKey(
          nowSec + (n % 2) * 86_400,
          `task_w${String(n).padStart(21, "0")}`,
          0,
          "image/png",
        ),
        png,
        "image/png",
      ),
    );
    const results = await Promise.allSettled(writes);
    writing = false;
    await churn;

    expect(results.filter((result) => result.status === "rejected")).toEqual([]);
    expect(failures).toEqual([]);
    // Today's folder stays (another replica writes there); a past day's empty folder goes.
    expect(await readdir(dir)).toContain(dayOf(nowSec));
    const past = resultKey(nowSec - 3 * 86_400, `task_p${"0".repeat(21)}`, 0, "image/png");
    await writer.put(past, png, "image/png");
    await writer.delete([past]);
    expect(await readdir(dir)).not.toContain(dayOf(nowSec - 3 * 86_400));
  });
});
