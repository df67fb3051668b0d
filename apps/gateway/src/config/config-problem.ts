/** One thing wrong with a config file: where, what was found, and how to fix it. */
export type ConfigProblem = { file: string; path: string; message: string };

export function formatProblem(problem: ConfigProblem): string {
  return `${problem.file}: ${problem.path || "(root)"}: ${problem.message}`;
}

/** Short, single-line rendering of a value for error messages. */
export function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
