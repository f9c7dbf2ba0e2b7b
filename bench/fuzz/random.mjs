/**
 * The fuzzer's PRNG: mulberry32 and Rng, one stream per block. Part of the fuzzer: bench/fuzz-lib.mjs
 * re-exports its public names.
 */
/* ------------------------------------------------------------------ *
 * PRNG
 * ------------------------------------------------------------------ */

export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function hash32(...parts) {
  let h = 0x811c9dc5;
  for (const part of parts) {
    let x = Math.floor(Number(part)) >>> 0;
    const hi = Math.floor(Number(part) / 4294967296) >>> 0;
    for (const word of [x, hi]) {
      x = word;
      h = Math.imul(h ^ x, 0x01000193) >>> 0;
      h ^= h >>> 15;
      h = Math.imul(h, 0x85ebca6b) >>> 0;
      h ^= h >>> 13;
    }
  }
  return h >>> 0;
}

export class Rng {
  constructor(seed) {
    this.next = mulberry32(seed);
  }
  float() {
    return this.next();
  }
  /** Integer in [lo, hi], inclusive. */
  int(lo, hi) {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p) {
    return this.next() < p;
  }
  pick(list) {
    return list[Math.floor(this.next() * list.length)];
  }
  /** entries: [weight, value][] */
  weighted(entries) {
    let total = 0;
    for (const [weight] of entries) total += weight;
    let x = this.next() * total;
    for (const [weight, value] of entries) {
      x -= weight;
      if (x < 0) return value;
    }
    return entries[entries.length - 1][1];
  }
  /** Log-uniform integer in [lo, hi]. */
  logInt(lo, hi) {
    return Math.min(hi, Math.floor(Math.exp(Math.log(lo) + this.next() * (Math.log(hi + 1) - Math.log(lo)))));
  }
  shuffle(list) {
    for (let i = list.length - 1; i > 0; i -= 1) {
      const j = Math.floor(this.next() * (i + 1));
      [list[i], list[j]] = [list[j], list[i]];
    }
    return list;
  }
  uuid(upper = false) {
    const hex = "0123456789abcdef";
    let s = "";
    for (let i = 0; i < 32; i += 1) s += hex[this.int(0, 15)];
    const id = `${s.slice(0, 8)}-${s.slice(8, 12)}-4${s.slice(13, 16)}-a${s.slice(17, 20)}-${s.slice(20, 32)}`;
    return upper ? id.toUpperCase() : id;
  }
}

export { hash32 };
