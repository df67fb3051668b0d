import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { keepShapes } from "../src/keep-shapes.js";

setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;
const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 0));

class Sample {
  at = 0.5;
}

describe("keepShapes", () => {
  it("keeps what it is given through a full garbage collection, while an object not given goes", async () => {
    let given: Sample | null = new Sample();
    let other: Sample | null = new Sample();
    const givenRef = new WeakRef(given);
    const otherRef = new WeakRef(other);
    keepShapes(given);
    given = null;
    other = null;
    await nextTurn();
    collectGarbage();
    await nextTurn();
    expect(givenRef.deref()).toBeInstanceOf(Sample);
    expect(otherRef.deref()).toBeUndefined();
  });
});
