import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXAMPLES } from "../src/examples.js";
import { CHROMIUM, CHROMIUM_FLAGS, type RunningGateway, startGateway } from "./browser-harness.mjs";
import { EXPECTATIONS } from "./example-expectations.js";

const ARTIFACTS = fileURLToPath(new URL("../test-artifacts/", import.meta.url));
const hasChromium = existsSync(CHROMIUM);
const required = process.env.CODECELL_REQUIRE_BROWSER === "1";
const skip = !hasChromium && !required;
if (skip) {
  console.warn(
    `Chromium not found at ${CHROMIUM}: browser tests skipped; install the Debian packages chromium and chromium-driver`,
  );
}

// Counted on its own, so a CI run that demands the browser reports a failed test, not only skipped ones.
it("finds Chromium when CODECELL_REQUIRE_BROWSER=1 demands the browser tests", () => {
  if (required) expect(hasChromium, `Chromium was not found at ${CHROMIUM}`).toBe(true);
});

describe.skipIf(skip)("the playground in headless Chromium", () => {
  let gateway: RunningGateway;
  let context: BrowserContext;
  let page: Page;
  let userDataDir: string;
  const consoleErrors: string[] = [];
  let settled = 0;

  /** Clicks Run (or presses the shortcut) and waits for the result of that call. */
  async function run(how: "click" | "keys" = "click"): Promise<string> {
    if (how === "click") await page.getByTestId("run").click();
    else {
      await page.getByTestId("editor-content").click();
      await page.keyboard.press("Control+Enter");
    }
    return settle();
  }

  async function settle(): Promise<string> {
    settled += 1;
    await page.waitForSelector(`[data-testid="result-area"][data-settled="${settled}"]`, { timeout: 30_000 });
    return (await page.getByTestId("status").textContent()) ?? "";
  }

  async function showTab(name: string): Promise<void> {
    await page.getByRole("tab", { name }).click();
    await page.getByTestId(`panel-${name.toLowerCase()}`).waitFor({ state: "visible" });
  }

  beforeAll(async () => {
    if (!hasChromium) {
      throw new Error(
        `CODECELL_REQUIRE_BROWSER=1 but Chromium was not found at ${CHROMIUM}; install the Debian packages chromium and chromium-driver`,
      );
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    gateway = await startGateway();
    userDataDir = mkdtempSync(join(tmpdir(), "codecell-chromium-"));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1280, height: 800 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(message.text());
    });
    page.on("pageerror", (error) => consoleErrors.push(`page error: ${error.message}`));
    await page.goto(gateway.url);
    await page.waitForSelector('[data-testid="connection"][data-state="connected"]', { timeout: 30_000 });
  });

  afterAll(async () => {
    await context?.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
    if (gateway) expect(await gateway.stop()).toBe(0);
  });

  it("opens connected to the gateway, with the first example loaded", async () => {
    expect(await page.title()).toBe("codecell playground");
    expect(await page.getByTestId("connection").textContent()).toMatch(/Connected to codecell/);
    expect(await page.getByTestId("examples").inputValue()).toBe(EXAMPLES[0]!.id);
    expect(await page.getByTestId("editor-content").textContent()).toContain("tools.search");
    expect(await page.getByTestId("wait").isDisabled()).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, "01-start.png") });
  });

  for (const [index, example] of EXAMPLES.entries()) {
    it(`runs the example "${example.title}" and shows what it produced`, async () => {
      const expected = EXPECTATIONS[example.id]!;
      await page.getByTestId("examples").selectOption(example.id);
      const languageInput = page.locator(`input[name="language"][value="${example.language}"]`);
      expect(await languageInput.isChecked()).toBe(true);

      // Every other example goes through the keyboard shortcut instead of the button.
      const badges = [await run(index % 2 === 0 ? "click" : "keys")];
      if (expected.badges[0]!.startsWith("waiting")) {
        expect(await page.getByTestId("waiting-reason").textContent()).toMatch(/yield_control/);
        expect(await page.getByTestId("wait").isEnabled()).toBe(true);
        await page.screenshot({ path: join(ARTIFACTS, `02-${example.id}-waiting.png`) });
        await page.getByTestId("wait").click();
        badges.push(await settle());
        expect(await page.getByTestId("wait").isDisabled()).toBe(true);
      }
      expect(badges).toEqual(expected.badges);

      const shown = (await page.getByTestId("result").textContent()) ?? "";
      for (const text of expected.shows) expect(shown).toContain(text);
      if (expected.errorLine !== undefined) {
        const link = page.getByTestId("error-line");
        expect(await link.textContent()).toMatch(new RegExp(`^line ${expected.errorLine}\\b`));
        await link.click();
        const marked = page.locator(".cm-error-line");
        expect(await marked.count()).toBe(1);
        expect(await marked.textContent()).toContain('import("node:fs")');
      }

      await showTab("Trajectory");
      const newest = page.getByTestId("trajectory-call").first();
      const nested = await newest
        .getByTestId("trajectory-nested")
        .locator(".trajectory-tool")
        .allTextContents();
      // A wait's calls were made under the exec it continued: look one call further back then.
      const all =
        expected.badges.length > 1
          ? await page
              .getByTestId("trajectory-call")
              .nth(1)
              .getByTestId("trajectory-nested")
              .locator(".trajectory-tool")
              .allTextContents()
          : nested;
      expect([...(expected.badges.length > 1 ? [...nested, ...all] : nested)].sort()).toEqual(
        [...expected.nestedTools].sort(),
      );
      await page.screenshot({ path: join(ARTIFACTS, `03-${example.id}.png`) });
    });
  }

  it("shows the last result's telemetry", async () => {
    await page.getByTestId("examples").selectOption("parallel");
    expect(await run()).toBe("completed");
    await showTab("Telemetry");
    const table = page.getByTestId("telemetry-table");
    expect(await table.locator("tr", { hasText: "nested calls" }).first().textContent()).toContain("4");
    expect(await table.locator("tr", { hasText: "tools the model sees" }).textContent()).toContain(
      "exec, wait",
    );
    expect(await page.getByTestId("panel-telemetry").locator(".id-list li").count()).toBe(4);
  });

  it("browses the catalog with tools.search's ranking and describes a tool", async () => {
    await showTab("Catalog");
    const list = page.getByTestId("catalog-list");
    await list.locator("li").first().waitFor();
    const ids = await list.locator(".tool-id").allTextContents();
    expect(ids).toEqual(expect.arrayContaining(["core:codecell:read_file", "plugin:notes:notes_add"]));
    await page.getByTestId("catalog-search").fill("read a text file");
    await page.getByTestId("catalog-search").press("Enter");
    await page.waitForFunction(() =>
      document.querySelector(".panel-status")?.textContent?.includes("ranked by tools.search"),
    );
    expect(await list.locator(".tool-id").first().textContent()).toBe("core:codecell:read_file");
    await list.locator(".tool-button").first().click();
    const detail = page.getByTestId("catalog-detail");
    await detail.locator(".json-tree").waitFor();
    expect(await detail.textContent()).toContain("Path relative to the workspace");
    await page.screenshot({ path: join(ARTIFACTS, "04-catalog.png") });
  });

  it("lists the virtual API files and shows one", async () => {
    await showTab("API");
    const files = page.getByTestId("api-list").locator(".file-button code");
    await files.first().waitFor();
    expect(await files.allTextContents()).toEqual(["mcp/index.d.ts", "mcp/memory.d.ts"]);
    await page.getByTestId("api-list").locator('[data-path="mcp/memory.d.ts"]').click();
    await page.waitForFunction(() =>
      document
        .querySelector('[data-testid="api-viewer"] .cm-content')
        ?.textContent?.includes("createEntities"),
    );
    await page.screenshot({ path: join(ARTIFACTS, "05-api.png") });
  });

  it("asks before a call that needs approval, and a decline reaches the cell as an error", async () => {
    await page.getByTestId("editor-content").click();
    await page.keyboard.press("Control+a");
    await page.keyboard.insertText(
      'try { await tools.write_file({ path: "never.txt", content: "x" }); return "written"; }\ncatch (error) { return error.message; }',
    );
    await page.getByTestId("run").click();
    const dialog = page.getByTestId("approval");
    await dialog.waitFor({ state: "visible" });
    expect(await dialog.textContent()).toContain("core:codecell:write_file");
    await page.screenshot({ path: join(ARTIFACTS, "06-approval.png") });
    await dialog.getByRole("button", { name: "Decline" }).click();
    expect(await settle()).toBe("completed");
    expect(await page.getByTestId("value").textContent()).toMatch(/declined/);
    expect(
      existsSync(fileURLToPath(new URL("../../gateway/demo-workspace/never.txt", import.meta.url))),
    ).toBe(false);
  });

  it("moves between the inspector tabs with the arrow keys", async () => {
    await page.getByRole("tab", { name: "Trajectory" }).click();
    await page.keyboard.press("ArrowRight");
    expect(await page.getByRole("tab", { name: "Telemetry" }).getAttribute("aria-selected")).toBe("true");
    await page.keyboard.press("End");
    expect(await page.getByRole("tab", { name: "API" }).getAttribute("aria-selected")).toBe("true");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("API");
    await page.keyboard.press("ArrowRight");
    expect(await page.getByTestId("panel-trajectory").isVisible()).toBe(true);
  });

  it("shows no scrollbar in the inspector's tab strip", async () => {
    for (const width of [1280, 420]) {
      await page.setViewportSize({ width, height: 800 });
      const strip = await page.locator(".tabs").evaluate((node) => {
        const element = node as HTMLElement;
        const style = getComputedStyle(element);
        return {
          // A vertical scrollbar takes width out of the box: offsetWidth minus borders minus clientWidth.
          verticalScrollbar:
            element.offsetWidth -
            element.clientWidth -
            Number.parseFloat(style.borderLeftWidth) -
            Number.parseFloat(style.borderRightWidth),
          // With room for every tab, nothing overflows at all (no scrollbar either way).
          overflow: element.scrollHeight - element.clientHeight + (element.scrollWidth - element.clientWidth),
        };
      });
      expect(strip.verticalScrollbar, `vertical scrollbar at ${width} px`).toBe(0);
      if (width === 1280) expect(strip.overflow, "overflow at 1280 px").toBe(0);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("fits a narrow window: one column, no horizontal scrolling", async () => {
    await page.setViewportSize({ width: 420, height: 800 });
    await page.getByTestId("examples").selectOption("search-then-call");
    expect(await run()).toBe("completed");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    const [editor, inspector] = await Promise.all([
      page.getByTestId("editor").boundingBox(),
      page.locator(".inspector").boundingBox(),
    ]);
    expect(inspector!.y).toBeGreaterThan(editor!.y + editor!.height);
    await page.screenshot({ path: join(ARTIFACTS, "07-narrow.png"), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("logged no error to the console", () => {
    expect(consoleErrors).toEqual([]);
  });
});
