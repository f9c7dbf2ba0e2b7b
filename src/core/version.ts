/** Kept equal to package.json "version" by a test; reading package.json at startup would cost a file read. */
export const SERVER_NAME = "claude-dispatch";
export const SERVER_VERSION = "0.1.0";
