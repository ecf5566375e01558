// The part of s3rver's API the tests use (the package ships no types).
declare module "s3rver" {
  import type { Server } from "node:http";
  import type { AddressInfo } from "node:net";

  interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
    resetOnClose?: boolean;
    configureBuckets?: Array<{ name: string }>;
  }

  interface S3rverStore {
    putObject(...args: unknown[]): Promise<unknown>;
    deleteObject(...args: unknown[]): Promise<unknown>;
  }

  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<AddressInfo>;
    /** The listener, once `run` resolved. */
    httpServer?: Server;
    /** Its file-system store (one per server), whose writes and deletes the tests put in turn. */
    store: S3rverStore;
    close(): Promise<void>;
  }
}
