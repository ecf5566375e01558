/**
 * Puts `text` on the clipboard; false when the browser does not allow it
 * (no permission, or not a secure context), so the caller can show the text
 * to copy by hand instead.
 */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}
