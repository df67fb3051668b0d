/**
 * Text analysis shared by indexing and querying: identifier-aware tokenizing, stop words, a light
 * suffix stemmer, and query-side synonyms that map how people ask for things onto the words tool
 * authors use in names and descriptions.
 */

const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    "a an the of to in on for and or with from by at as is are be it its this that these those my me i " +
    "some any all into onto via using use can could would should will please want need how what which " +
    "there their them then than so do does did about up out"
  ).split(" "),
);

/** Splits on anything but letters and digits, and at camelCase and letter/digit boundaries. */
export function tokenize(text: string): string[] {
  const spaced = text.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2");
  return spaced.split(/[^\p{L}\p{N}]+/u).filter((token) => token !== "");
}

/**
 * A deliberately small stemmer: folds plurals and -ing/-ed forms and a final silent "e" so that
 * "files", "file", "creating", "created" and "create" meet on one term. Applied to index and query alike,
 * so it only has to be consistent, not linguistically exact.
 */
export function stem(word: string): string {
  let term = word;
  if (term.length > 4 && term.endsWith("ies")) term = `${term.slice(0, -3)}y`;
  else if (term.length > 4 && /(sses|xes|ches|shes)$/.test(term)) term = term.slice(0, -2);
  else if (term.length > 3 && term.endsWith("s") && !/(ss|us|is)$/.test(term)) term = term.slice(0, -1);
  if (term.length > 5 && term.endsWith("ing")) term = undouble(term.slice(0, -3));
  else if (term.length > 4 && term.endsWith("ed")) term = undouble(term.slice(0, -2));
  if (term.length > 3 && term.endsWith("e")) term = term.slice(0, -1);
  return term;
}

function undouble(term: string): string {
  return /([bdfgmnprt])\1$/.test(term) ? term.slice(0, -1) : term;
}

// Catalog texts repeat a small vocabulary, so the stems of tokens seen once are kept. The cache is
// bounded so a stream of unusual words cannot grow it without end.
const stemCache = new Map<string, string | null>();
const STEM_CACHE_LIMIT = 50_000;

/** One token as an index term: lower-cased and stemmed, or null for a stop word. */
export function termOf(token: string): string | null {
  const cached = stemCache.get(token);
  if (cached !== undefined) return cached;
  const lower = token.toLowerCase();
  const term = STOP_WORDS.has(lower) ? null : stem(lower);
  if (stemCache.size < STEM_CACHE_LIMIT) stemCache.set(token, term);
  return term;
}

/** Lower-cased, stemmed terms of a text, stop words dropped. */
export function analyze(text: string): string[] {
  const terms: string[] = [];
  for (const token of tokenize(text)) {
    const term = termOf(token);
    if (term !== null) terms.push(term);
  }
  return terms;
}

// Everyday words on the left, the vocabulary tools are written in on the right. Keys and values are
// plain words; both sides go through the same stemmer.
const SYNONYMS: Record<string, string> = {
  folder: "directory",
  dir: "directory",
  directories: "directory",
  ls: "list directory",
  website: "page browser url",
  webpage: "page browser url",
  site: "page browser url",
  web: "page browser url internet",
  open: "navigate",
  visit: "navigate url",
  go: "navigate",
  browse: "browser navigate",
  remember: "memory observation entity",
  memorize: "memory observation entity",
  fact: "observation",
  note: "observation",
  person: "entity",
  people: "entity",
  pr: "pull request",
  prs: "pull request",
  repo: "repository",
  repos: "repository",
  remove: "delete",
  erase: "delete",
  rename: "move",
  find: "search",
  lookup: "search",
  look: "search",
  capture: "screenshot snapshot",
  picture: "image screenshot",
  photo: "image",
  image: "media image",
  execute: "run exec evaluate",
  run: "exec execute evaluate",
  shell: "command exec",
  terminal: "command exec shell",
  bash: "command shell exec",
  chat: "message channel",
  notify: "message send",
  tell: "message send",
  docs: "documentation",
  documentation: "doc",
  ci: "status check",
  checks: "status check",
  dropdown: "select option",
  choose: "select",
  pick: "select choose",
  sum: "add",
  environment: "env",
  variables: "env",
  download: "fetch",
  save: "write",
  store: "write",
  show: "get list view",
  display: "get view",
  make: "create",
  new: "create",
  add: "create",
  think: "thinking reflective",
  reason: "thinking",
  keyboard: "key",
  type: "text input",
  log: "console message",
  logs: "console message",
  history: "list",
  link: "relation",
  connect: "relation",
  upload: "file upload",
  metadata: "info",
  size: "info",
  compress: "gzip",
  zip: "gzip compress",
  meeting: "event calendar",
  appointment: "event calendar",
  schedule: "calendar event create",
  email: "message send",
  several: "multiple",
  many: "multiple",
  batch: "multiple",
};

// Built on the first query rather than at import: the Unicode-aware tokenizer's first use costs
// milliseconds that a run which never searches should not pay.
let stemmedSynonyms: ReadonlyMap<string, string[]> | undefined;
function synonymsOf(term: string): readonly string[] {
  stemmedSynonyms ??= new Map(
    Object.entries(SYNONYMS).map(([word, expansion]) => [stem(word), analyze(expansion)]),
  );
  return stemmedSynonyms.get(term) ?? [];
}

export type WeightedTerm = { term: string; weight: number };

/**
 * The query's own terms at full weight plus their synonyms at a lower weight, de-duplicated (a term
 * keeps its highest weight), so synonyms widen recall without outvoting what was actually asked.
 */
export function expandQuery(query: string, synonymWeight: number): WeightedTerm[] {
  const weights = new Map<string, number>();
  const base = analyze(query);
  for (const term of base) weights.set(term, 1);
  for (const term of base) {
    for (const synonym of synonymsOf(term)) {
      if (!weights.has(synonym)) weights.set(synonym, synonymWeight);
    }
  }
  return [...weights].map(([term, weight]) => ({ term, weight }));
}
