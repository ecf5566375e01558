/** One image a run got from its channel, decoded: what the image store keeps. */
export interface GeneratedImage {
  bytes: Buffer;
  mime: string;
  revised_prompt?: string;
}
