/**
 * The bounded transcript (src/transcript.ts): absolute offsets, paging across
 * entries, the cap that drops the oldest entries while offsets keep their
 * meaning, and a long run checked against a reference string.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { Transcript, type TextPage } from "../src/core/transcript.js";

/** Every page must agree with the whole stream: the kept part is always its tail. */
function expectedPage(whole: string, start: number, offset: number, limit: number): TextPage {
  const from = Math.max(offset, start);
  const to = Math.min(whole.length, from + limit);
  return {
    offset: Math.min(from, whole.length),
    text: whole.slice(from, Math.max(from, to)),
    end: whole.length,
    start,
  };
}

test("an empty transcript has start 0, end 0 and empty pages", () => {
  const t = new Transcript(100);
  assert.equal(t.start, 0);
  assert.equal(t.end, 0);
  assert.deepEqual(t.page(0, 10), { offset: 0, text: "", end: 0, start: 0 });
  assert.deepEqual(t.page(5, 10), { offset: 0, text: "", end: 0, start: 0 });
});

test("append adds each entry as a line; pages use absolute offsets", () => {
  const t = new Transcript(1000);
  t.append("alpha");
  t.append("beta");
  t.append("");
  t.append("gamma");
  const whole = "alpha\nbeta\n\ngamma\n";
  assert.equal(t.end, whole.length);
  assert.equal(t.start, 0);
  assert.deepEqual(t.page(0, 1000), { offset: 0, text: whole, end: whole.length, start: 0 });
  for (let offset = 0; offset <= whole.length; offset += 1) {
    for (const limit of [0, 1, 2, 5, 6, 7, 11, 100]) {
      assert.deepEqual(t.page(offset, limit), expectedPage(whole, 0, offset, limit), `page(${offset}, ${limit})`);
    }
  }
});

test("a page spans entry boundaries", () => {
  const t = new Transcript(1000);
  t.append("one");
  t.append("two");
  t.append("three");
  // "one\ntwo\nthree\n": characters 2..10 cross two boundaries.
  assert.deepEqual(t.page(2, 8), { offset: 2, text: "e\ntwo\nth", end: 14, start: 0 });
  assert.deepEqual(t.page(3, 1), { offset: 3, text: "\n", end: 14, start: 0 });
  assert.deepEqual(t.page(4, 4), { offset: 4, text: "two\n", end: 14, start: 0 });
});

test("limit bounds the page; reading on from offset + text.length covers everything once", () => {
  const t = new Transcript(1000);
  for (const entry of ["first entry", "second", "the third one is longer", "4"]) t.append(entry);
  const whole = "first entry\nsecond\nthe third one is longer\n4\n";
  for (const limit of [1, 3, 7, 100]) {
    let offset = 0;
    let read = "";
    for (let guard = 0; offset < t.end; guard += 1) {
      assert.ok(guard < 1000, "paging did not terminate");
      const page = t.page(offset, limit);
      assert.equal(page.offset, offset);
      assert.ok(page.text.length <= limit);
      assert.ok(page.text.length > 0, "a page before the end is never empty");
      read += page.text;
      offset += page.text.length;
    }
    assert.equal(read, whole, `limit ${limit}`);
  }
});

test("a page past the end is empty, with offset moved back to the end", () => {
  const t = new Transcript(1000);
  t.append("abc");
  assert.deepEqual(t.page(4, 10), { offset: 4, text: "", end: 4, start: 0 });
  assert.deepEqual(t.page(5, 10), { offset: 4, text: "", end: 4, start: 0 });
  assert.deepEqual(t.page(1_000_000, 10), { offset: 4, text: "", end: 4, start: 0 });
});

test("a limit of 0 returns no text", () => {
  const t = new Transcript(1000);
  t.append("abc");
  assert.deepEqual(t.page(1, 0), { offset: 1, text: "", end: 4, start: 0 });
});

