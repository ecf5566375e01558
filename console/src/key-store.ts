/** The part of the Web Storage API the key store uses (`sessionStorage`). */
export interface KeyStorage {
  getItem(name: string): string | null;
  setItem(name: string, value: string): void;
  removeItem(name: string): void;
}

const NAME = "image-task-sidecar.api-key";

/**
 * Where the console keeps the user's key: `sessionStorage`, so it lives in
 * this tab until the tab closes or the user signs out, is never sent by the
 * browser on its own (no cookie) and never put in a URL.
 */
export function createKeyStore(storage: KeyStorage) {
  return {
    get(): string | undefined {
      try {
        return storage.getItem(NAME) || undefined;
      } catch {
        return undefined; // storage refused (a privacy mode): sign in again
      }
    },
    set(key: string): void {
      try {
        storage.setItem(NAME, key);
      } catch {
        // kept in memory only for this page
      }
    },
    clear(): void {
      try {
        storage.removeItem(NAME);
      } catch {
        // nothing was kept
      }
    },
  };
}

/** A key as pasted: surrounding blanks and a leading `Bearer ` are not part of it. */
export function cleanKey(text: string): string {
  return text
    .trim()
    .replace(/^Bearer\s+/i, "")
    .trim();
}
