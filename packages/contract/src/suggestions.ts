/** Edit distance (insertions, deletions, substitutions) between two short strings. */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The candidates closest to `word` for a "did you mean" hint: case-insensitive edit distance within a
 * third of the word's length (at least 2), nearest first, ties in candidate order.
 */
export function closestMatches(word: string, candidates: Iterable<string>, limit = 3): string[] {
  const lower = word.toLowerCase();
  const budget = Math.max(2, Math.floor(lower.length / 3));
  const scored: Array<{ candidate: string; distance: number; order: number }> = [];
  let order = 0;
  for (const candidate of candidates) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance <= budget) scored.push({ candidate, distance, order });
    order++;
  }
  scored.sort((x, y) => x.distance - y.distance || x.order - y.order);
  return scored.slice(0, limit).map((entry) => entry.candidate);
}
