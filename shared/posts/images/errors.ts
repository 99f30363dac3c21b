/** The uploaded file is not a PNG, JPEG, GIF or WebP image (checked by magic bytes). */
export class UnsupportedImageError extends Error {
  constructor(options?: { cause?: unknown }) {
    super('Image must be a PNG, JPEG, GIF or WebP file.', options);
    this.name = 'UnsupportedImageError';
  }
}

/** The upload directory (UPLOAD_DIR) cannot be created or written; found at start-up. */
export class UploadDirectoryError extends Error {
  constructor(directory: string, reason: string, options?: { cause?: unknown }) {
    super(`${directory} is not a writable directory: ${reason}`, options);
    this.name = 'UploadDirectoryError';
  }
}
