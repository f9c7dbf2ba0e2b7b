export async function runCli(_args: string[], _io: unknown): Promise<number> {
  return 2;
}
