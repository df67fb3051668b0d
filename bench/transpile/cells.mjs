// Cells for the benchmark, shaped like what a model writes: types, a few tool calls, some data shaping.

export const typescriptCell = `interface Issue {
  id: number;
  title: string;
  labels: string[];
  state: "open" | "closed";
}
type Summary = { total: number; byLabel: Record<string, number> };
enum Priority { Low, High }
const issues = <Issue[]>(await tools.call("github_list_issues", { state: "open" }));
const summary: Summary = { total: issues.length, byLabel: {} };
for (const issue of issues) {
  for (const label of issue.labels) {
    summary.byLabel[label] = (summary.byLabel[label] ?? 0) + 1;
  }
}
const urgent = issues.filter((issue): issue is Issue => issue.labels.includes("urgent"));
const pick = <T,>(items: T[], count: number): T[] => items.slice(0, count);
text(\`\${urgent.length} urgent of \${summary.total}\`);
return { summary, top: pick(urgent, 3).map((issue) => issue.title), priority: Priority.High } as const;
`;

/** A 200-line JavaScript cell: the same honest block with fresh names, mentioning the guarded words. */
export function javascriptCellOfLines(lines) {
  const block = (index) => [
    `// step ${index}: the word import in a comment, require too`,
    `const result${index} = await tools.call("search_${index}", { query: "import require ${index}" });`,
    `const rows${index} = (result${index}?.items ?? []).filter((row) => /require|import/.test(row.name));`,
    `const text${index} = \`\${rows${index}.length} rows for step ${index}\`;`,
    `if (rows${index}.length > ${index}) { json({ step: ${index}, count: rows${index}.length }); }`,
  ];
  const out = [];
  for (let index = 0; out.length < lines - 1; index++) out.push(...block(index));
  out.length = lines - 1;
  out.push("return 'done';");
  return out.join("\n");
}

/** A 200-line TypeScript cell built the same way, with annotations on every block. */
export function typescriptCellOfLines(lines) {
  const block = (index) => [
    `type Row${index} = { name: string; score: number };`,
    `const result${index} = (await tools.call("search_${index}", { query: "q${index}" })) as { items?: Row${index}[] };`,
    `const rows${index}: Row${index}[] = (result${index}.items ?? []).filter((row: Row${index}) => row.score > ${index});`,
    `const best${index} = <const>[rows${index}[0]?.name ?? "none", ${index}];`,
    `if (rows${index}.length > 0) { json({ step: ${index}, best: best${index}[0]! }); }`,
  ];
  const out = [];
  for (let index = 0; out.length < lines - 1; index++) out.push(...block(index));
  out.length = lines - 1;
  out.push("return 'done';");
  return out.join("\n");
}
