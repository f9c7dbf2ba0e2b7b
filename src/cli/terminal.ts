/**
 * The terminal as `jobs --watch` and `prune` use it (PROTOCOL.md §17): a screen redrawn in place on the
 * alternate buffer, with keys read one at a time in raw mode; a line typed as an answer. What is changed
 * is given back on every path, an error's too.
 */
import { INTERRUPTED_EXIT, type CliIo, type TerminalInput } from "./context.js";

const ENTER_ALTERNATE_SCREEN = "\u001b[?1049h";
const LEAVE_ALTERNATE_SCREEN = "\u001b[?1049l";
const HIDE_CURSOR = "\u001b[?25l";
const SHOW_CURSOR = "\u001b[?25h";
const CURSOR_HOME = "\u001b[H";
const CLEAR_TO_LINE_END = "\u001b[K";
const CLEAR_TO_SCREEN_END = "\u001b[J";
/** In raw mode Ctrl-C is a key, not a signal. */
const CTRL_C = "\u0003";
/** An answer longer than this is no y: reading stops there. */
const MAX_ANSWER_CHARS = 256;

export interface Screen {
  /** Replaces what is on the screen with these lines, each at most as wide as the terminal, no more than its rows. */
  draw(lines: readonly string[]): void;
  /** Gives the terminal back as it was: keys, signals, cursor and screen. Once; later calls do nothing. */
  close(): void;
}

/**
 * Takes the screen over. `quit` is called with 0 for q, and with 130 for Ctrl-C, typed or signalled. Without
 * a terminal on stdin no key is read: Ctrl-C (a signal then) still quits.
 */
export function openScreen(io: CliIo, quit: (exitCode: number) => void): Screen {
  const input = io.stdin;
  const keyboard = input?.isTTY === true && input.setRawMode !== undefined ? input : undefined;
  const onKeys = (keys: string): void => {
    if (keys.includes(CTRL_C)) quit(INTERRUPTED_EXIT);
    else if (/q/i.test(keys)) quit(0);
  };
  let untrap: (() => void) | undefined;
  let open = true;
  const screen: Screen = {
    draw: (lines) => {
      const screen = lines.map((line) => line + CLEAR_TO_LINE_END).join("\n");
      io.stdout.write(`${CURSOR_HOME}${screen}${CLEAR_TO_SCREEN_END}`);
    },
    close: () => {
      if (!open) return;
      open = false;
      keyboard?.off("data", onKeys);
      keyboard?.setRawMode?.(false);
      keyboard?.pause();
      untrap?.();
      io.stdout.write(SHOW_CURSOR + LEAVE_ALTERNATE_SCREEN);
    },
  };
  try {
    io.stdout.write(ENTER_ALTERNATE_SCREEN + HIDE_CURSOR);
    untrap = io.trapInterrupts?.(() => quit(INTERRUPTED_EXIT));
    keyboard?.setRawMode?.(true);
    keyboard?.setEncoding("utf8");
    keyboard?.on("data", onKeys);
    keyboard?.resume();
  } catch (error) {
    screen.close();
    throw error;
  }
  return screen;
}

/** One line a person types (its newline left out), or what was typed before stdin ended; then stdin is let go. */
export function readLine(input: TerminalInput): Promise<string> {
  return new Promise((resolve) => {
    if (input.readableEnded === true) return resolve("");
    let typed = "";
    const done = (answer: string): void => {
      input.off("data", onData);
      input.off("end", onEnd);
      input.pause();
      resolve(answer);
    };
    const onData = (chunk: string): void => {
      typed += chunk;
      const newline = typed.indexOf("\n");
      if (newline >= 0) done(typed.slice(0, newline));
      else if (typed.length > MAX_ANSWER_CHARS) done(typed);
    };
    const onEnd = (): void => done(typed);
    input.setEncoding("utf8");
    input.on("data", onData);
    input.on("end", onEnd);
    input.resume();
  });
}
