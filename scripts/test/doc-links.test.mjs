import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Every relative link in every README.md and docs/*.md page must lead to a file or folder that exists,
// and a #anchor to a heading of the target, named the way GitHub names it.
const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
const SKIPPED_FOLDERS = new Set(["node_modules", ".git", "dist", ".turbo", "coverage", "bench-results"]);

function readmes(folder) {
  const found = [];
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!SKIPPED_FOLDERS.has(entry.name)) found.push(...readmes(join(folder, entry.name)));
    } else if (entry.name === "README.md") found.push(join(folder, entry.name));
  }
  return found;
}

function documents() {
  const docs = join(root, "docs");
  const pages = existsSync(docs)
    ? readdirSync(docs)
        .filter((name) => name.endsWith(".md"))
        .map((name) => join(docs, name))
    : [];
  return [...readmes(root), ...pages].sort();
}

/** The text without fenced code blocks (a link or heading inside one is code, not markdown). */
function outsideFences(text) {
  const lines = text.split("\n");
  let fence = null;
  return lines.map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence === null && open) {
      fence = open[1];
      return "";
    }
    if (fence !== null) {
      if (line.trimStart().startsWith(fence)) fence = null;
      return "";
    }
    return line;
  });
}

/** GitHub's heading anchor: lower case, punctuation dropped (but `-` and `_`), each space a `-`. */
export function slug(heading) {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // a link in a heading keeps its text
    .replace(/<[^>]+>/g, "")
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "").replace(/ /g, "-");
}

