/**
 * This process's listeners of appends to response event logs, by response
 * id: a follower on the replica that runs the response wakes at once.
 */
export function createAppendListeners() {
  const byId = new Map<string, Set<() => void>>();
  return {
    add(id: string, listener: () => void): () => void {
      let set = byId.get(id);
      if (!set) byId.set(id, (set = new Set()));
      const own = set;
      own.add(listener);
      return () => {
        own.delete(listener);
        if (own.size === 0 && byId.get(id) === own) byId.delete(id);
      };
    },
    notify(id: string): void {
      for (const listener of [...(byId.get(id) ?? [])]) listener();
    },
  };
}
