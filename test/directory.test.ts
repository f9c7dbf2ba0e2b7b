/** cwd and add_dirs checks, and the CLAUDE_DISPATCH_ROOTS allowlist, on a real file system. */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import { checkDirectory, isInside, resolveRoots } from "../src/hosts/local/directory.js";

const scratch = realpathSync(mkdtempSync(path.join(tmpdir(), "claude-dispatch-dir-")));
after(() => rmSync(scratch, { recursive: true, force: true }));

const root = path.join(scratch, "root");
const sibling = path.join(scratch, "root2");
const outside = path.join(scratch, "elsewhere");
for (const dir of [path.join(root, "project", "src"), sibling, outside]) mkdirSync(dir, { recursive: true });
writeFileSync(path.join(root, "file.txt"), "x");
symlinkSync(outside, path.join(root, "escape"));
symlinkSync(path.join(root, "project"), path.join(scratch, "link-into-root"));
mkdirSync(path.join(root, "..hidden"));

test(
  "an absolute existing directory passes; files, missing paths and relative paths do not (the reference accepted " +
    "any existing path)",
  async () => {
    assert.deepEqual(await checkDirectory(root), { ok: true, path: root });
    const file = await checkDirectory(path.join(root, "file.txt"));
    assert.ok(!file.ok && file.code === "INVALID_ARGUMENT" && file.problem.startsWith("is not a directory"));
    const missing = await checkDirectory(path.join(root, "missing"));
    assert.ok(!missing.ok && missing.problem.startsWith("does not exist"));
    const belowFile = await checkDirectory(path.join(root, "file.txt", "below"));
    assert.ok(!belowFile.ok && belowFile.problem.startsWith("does not exist"));
    const relative = await checkDirectory("relative/path");
    assert.ok(!relative.ok && relative.problem.startsWith("must be an absolute path"));
    const windowsOnPosix = await checkDirectory("C:\\work", undefined, path.posix);
    assert.ok(!windowsOnPosix.ok && windowsOnPosix.problem.startsWith("must be an absolute path"));
  },
);

test("inside the roots: the real path is returned, so the agent runs where the check looked", async () => {
  const roots = await resolveRoots([root]);
  assert.deepEqual(await checkDirectory(path.join(root, "project", "src"), roots), {
    ok: true,
    path: path.join(root, "project", "src"),
  });
  assert.deepEqual(await checkDirectory(root, roots), { ok: true, path: root });
  // A link from outside that lands inside is judged by where it lands.
  assert.deepEqual(await checkDirectory(path.join(scratch, "link-into-root"), roots), {
    ok: true,
    path: path.join(root, "project"),
  });
  // A directory whose name merely starts with two dots is inside.
  assert.deepEqual(await checkDirectory(path.join(root, "..hidden"), roots), {
    ok: true,
    path: path.join(root, "..hidden"),
  });
});

test("escapes are refused with POLICY_DENIED: a symlink out, `..`, and a sibling that shares the prefix", async () => {
  const roots = await resolveRoots([root]);
  for (const attempt of [path.join(root, "escape"), `${root}/project/../../elsewhere`, sibling, outside, scratch]) {
    const check = await checkDirectory(attempt, roots);
    assert.ok(!check.ok, `${attempt} was let through`);
    assert.equal(check.code, "POLICY_DENIED");
    assert.match(check.problem, /outside the allowed roots \(CLAUDE_DISPATCH_ROOTS\)/);
  }
});

test("isInside compares path components, on POSIX and Windows alike", () => {
  assert.equal(isInside("/a/b", "/a"), true);
  assert.equal(isInside("/a", "/a"), true);
  assert.equal(isInside("/ab", "/a"), false);
  assert.equal(isInside("/", "/a"), false);
  assert.equal(isInside("C:\\Work\\proj", "c:\\work", path.win32), true, "Windows paths compare without case");
  assert.equal(isInside("D:\\work", "C:\\work", path.win32), false);
});

test("a root that does not exist is a startup error", async () => {
  await assert.rejects(
    resolveRoots([path.join(scratch, "no-such-root")]),
    /CLAUDE_DISPATCH_ROOTS entry does not exist/,
  );
  await assert.rejects(resolveRoots(["relative"]), /must be an absolute path/);
});

test("with roots, a path outside them is refused without saying whether it exists", async () => {
  const roots = await resolveRoots([root]);
  const missing = await checkDirectory(path.join(outside, "no-such-dir"), roots);
  const existing = await checkDirectory(outside, roots);
  assert.ok(!missing.ok && !existing.ok);
  assert.equal(missing.code, "POLICY_DENIED");
  assert.equal(existing.code, "POLICY_DENIED");
  const inside = await checkDirectory(path.join(root, "no-such-dir"), roots);
  assert.ok(
    !inside.ok && inside.code === "INVALID_ARGUMENT" && inside.problem.startsWith("does not exist"),
    "inside the roots, a missing path is named",
  );
});
