/** Whether process `pid` still runs (signal 0: checked, nothing sent). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
