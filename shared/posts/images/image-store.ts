import { randomUUID } from 'node:crypto';
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { UnsupportedImageError, UploadDirectoryError } from './errors';
import { detectImageType } from './image-type';

/** Uploaded post images on disk, served by Layout A at /cdn/<name>. */
export interface ImageStore {
  /** The absolute directory the files live in. */
  directory: string;
  /**
   * Stores the bytes under a fresh random name with the extension of their real type.
   * @returns the file name (no directory)
   * @throws UnsupportedImageError when the bytes are not png, jpeg, gif or webp
   */
  save(bytes: Buffer): Promise<string>;
  /** Deletes a stored file; a missing file is not an error. */
  remove(name: string): Promise<void>;
}

/**
 * Creates the store and its directory (UPLOAD_DIR) if needed.
 *
 * @throws UploadDirectoryError when the directory cannot be created or is not writable
 */
export function createImageStore(uploadDir: string): ImageStore {
  const directory = path.resolve(uploadDir);
  try {
    ensureWritableDirectory(directory);
  } catch (error) {
    throw new UploadDirectoryError(directory, (error as Error).message, { cause: error });
  }
  return {
    directory,
    async save(bytes) {
      const type = detectImageType(bytes);
      if (!type) throw new UnsupportedImageError();
      const name = `${randomUUID()}.${type.extension}`;
      // 'wx' refuses to overwrite: a name is never reused, even on the impossible UUID clash.
      await writeFile(path.join(directory, name), bytes, { flag: 'wx' });
      return name;
    },
    async remove(name) {
      await unlink(path.join(directory, path.basename(name))).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    },
  };
}

/**
 * Creates the missing directories one level at a time: Node's recursive mkdir never returns
 * on some filesystems (e.g. under /proc), and a start-up must fail, not hang. A level that
 * another process created meanwhile is fine.
 */
function ensureWritableDirectory(directory: string): void {
  const missing: string[] = [];
  for (let current = directory; ; current = path.dirname(current)) {
    try {
      if (!statSync(current).isDirectory()) throw new Error(`${current} is not a directory`);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || path.dirname(current) === current) throw error;
      missing.unshift(current);
    }
  }
  for (const level of missing) {
    try {
      mkdirSync(level);
    } catch (error) {
      // Another process starting beside this one (api-a and api-b) may create it first.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(level).isDirectory()) throw error;
    }
  }
  accessSync(directory, constants.W_OK);
}