export function anchorsOf(text) {
  const anchors = new Set();
  const seen = new Map();
  for (const line of outsideFences(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  for (const match of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(match[1]);
  return anchors;
}

export function linksOf(text) {
  const links = [];
  outsideFences(text).forEach((line, index) => {
    const prose = line.replace(/(`+)[^`]*?\1/g, ""); // inline code is not a link
    for (const match of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) {
      links.push({ target: match[1], line: index + 1 });
    }
    const reference = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(prose);
    if (reference) links.push({ target: reference[1], line: index + 1 });
  });
  return links;
}

function problemsOf(file, text = readFileSync(file, "utf8")) {
  const problems = [];
  for (const { target, line } of linksOf(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: and the like
    const hash = target.indexOf("#");
    const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
    const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const where = `${relative(root, file)}:${line}: ${target}`;
    const destination = path === "" ? file : resolve(dirname(file), path);
    if (!existsSync(destination)) {
      problems.push(`${where}: ${relative(root, destination)} does not exist`);
      continue;
    }
    if (anchor === undefined || anchor === "") continue;
    if (statSync(destination).isDirectory() || !destination.endsWith(".md")) {
      problems.push(
        `${where}: an anchor needs a Markdown file, and ${relative(root, destination)} is not one`,
      );
      continue;
    }
    const targetText = destination === file ? text : readFileSync(destination, "utf8");
    if (!anchorsOf(targetText).has(anchor)) {
      problems.push(`${where}: ${relative(root, destination)} has no heading with the anchor #${anchor}`);
    }
  }
  return problems;
}

describe("links in the documentation", () => {
  it("names headings the way GitHub does", () => {
    expect(slug("@codecell/gateway: the `codecell` command")).toBe("codecellgateway-the-codecell-command");
    expect(slug("Several replicas behind a load balancer (Redis)")).toBe(
      "several-replicas-behind-a-load-balancer-redis",
    );
    expect(slug("The MCP surface, sessions and approvals")).toBe("the-mcp-surface-sessions-and-approvals");
    expect(slug("Promises: what is and is not guaranteed")).toBe("promises-what-is-and-is-not-guaranteed");
    expect(slug("snake_case and dash-case")).toBe("snake_case-and-dash-case");
    expect([...anchorsOf("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n")]).toEqual([
      "a",
      "notes",
      "notes-1",
    ]);
  });

  it("finds links outside code and skips those inside it", () => {
    const text = "see [a](a.md#x) and ![b](img/b.png 'no')\n`[c](c.md)`\n```\n[d](d.md)\n```\n[e]: ./e.md\n";
    expect(linksOf(text).map((link) => link.target)).toEqual(["a.md#x", "img/b.png", "./e.md"]);
  });

  it("reports a missing file, a missing anchor and an anchor into a folder", () => {
    const text = [
      "[fine](docs/security.md#the-boundary), [folder](packages/contract), [web](https://example.com/x#y)",
      "[here](#a-heading-here)",
      "[gone](docs/no-such-page.md) [wrong](docs/security.md#no-such-heading) [into](packages#x)",
      "# A heading here",
    ].join("\n");
    const problems = problemsOf(join(root, "README.md"), text);
    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(
      /^README\.md:3: docs\/no-such-page\.md: docs\/no-such-page\.md does not exist$/,
    );
    expect(problems[1]).toMatch(/has no heading with the anchor #no-such-heading$/);
    expect(problems[2]).toMatch(/an anchor needs a Markdown file/);
  });

  const files = documents();
  it("covers the root README and the docs/ pages", () => {
    expect(files.map((file) => relative(root, file))).toContain("README.md");
    expect(files.some((file) => relative(root, file).startsWith(join("docs", "")))).toBe(true);
  });

  it.each(files.map((file) => [relative(root, file), file]))(
    "%s: every relative link resolves",
    (_name, file) => {
      expect(problemsOf(file)).toEqual([]);
    },
  );
});

/**
 * Each registry route to a codecell package in `text`: `npx -y @codecell/gateway`, `npm install
 * @codecell/engine` and the like, with the paragraph (blank-line separated, a code block with the prose
 * right before it) it stands in.
 */
export function registryRoutes(text) {
  const routes = [];
  const paragraphs = text.split(/\n\s*\n/);
  paragraphs.forEach((paragraph, index) => {
    const context = paragraph.trimStart().startsWith("```")
      ? `${paragraphs[index - 1] ?? ""}\n${paragraph}`
      : paragraph;
    for (const match of paragraph.matchAll(
      /(?:npx(?: -y| --yes)?|npm (?:install|i|add)|pnpm (?:add|dlx)|yarn (?:add|dlx)) @codecell\/[\w-]+/g,
    )) {
      routes.push({ route: match[0], context });
    }
  });
  return routes;
}

/** A route that only works once the packages are on the registry must say so where it stands. */
const SAYS_UNPUBLISHED = /once (?:the packages are |they are |it is )?published|not on the npm registry/i;

describe("install routes in the documentation", () => {
  it("finds registry routes and the paragraph around them", () => {
    const text =
      "Run it:\n\n`npx -y @codecell/gateway serve`\n\nOnce published, `npm install @codecell/engine`.\n";
    const routes = registryRoutes(text);
    expect(routes.map((found) => found.route)).toEqual([
      "npx -y @codecell/gateway",
      "npm install @codecell/engine",
    ]);
    expect(routes.map((found) => SAYS_UNPUBLISHED.test(found.context))).toEqual([false, true]);
  });

  // Nothing is published on npm yet: a page may show a registry route only where it says it works once
  // the packages are published, next to the route that works today (a clone, or packed tarballs).
  it.each(documents().map((file) => [relative(root, file), file]))(
    "%s: shows a registry install only as what works once published",
    (_name, file) => {
      const unmarked = registryRoutes(readFileSync(file, "utf8"))
        .filter((found) => !SAYS_UNPUBLISHED.test(found.context))
        .map((found) => found.route);
      expect(unmarked).toEqual([]);
    },
  );

  it("the root README runs pnpm only as the pinned one through npx, never a global pnpm", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const inlineCode = [...readme.matchAll(/`([^`\n]+)`/g)].map((match) => match[1]);
    const fenced = [...readme.matchAll(/```(?:sh|bash)\n([\s\S]*?)```/g)].flatMap((match) =>
      match[1].split("\n"),
    );
    const global = [...inlineCode, ...fenced].filter((command) => /^\s*pnpm\s/.test(command));
    expect(global).toEqual([]);
  });
});
