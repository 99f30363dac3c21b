import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { countPosts } from './support/rows';

const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(64, 1)]);
const SIGNATURES: [string, Buffer][] = [
  ['png', PNG],
  ['jpg', Buffer.concat([Buffer.from('ffd8ffe0', 'hex'), Buffer.alloc(32)])],
  ['gif', Buffer.concat([Buffer.from('GIF89a'), Buffer.alloc(32)])],
  ['webp', Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 '), Buffer.alloc(32)])],
];

describe('Layout A image upload', () => {
  let harness: ApiHarness;
  let api: ApiClient;
  let alice: TestUser;

  const form = (fields: Record<string, string>, image?: { bytes: Buffer; name: string; type: string }) => {
    const data = new FormData();
    for (const [name, value] of Object.entries(fields)) data.append(name, value);
    if (image) data.append('image', new Blob([image.bytes], { type: image.type }), image.name);
    return data;
  };
  const upload = (data: FormData) => api.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: data });
  const fields = () => ({ title: 'With image', body: 'Look', userId: String(alice.user.userId) });
  const storedFiles = () => readdirSync(harness.uploadDir);

  beforeAll(async () => {
    harness = await createApiHarness();
    api = await harness.start('a');
    alice = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  it('when a PNG is uploaded with the fields, then the post links it under /cdn/ and the file is served', async () => {
    const res = await upload(form(fields(), { bytes: PNG, name: 'photo.png', type: 'image/png' }));
    expect(res.statusCode).toBe(200);
    const { item } = res.json();
    expect(item).toMatchObject({ title: 'With image', body: 'Look', userId: alice.user.userId });
    expect(item.image).toMatch(/^http:\/\/localhost:3000\/cdn\/[0-9a-f-]{36}\.png$/);
    const served = await fetch(api.baseUrl + new URL(item.image).pathname);
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await served.arrayBuffer())).toEqual(PNG);
  });

  it.each(SIGNATURES)('when a %s is uploaded under a misleading name, then its real type decides the extension', async (extension, bytes) => {
    const res = await upload(form(fields(), { bytes, name: 'upload.bin', type: 'application/octet-stream' }));
    expect(res.statusCode).toBe(200);
    expect(res.json().item.image).toMatch(new RegExp(`\\.${extension}$`));
  });

  it('when the fields come as one `body` field holding JSON (Luminova form), then the post is created', async () => {
    const json = JSON.stringify({ title: 'Packed', body: 'In one field', userId: alice.user.userId });
    const res = await upload(form({ body: json }, { bytes: PNG, name: 'a.png', type: 'image/png' }));
    expect(res.statusCode).toBe(200);
    expect(res.json().item).toMatchObject({ title: 'Packed', body: 'In one field' });
  });

  it('when a multipart create has no image, then the post has image null', async () => {
    const res = await upload(form(fields()));
    expect(res.statusCode).toBe(200);
    expect(res.json().item.image).toBeNull();
  });

  it('when two posts upload the same file, then each gets its own name', async () => {
    const first = (await upload(form(fields(), { bytes: PNG, name: 'same.png', type: 'image/png' }))).json().item.image;
    const second = (await upload(form(fields(), { bytes: PNG, name: 'same.png', type: 'image/png' }))).json().item.image;
    expect(first).not.toBe(second);
  });

  it('when the file is not an image, then it is 415 and neither a post nor a file is stored', async () => {
    const posts = await countPosts(harness.db);
    const files = storedFiles();
    const res = await upload(form(fields(), { bytes: Buffer.from('<?php echo 1; ?>'), name: 'shell.png', type: 'image/png' }));
    expect(res.statusCode).toBe(415);
    expect(res.json()).toEqual({ status: 415, message: 'Image must be a PNG, JPEG, GIF or WebP file.' });
    expect(await countPosts(harness.db)).toBe(posts);
    expect(storedFiles()).toEqual(files);
  });

  it('when the image is over 2 MB, then it is 413 and nothing is stored', async () => {
    const posts = await countPosts(harness.db);
    const files = storedFiles();
    const big = Buffer.concat([PNG, Buffer.alloc(2 * 1024 * 1024)]);
    const res = await upload(form(fields(), { bytes: big, name: 'big.png', type: 'image/png' }));
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ status: 413, message: 'Image cannot exceed 2 MB.' });
    expect(await countPosts(harness.db)).toBe(posts);
    expect(storedFiles()).toEqual(files);
  });

  it('when a multipart field is invalid, then it is 400 with the validation message', async () => {
    const res = await upload(form({ title: '   ', body: 'b', userId: String(alice.user.userId) }, { bytes: PNG, name: 'a.png', type: 'image/png' }));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ status: 400, message: 'Post title is required.' });
  });

  it.each([
    ['has no boundary', 'multipart/form-data', 'irrelevant'],
    ['is cut off', 'multipart/form-data; boundary=xyz', '--xyz\r\nContent-Disposition: form-data; name="title"\r\n\r\nunterminated'],
  ])('when the multipart body %s, then it is 400, never 500', async (_case, contentType, payload) => {
    const res = await api.request({
      method: 'POST',
      url: '/api/v1/posts/create',
      headers: { ...alice.headers, 'content-type': contentType },
      payload,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ status: 400, message: expect.any(String) });
  });

  it('when a post with an image is deleted, then its file is removed', async () => {
    const { item } = (await upload(form(fields(), { bytes: PNG, name: 'gone.png', type: 'image/png' }))).json();
    const file = path.join(harness.uploadDir, path.basename(new URL(item.image).pathname));
    expect(existsSync(file)).toBe(true);
    const res = await api.request({ method: 'DELETE', url: `/api/v1/posts/delete/${item.postId}`, headers: alice.headers });
    expect(res.statusCode).toBe(204);
    expect(existsSync(file)).toBe(false);
  });
});
