import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../../src/server.js";
import { slow } from "../support/time-factor.js";
import {
  axeViolations,
  launchChromium,
  makeTask,
  openPage,
  signIn,
  startDemoService,
} from "./console-browser.js";

/*
 * axe-core's WCAG A and AA rules on every page of the console, in light and
 * dark mode: sign-in, the form (its options and the code unfolded), the
 * gallery, a task, and the full-size viewer.
 */
describe("the console under axe-core", { timeout: 120_000 }, () => {
  let browser: Browser;
  let service: RunningServer;

  beforeAll(async () => {
    [browser, service] = await Promise.all([launchChromium(), startDemoService(10)]);
    await makeTask(service, { prompt: "a lighthouse at dusk", n: 2 });
  }, slow(60_000));
  afterAll(async () => {
    await browser?.close();
    await service?.close(200);
  });

  for (const colorScheme of ["light", "dark"] as const) {
    it(`finds nothing on any page, ${colorScheme}`, async () => {
      const { page, problems } = await openPage(browser, { colorScheme });
      const found: Record<string, string[]> = {};
      await page.goto(`${service.url}/console/`);
      await page.getByLabel("API key").waitFor();
      found["sign-in"] = await axeViolations(page);
      await signIn(page, service.url);
      await page.getByText("More options").click();
      await page.getByText("Show the code").click();
      found.create = await axeViolations(page);
      await page.getByRole("link", { name: "Gallery" }).click();
      await page.locator(".card").first().waitFor();
      found.gallery = await axeViolations(page);
      await page.locator(".card").first().click();
      await page.getByRole("article", { name: "Task" }).waitFor();
      found.task = await axeViolations(page);
      await page.locator("article img[data-kind=result]").first().click();
      await page.getByRole("dialog").waitFor();
      found.viewer = await axeViolations(page);
      expect(found).toEqual({ "sign-in": [], create: [], gallery: [], task: [], viewer: [] });
      expect(problems).toEqual([]);
    });
  }
});