test("the cap drops the oldest entries; start moves up and offsets keep their meaning", () => {
  const t = new Transcript(10);
  t.append("aaaa"); // 0..5
  t.append("bbbb"); // 5..10: exactly at the cap, nothing dropped
  assert.equal(t.start, 0);
  assert.equal(t.end, 10);
  assert.equal(t.page(0, 100).text, "aaaa\nbbbb\n");

  t.append("cc"); // 10..13: 13 > 10, so "aaaa\n" goes
  assert.equal(t.start, 5);
  assert.equal(t.end, 13);
  assert.deepEqual(t.page(5, 100), { offset: 5, text: "bbbb\ncc\n", end: 13, start: 5 });
  // The same absolute offset still names the same character.
  assert.deepEqual(t.page(10, 2), { offset: 10, text: "cc", end: 13, start: 5 });
  assert.deepEqual(t.page(7, 4), { offset: 7, text: "bb\ncc".slice(0, 4), end: 13, start: 5 });

  t.append("ddddddd"); // 13..21: "bbbb\n" and "cc\n" both go (8 + 3 > 10, then 3 + 8 > 10)
  assert.equal(t.start, 13);
  assert.equal(t.end, 21);
  assert.deepEqual(t.page(13, 100), { offset: 13, text: "ddddddd\n", end: 21, start: 13 });
});

test("a page asked from a dropped offset starts at start", () => {
  const t = new Transcript(10);
  t.append("aaaa");
  t.append("bbbb");
  t.append("cc");
  assert.equal(t.start, 5);
  assert.deepEqual(t.page(0, 100), { offset: 5, text: "bbbb\ncc\n", end: 13, start: 5 });
  assert.deepEqual(t.page(4, 3), { offset: 5, text: "bbb", end: 13, start: 5 });
  // The limit counts from where the page really starts.
  assert.deepEqual(t.page(0, 1), { offset: 5, text: "b", end: 13, start: 5 });
});

test("a single entry longer than the cap keeps its tail, and the total still counts all of it", () => {
  const t = new Transcript(5);
  t.append("x"); // "x\n": 0..2
  t.append("abcdefgh"); // "abcdefgh\n": 2..11, only "efgh\n" fits
  const whole = "x\nabcdefgh\n";
  assert.equal(t.end, whole.length);
  assert.equal(t.start, whole.length - 5);
  assert.deepEqual(t.page(0, 100), { offset: 6, text: "efgh\n", end: 11, start: 6 });
  assert.deepEqual(t.page(8, 2), { offset: 8, text: whole.slice(8, 10), end: 11, start: 6 });

  // An entry longer than the cap into an empty transcript.
  const fresh = new Transcript(4);
  fresh.append("0123456789");
  assert.equal(fresh.start, 7);
  assert.equal(fresh.end, 11);
  assert.equal(fresh.page(0, 100).text, "789\n");

  // The next short entry pushes the long tail out whole.
  fresh.append("z");
  assert.equal(fresh.start, 11);
  assert.equal(fresh.end, 13);
  assert.equal(fresh.page(0, 100).text, "z\n");
});

