/** Who holds an idempotency key: the principal (`user:<id>` or `key:<id>`) and the key. */
export interface IdempotencyOwner {
  principal: string;
  key: string;
}

/**
 * How a batch of creates links each new post to its request's Idempotency-Key in the post's
 * own commit (docs/design.md §15), for a retry whose first request died before it could answer.
 * The posts module declares this port; whoever owns the `idempotency_keys` table (the api's
 * idempotency store) implements it. Each member is SQL for the create's one statement, since
 * the link must commit or roll back with the post.
 */
export interface PostIdempotencyClaims {
  /**
   * A SELECT for a CTE before the insert: locks the key row of each `input` row with a claim
   * and gives `(ord, post_pid)`, the pid being the latest committed one. A key taken over after
   * its lease lapsed has two holders; the row lock makes the second wait for the first's
   * commit and then see its post, so the statement inserts a post only for a key that records
   * none. `input` is a relation with the columns `ord`, `claim_principal` and `claim_key`.
   */
  lockSql(input: string): string;
  /**
   * An UPDATE for a CTE after the insert, recording each new post's pid under its request's
   * key. `rows` is a FROM list; the `columns` name, in it, the pid and the claim's principal
   * and key (null for a request without one). A key that records a post already keeps it.
   */
  recordPidsSql(rows: string, columns: { pid: string; principal: string; key: string }): string;
  /**
   * A statement reading the posts the keys `(principals[i], keys[i])` record: one row per key
   * recording a pid, with `principal`, `key`, `post_pid` and the posts row `p`'s `columns`
   * (all null when the post no longer exists). $1 the principals, $2 the keys.
   */
  recordedPostsSql(columns: string): string;
}
