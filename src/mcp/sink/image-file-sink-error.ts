/**
 * Raised for everything the image file sink refuses to do; the message is
 * meant for the tool result.
 */
export class ImageFileSinkError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ImageFileSinkError";
  }
}
