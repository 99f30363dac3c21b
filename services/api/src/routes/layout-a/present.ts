import type { PostRecord } from '../../../../../shared/posts/post-record';

/** Builds Layout A's post shapes (docs/design.md §5) with absolute URLs under APP_URL. */
export function createLayoutAPresenter(appUrl: string) {
  const imageUrl = (image: string | null) => (image === null ? null : `${appUrl}/cdn/${encodeURIComponent(image)}`);
  return {
    listItem: (post: PostRecord) => ({
      id: post.pid,
      uuid: post.uuid,
      userId: post.userId,
      title: post.title,
      body: post.content,
      image: imageUrl(post.image),
      link: `${appUrl}/api/v1/posts/${post.pid}`,
    }),
    item: (post: PostRecord) => ({
      postId: post.pid,
      uuid: post.uuid,
      userId: post.userId,
      title: post.title,
      body: post.content,
      image: imageUrl(post.image),
      created_date: post.createdAt,
      updated_date: post.updatedAt,
    }),
  };
}
