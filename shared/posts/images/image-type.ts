/** An image format the API accepts, recognised by its leading bytes. */
export interface ImageType {
  extension: 'png' | 'jpg' | 'gif' | 'webp';
  mediaType: string;
}

const startsWith = (bytes: Buffer, signature: number[], at = 0) =>
  bytes.length >= at + signature.length && signature.every((byte, index) => bytes[at + index] === byte);

const ascii = (text: string) => [...text].map((char) => char.charCodeAt(0));

/**
 * Identifies PNG, JPEG, GIF or WebP by magic bytes (PNG spec §5.2, JPEG SOI marker,
 * GIF87a/GIF89a header, RIFF....WEBP container). The client's file name and
 * Content-Type are never trusted.
 *
 * @returns the type, or null for anything else (including an empty file)
 */
export function detectImageType(bytes: Buffer): ImageType | null {
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return { extension: 'png', mediaType: 'image/png' };
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return { extension: 'jpg', mediaType: 'image/jpeg' };
  if (startsWith(bytes, ascii('GIF87a')) || startsWith(bytes, ascii('GIF89a'))) return { extension: 'gif', mediaType: 'image/gif' };
  if (startsWith(bytes, ascii('RIFF')) && startsWith(bytes, ascii('WEBP'), 8)) return { extension: 'webp', mediaType: 'image/webp' };
  return null;
}
