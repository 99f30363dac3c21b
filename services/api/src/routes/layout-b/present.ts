import type { PostRecord } from '../../../../../shared/posts/post-record';

/** Layout B's post object (docs/design.md §5); pid is a string, as the B model declares it. */
export function presentPostB(post: PostRecord) {
  return { pid: String(post.pid), title: post.title, content: post.content, created_at: post.createdAt, updated_at: post.updatedAt };
}
