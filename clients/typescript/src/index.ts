export * from "./errors.js";
export * from "./retry.js";
export * from "./client.js";
export type * from "./types.js";
export { SERVICE } from "./proto.js";
export * from "./fingerprint.js";
export * from "./execute.js";
export * from "./express.js";
export * from "./selector.js";
