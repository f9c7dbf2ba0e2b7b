/**
 * How a block's bytes reach the server: in chunks of 1 B to 64 KiB, sometimes cutting a multi-byte
 * character and pausing so the halves arrive apart (§1: the reader must reassemble them). Part of the
 * fuzzer: bench/fuzz-lib.mjs re-exports its public names.
 */
import { sleep } from "./server.mjs";

/** The first UTF-8 continuation byte in buffer[from, to), or -1. */
function continuationByte(buffer, from, to) {
  for (let j = from; j < Math.min(buffer.length, to); j += 1) {
    if ((buffer[j] & 0xc0) === 0x80) return j;
  }
  return -1;
}

function chunkSize(mode, rng) {
  if (mode === "big") return rng.int(16384, 65536);
  if (mode === "tiny") return rng.int(1, 16);
  return rng.logInt(1, 65536);
}

/**
 * Writes buffer through write(bytes) in chunks as writeMode says, drawing sizes and cuts from rng;
 * counts writes and split characters in stats.
 */
async function writeChunked(write, stats, buffer, writeMode, rng) {
  let offset = 0;
  let pauses = writeMode.pauses;
  // In a split block, one cut is forced inside some multi-byte character, however big the chunks.
  let forced = -1;
  if (writeMode.split && buffer.length > 1) {
    const from = rng.int(1, buffer.length - 1);
    forced = continuationByte(buffer, from, from + 4096);
  }
  while (offset < buffer.length) {
    let end = Math.min(buffer.length, offset + chunkSize(writeMode.mode, rng));
    let pause = false;
    if (forced > offset && forced < end) {
      end = forced;
      pause = pauses > 0;
    } else if (writeMode.split && end < buffer.length && rng.chance(0.8)) {
      // Move the cut onto a UTF-8 continuation byte nearby, if there is one: the character is split across writes.
      const cut = continuationByte(buffer, end, end + 256);
      if (cut !== -1 && cut > offset) {
        end = cut;
        pause = pauses > 0;
      }
    }
    await write(buffer.subarray(offset, end));
    stats.writes += 1;
    if (end < buffer.length && (buffer[end] & 0xc0) === 0x80) stats.splitCharacters += 1;
    offset = end;
    if (pause) {
      pauses -= 1;
      await sleep(1);
    }
  }
}

export { writeChunked };
