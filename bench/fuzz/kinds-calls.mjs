/**
 * Line kinds about what is asked: valid requests, tool calls with fuzzed arguments and names, cancellations
 * of calls in flight, real runs of the fake agent, and the 2026-07-28 era (§16). Part of the fuzzer:
 * bench/fuzz/kinds.mjs gathers the kinds.
 */
import { MISSING_DIR, MODERN_TASK_METHODS, TOOL_NAMES, VERSIONS } from "./constants.mjs";
import { cwdShaped, toolArguments } from "./generators.mjs";
import {
  envelopeOptions, eraConfusion, modernCancelPair, modernControlled, modernMeta, modernRawLine, modernRequest,
  modernTaskMethod, modernToolCall, REMOVED_METHODS, removedMethodBody,
} from "./modern-lines.mjs";

/* Line kinds. Each returns one line (string or Buffer), or an array of them for kinds that need several. */

const CALL_KINDS = {
  valid(g) {
    const r = g.rng;
    return r.weighted([
      [3, () => g.request("initialize", { protocolVersion: r.pick([...VERSIONS, "1999-01-01", "", "2025-11-25 ", "latest"]), capabilities: {}, clientInfo: { name: "fuzz", version: "1" } })],
      [6, () => g.request("ping", r.pick([undefined, {}, { _meta: {} }, { _meta: { progressToken: `t${g.fresh()}` } }, { extra: [1, 2] }]))],
      [3, () => g.request("tools/list", r.pick([undefined, {}, { cursor: "abc" }, { cursor: 5 }]))],
      [3, () => g.toolCall("claude_list", r.pick([undefined, {}, null]))],
      [4, () => g.toolCall("claude_wait", { job_id: r.uuid(), hold_ms: 0 })],
      [3, () => g.toolCall("claude_output", { job_id: r.uuid(), view: r.pick(["result", "transcript"]) })],
      [2, () => g.toolCall("claude_kill", { job_id: r.uuid() })],
      [3, () => g.toolCall(r.pick(["claude_run", "claude_start"]), { prompt: "hello", cwd: r.pick([MISSING_DIR, "relative", g.env.file]) })],
    ])();
  },

  toolFuzz(g) {
    const r = g.rng;
    const tool = r.weighted([
      [6, "claude_run"],
      [5, "claude_start"],
      [5, "claude_wait"],
      [3, "claude_kill"],
      [2, "claude_list"],
      [4, "claude_output"],
      [3, "claude_respond"],
    ]);
    const args = r.weighted([
      [90, () => toolArguments(g, tool)],
      [3, () => undefined],
      [3, () => null],
      [4, () => r.pick([[], [1], "args", 5, true, g.raw("1e400")])],
    ])();
    const extra = r.chance(0.1) ? { _meta: r.pick([{}, { progressToken: `t${g.fresh()}` }, { progressToken: g.fresh() }, { other: 1 }]) } : {};
    // Members of params other than name, arguments, _meta and task mean nothing and are ignored; task is §14.
    if (r.chance(0.05)) extra[r.pick(["cursor", "foo", "Arguments", "task"])] = r.pick([1, "x", null, {}, { ttl: -1 }, { ttl: 1000 }]);
    return g.toolCall(tool, args, extra);
  },

  toolName(g) {
    const r = g.rng;
    const name = r.pick(["claude_Run", "", "claude_run ", " claude_list", "unknown_tool", "\ud800", "claude_list\u0000", "CLAUDE_LIST", "claude-run", "__proto__", "constructor", "hasOwnProperty", g.text(1, 30), 5, null, true, [], {}]);
    const params = r.weighted([
      [6, () => ({ name, arguments: {} })],
      [2, () => ({ name })],
      [1, () => ({ arguments: { job_id: "x" } })],
      [1, () => ({})],
      [2, () => ({ name: r.pick(TOOL_NAMES), arguments: r.pick([[], "x", 1, true, [{}]]) })],
    ])();
    return g.request("tools/call", params);
  },

  cancelInFlight(g) {
    const r = g.rng;
    const id = g.fresh();
    const call = r.pick([
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_run", arguments: { prompt: "x", cwd: cwdShaped(g) } } }),
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_start", arguments: { prompt: "x", cwd: MISSING_DIR } } }),
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_wait", arguments: { job_id: r.uuid(), hold_ms: 100 } } }),
      () => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claude_list" } }),
      () => ({ jsonrpc: "2.0", id, method: "ping" }),
    ])();
    const requestId = r.pick([id, id, id, String(id), id + 0.5]);
    const cancel = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "fuzz" } };
    const lines = [call];
    if (r.chance(0.3)) lines.push(g.request("ping"));
    if (r.chance(0.15)) lines.unshift({ ...cancel });
    lines.push(cancel);
    return lines;
  },

  /** Rare real work through the fake agent: "@sleep 0" in a real temporary directory. */
  controlled(g) {
    const r = g.rng;
    const prompt = `@sleep 0\n${g.safeText()}`;
    const extra = r.chance(0.5) ? { _meta: { progressToken: r.chance(0.5) ? `tok-${g.fresh()}` : 7e14 + g.fresh() } } : {};
    if (r.chance(0.75)) {
      const args = { prompt, cwd: g.env.realDir };
      if (r.chance(0.3)) args.timeout_ms = 60000;
      // A plain fresh number: a cancelled run's late answer must never meet a reused id such as 0 or "".
      const run = g.toolCall("claude_run", args, extra, g.fresh());
      // §4: a cancelled run is killed and gets no response (its answer is optional: the run may win the race).
      if (r.chance(0.2)) return { line: [run, { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: run.id } }], allowStart: true };
      return { line: run, allowStart: true };
    }
    return { line: g.toolCall("claude_start", { prompt, cwd: g.env.realDir }, {}, g.fresh()), allowStart: true };
  },

  /**
   * The 2026-07-28 era (§16): the envelope, its methods, the methods it lacks, the
   * tasks extension, and look-alikes of the legacy era.
   */
  modern(g) {
    const r = g.rng;
    return r.weighted([
      [9, () => modernRequest(g, "server/discover", r.chance(0.15) ? { cursor: "x", extra: [1] } : {}, envelopeOptions(g))],
      [7, () => modernRequest(g, "tools/list", r.chance(0.3) ? { cursor: r.pick(["abc", "", null, 5, {}, []]) } : {}, envelopeOptions(g))],
      [28, () => modernToolCall(g)],
      [14, () => modernTaskMethod(g)],
      [10, () => {
        const method = r.pick(REMOVED_METHODS);
        return modernRequest(g, method, removedMethodBody(g, method), envelopeOptions(g, 0.05));
      }],
      // A refused envelope, whatever the method: nothing runs, not even with a real directory.
      [10, () => {
        const method = r.pick(["server/discover", "tools/list", "tools/call", ...MODERN_TASK_METHODS, "initialize", "ping", "tasks/list", "no/such"]);
        let body = {};
        if (method === "tools/call") body = { name: r.pick(TOOL_NAMES), arguments: { prompt: "x", cwd: r.pick([g.env.realDir, MISSING_DIR]) } };
        else if (method.startsWith("tasks/")) body = { taskId: r.uuid(), inputResponses: {} };
        return modernRequest(g, method, body, { ...envelopeOptions(g, 1), tasks: r.chance(0.5) });
      }],
      // Notifications never get a response, envelope or not, valid or not (§1, §16.3).
      [4, () => {
        const method = r.pick(["notifications/initialized", "notifications/cancelled", "notifications/progress", "tools/call", "server/discover", "tasks/cancel", "ping", "initialize"]);
        let params = {};
        if (method === "notifications/cancelled") params = { requestId: 9e14 + g.fresh() };
        else if (method === "notifications/progress") params = { progressToken: "x", progress: 1 };
        else if (method === "tools/call") params = { name: "claude_list" };
        params._meta = modernMeta(g, envelopeOptions(g, 0.3));
        return { jsonrpc: "2.0", method, params };
      }],
      [3, () => modernCancelPair(g)],
      [6, () => eraConfusion(g)],
      [3, () => modernRawLine(g)],
      [1.5, () => modernControlled(g)],
    ])();
  },
};

export { CALL_KINDS };
