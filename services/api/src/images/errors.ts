/** The uploaded file is not a PNG, JPEG, GIF or WebP image (checked by magic bytes). */
export class UnsupportedImageError extends Error {
  constructor(options?: { cause?: unknown }) {
    super('Image must be a PNG, JPEG, GIF or WebP file.', options);
    this.name = 'UnsupportedImageError';
  }
}