/** A small deterministic generator, so a failure reproduces. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

test("10_000 appends stay within the cap and every page matches a reference string", () => {
  const cap = 997;
  const t = new Transcript(cap);
  const random = prng(42);
  let whole = "";
  const boundaries: number[] = [0]; // absolute offsets where entries begin
  for (let i = 0; i < 10_000; i += 1) {
    // Mostly short entries, now and then one longer than the cap.
    const length = random() < 0.01 ? cap + Math.floor(random() * 300) : Math.floor(random() * 40);
    const entry = `${i}:` + "abcdefghijklmnopqrstuvwxyz".repeat(Math.ceil(length / 26) + 1).slice(0, length);
    t.append(entry);
    whole += `${entry}\n`;
    boundaries.push(whole.length);

    assert.equal(t.end, whole.length, `end after ${i + 1} appends`);
    assert.ok(t.start >= 0 && t.start <= t.end);
    assert.ok(t.end - t.start <= cap, `kept ${t.end - t.start} > cap after ${i + 1} appends`);

    if (i % 97 === 0 || i >= 9_990) {
      // What is kept is exactly the tail of everything written.
      assert.equal(t.page(0, cap).text, whole.slice(t.start), `kept text after ${i + 1} appends`);
      // Only whole entries are dropped, unless one entry alone is longer than the cap.
      const lastEntryStart = boundaries.at(-2) as number;
      if (t.start <= lastEntryStart) {
        assert.ok(boundaries.includes(t.start), `start ${t.start} is not an entry boundary`);
        const previous = boundaries[boundaries.indexOf(t.start) - 1];
        if (previous !== undefined) assert.ok(t.end - previous > cap, "an entry was dropped that still fit");
      } else {
        assert.equal(t.end - t.start, cap, "a too-long last entry keeps exactly cap characters");
      }
      for (const [offset, limit] of [
        [0, 10],
        [t.start, 1],
        [t.start + 3, 50],
        [Math.max(0, t.start - 5), 20],
        [t.end - 1, 10],
        [t.end, 10],
        [t.end + 7, 10],
        [Math.floor((t.start + t.end) / 2), cap],
      ] as const) {
        assert.deepEqual(
          t.page(offset, limit),
          expectedPage(whole, t.start, offset, limit),
          `page(${offset}, ${limit}) after ${i + 1} appends`,
        );
      }
    }
  }
  // Paging the kept part from start to end reads it exactly once.
  let offset = t.start;
  let read = "";
  while (offset < t.end) {
    const page = t.page(offset, 13);
    assert.equal(page.offset, offset);
    read += page.text;
    offset += page.text.length;
  }
  assert.equal(read, whole.slice(t.start));
});

test("size is the number of characters held; it never exceeds the cap", () => {
  const t = new Transcript(10);
  assert.equal(t.size, 0);
  t.append("abc");
  assert.equal(t.size, 4);
  t.append("defg");
  assert.equal(t.size, 9);
  t.append("h"); // 11 > 10: "abc\n" goes
  assert.equal(t.size, 7);
  assert.equal(t.size, t.end - t.start);
  t.append("0123456789abc");
  assert.equal(t.size, 10);
  assert.equal(t.size, t.end - t.start);
});

test("release drops everything held; offsets keep their meaning and appends go on after it", () => {
  const t = new Transcript(100);
  t.append("one");
  t.append("two");
  assert.equal(t.end, 8);
  t.release();
  assert.equal(t.size, 0);
  assert.equal(t.start, 8);
  assert.equal(t.end, 8);
  assert.deepEqual(t.page(0, 100), { offset: 8, text: "", end: 8, start: 8 });
  assert.deepEqual(t.page(3, 2), { offset: 8, text: "", end: 8, start: 8 });

  t.append("three");
  assert.equal(t.size, 6);
  assert.equal(t.end, 14);
  assert.deepEqual(t.page(0, 100), { offset: 8, text: "three\n", end: 14, start: 8 });
  assert.deepEqual(t.page(10, 2), { offset: 10, text: "re", end: 14, start: 8 });

  t.release();
  t.release();
  assert.equal(t.start, 14);
  assert.equal(t.end, 14);
});

test("release after many appends (past compaction) still pages correctly", () => {
  const t = new Transcript(50);
  let whole = "";
  for (let i = 0; i < 3_000; i += 1) {
    t.append(`e${i}`);
    whole += `e${i}\n`;
  }
  t.release();
  assert.equal(t.start, whole.length);
  for (let i = 0; i < 30; i += 1) {
    t.append(`f${i}`);
    whole += `f${i}\n`;
  }
  assert.equal(t.end, whole.length);
  assert.equal(t.page(0, 1000).text, whole.slice(t.start));
  assert.ok(t.size <= 50);
});
