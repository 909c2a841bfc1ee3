/**
 * Up to `total` subscription names, one per ready key, the subscriptions taking turns: how a
 * dispatcher (the Worker's, or the Node runner's) spreads its consumers over subscriptions.
 */
export function roundRobin(ready: [string, number][], total: number): string[] {
  const plan: string[] = [];
  const left = new Map(ready.filter(([, count]) => count > 0));
  while (plan.length < total && left.size > 0) {
    for (const [name, count] of left) {
      if (plan.length >= total) break;
      plan.push(name);
      if (count <= 1) left.delete(name);
      else left.set(name, count - 1);
    }
  }
  return plan;
}
