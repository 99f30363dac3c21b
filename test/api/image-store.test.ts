import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UploadDirectoryError } from '../../shared/posts/images/errors';
import { createImageStore } from '../../shared/posts/images/image-store';
import { ROOT } from '../support/processes';

describe('image store directory (UPLOAD_DIR)', () => {
  let root: string;

  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'image-store-'));
  });

  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('when the directory and its parents are missing, then they are created', () => {
    const store = createImageStore(path.join(root, 'a', 'b', 'c'));
    expect(statSync(store.directory).isDirectory()).toBe(true);
  });

  it('when a path component is a file, then start-up fails with an error naming the directory', () => {
    writeFileSync(path.join(root, 'file'), 'x');
    const directory = path.join(root, 'file', 'uploads');
    expect(() => createImageStore(directory)).toThrow(UploadDirectoryError);
    expect(() => createImageStore(directory)).toThrow(`${directory} is not a writable directory`);
  });

  it('when the filesystem refuses the directory, then start-up fails instead of hanging', () => {
    expect(() => createImageStore('/proc/no-uploads-here')).toThrow(UploadDirectoryError);
  });

  it('when several processes create the same missing directory at once, then every one starts', async () => {
    const module = path.join(ROOT, 'dist/shared/posts/images/image-store.js');
    for (const round of [1, 2, 3]) {
      const directory = path.join(root, `round-${round}`, 'storage', 'uploads');
      const codes = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const child = spawn(process.execPath, ['-e', `require(${JSON.stringify(module)}).createImageStore(${JSON.stringify(directory)})`], {
            stdio: 'ignore',
          });
          const [code] = await once(child, 'exit');
          return code;
        }),
      );
      expect(codes).toEqual([0, 0, 0, 0, 0, 0]);
    }
  });
});
