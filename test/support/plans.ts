/** A node of an `EXPLAIN (FORMAT JSON)` plan that reads or writes a relation. */
export interface RelationNode {
  /** Its `Node Type`, such as `Index Scan` or `ModifyTable`. */
  type: string;
  /** Its `Relation Name`: a table or one of its partitions. */
  relation: string;
}

/** Every node of an `EXPLAIN (FORMAT JSON)` plan (the `QUERY PLAN` value) that names a relation, outermost first. */
export function relationNodes(plan: unknown): RelationNode[] {
  const found: RelationNode[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      const { 'Node Type': type, 'Relation Name': relation } = node as Record<string, unknown>;
      if (relation !== undefined) found.push({ type: String(type), relation: String(relation) });
      Object.values(node).forEach(walk);
    }
  };
  walk(plan);
  return found;
}
