/**
 * Zero as a double, for a number field that later holds times, deadlines or byte counts
 * (`performance.now()`, `Date.now() + ms`: doubles).
 *
 * V8 gives an object field the representation of the first value stored in it. A field that starts as
 * the small integer `0` and later holds a double has its representation changed, and that change
 * replaces the object's hidden class (map): optimized code that checked the old map is thrown away
 * ("wrong map"). Once would be cheap; but the objects of the nested-call path (a run's handle, an exec's
 * ready queue) live only while their cell runs, and when a full garbage collection finds none of them
 * alive it frees their maps, so the next cell builds them again with the small-integer field and changes
 * it again. A field that starts as a double never changes, whichever cell comes first.
 *
 * A `Float64Array` element is read as a heap number, so this is a double +0 (not `-0`, which is also
 * never a small integer but reads differently: `Object.is`, `1 / x`, and tests' `toBe(0)`).
 */
export const DOUBLE_ZERO: number = new Float64Array(1)[0] as number;
