/**
 * A typed client over every idemd RPC.
 *
 * Every call carries `authorization: Bearer <token>`, is re-sent unchanged as retry.ts
 * decides, and throws a typed errors.ts error decoded from the status's google.rpc
 * details. Durations are seconds; instants are `monotonic()` seconds.
 */
import * as grpc from "@grpc/grpc-js";
import { ConfigError, EmptyTokenError } from "./errors.js";
import { executeOnce, type ExecuteOptions, type Payload } from "./execute.js";
import type { Effect, Result } from "./outcome.js";
import { METHODS, type Rpc, seconds } from "./proto.js";
import {
  type ClaimOptions, claimRequest, type CompleteOptions, completeRequest, type FailOptions, failRequest,
  type ListOperationsOptions, listOperationsRequest, type ListUnresolvedOptions, listUnresolvedRequest, type LookupOptions, lookupRequest, type LookupTarget,
  reconcileRequest, type Resolution, renewRequest, type SendOptions,
} from "./requests.js";
import { callWithRetryAnswered, DEFAULT_RETRY, RetryPolicy } from "./retry.js";
import type * as pb from "./types.js";

// Built in requests.ts since both Client and executeOnce send them; exported here as before.
export { checkPreviousFingerprints, MAX_PREVIOUS_FINGERPRINTS, newClaimToken } from "./requests.js";
export { duration, seconds } from "./proto.js";
export type { ClaimOptions, ListOperationsOptions, SendOptions } from "./requests.js";

/**
 * gRPC's own reconnect backoff starts at 1 s and grows to 120 s; a channel in that
 * backoff fails every call at once. idemd restarts and failovers are short, so the
 * channel reconnects sooner and the retry policy (not the channel) paces re-sends.
 */
export const DEFAULT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
};

export interface ClientOptions {
  /** TLS or mTLS: `grpc.credentials.createSsl(...)`. Default: TLS with the system's roots
   *  for an `https://` address, plaintext otherwise. */
  credentials?: grpc.ChannelCredentials;
  retry?: RetryPolicy;
  /** gRPC channel options, added to (and overriding) DEFAULT_CHANNEL_OPTIONS. */
  channelOptions?: grpc.ChannelOptions;
}

/** The environment variables a Client reads for what its caller does not pass. */
export const ENV_ADDR = "IDEMD_ADDR";
export const ENV_TOKEN = "IDEMD_TOKEN";

/** Where to dial: `host:port` as gRPC takes it, and whether the address asked for TLS. */
export interface Address { target: string; tls: boolean }

/**
 * `host:port`, `http://host:port` (plaintext) or `https://host:port` (TLS), the one
 * convention of every idemd client. Anything else is a ConfigError, thrown before any
 * connection is made.
 */
export function parseAddress(address: string): Address {
  const given = address.trim();
  if (given === "") {
    throw new ConfigError(`no address: pass one or set ${ENV_ADDR} (host:port or http(s)://host:port)`);
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(given);
  if (scheme) {
    let url: URL;
    try {
      url = new URL(given);
    } catch {
      throw new ConfigError(`address ${JSON.stringify(given)} is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new ConfigError(`address ${JSON.stringify(given)}: the scheme is http or https, not ${scheme[1]}`);
    }
    if ((url.pathname !== "" && url.pathname !== "/") || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
      throw new ConfigError(`address ${JSON.stringify(given)}: only a scheme, host and port are accepted`);
    }
    if (url.hostname === "") throw new ConfigError(`address ${JSON.stringify(given)} has no host`);
    const tls = url.protocol === "https:";
    // URL drops a scheme's default port; gRPC needs one.
    return { target: `${url.hostname}:${url.port !== "" ? url.port : tls ? "443" : "80"}`, tls };
  }
  const colon = given.lastIndexOf(":");
  const host = given.slice(0, colon);
  const port = given.slice(colon + 1);
  if (colon <= 0 || host === "" || !/^[0-9]{1,5}$/.test(port) || /[\s/]/.test(host)) {
    throw new ConfigError(`address ${JSON.stringify(given)}: expected host:port or http(s)://host:port`);
  }
  return { target: given, tls: false };
}

/** Refuses what cannot be a bearer token, before any call is made (the server would
 *  refuse it only at the first call, as UNAUTHENTICATED). */
export function checkToken(token: string): string {
  if (token === "") {
    throw new EmptyTokenError(`the token is empty: pass one or set ${ENV_TOKEN}`);
  }
  // Control characters are what this looks for: a token with one is refused.
  // eslint-disable-next-line no-control-regex
  if (/[\s\x00-\x1f\x7f]/.test(token)) {
    throw new ConfigError("the token contains whitespace or a control character (a newline read from a file?)");
  }
  return token;
}

type RpcName = "Claim" | "Renew" | "Complete" | "Fail" | "Lookup" | "Reconcile" | "ListUnresolved" | "ListOperations";

/** An idemd client on one gRPC channel; `close()` it at the end. */
export class Client {
  readonly retry: RetryPolicy;
  private readonly channel: grpc.Client;
  private readonly token: string;

  /**
   * `address` is `host:port`, `http://host:port` or `https://host:port` (default: the
   * IDEMD_ADDR environment variable); `token` the bearer token (default: IDEMD_TOKEN).
   * A missing or malformed address or token throws a ConfigError (EmptyTokenError for
   * an empty token) here, before any connection is made.
   */
  constructor(address?: string, token?: string, options: ClientOptions = {}) {
    this.token = checkToken(token ?? process.env[ENV_TOKEN] ?? "");
    const parsed = parseAddress(address ?? process.env[ENV_ADDR] ?? "");
    this.retry = options.retry ?? DEFAULT_RETRY;
    let credentials = options.credentials;
    if (credentials === undefined) {
      credentials = parsed.tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
    } else if (parsed.tls && !credentials._isSecure()) {
      throw new ConfigError(`an https:// address asks for TLS, but the credentials given are insecure`);
    }
    this.channel = new grpc.Client(parsed.target, credentials, {
      ...DEFAULT_CHANNEL_OPTIONS,
      ...(options.channelOptions ?? {}),
    });
  }

  /** A client on IDEMD_ADDR with IDEMD_TOKEN. */
  static fromEnv(options: ClientOptions = {}): Client {
    return new Client(undefined, undefined, options);
  }

  close(): void {
    this.channel.close();
  }

  /** The bearer token's metadata, sent on every call. */
  private metadata(): grpc.Metadata {
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${this.token}`);
    return metadata;
  }

  /** One send of `name` with a gRPC deadline of `timeout` seconds. */
  private sendOnce<Req, Resp>(name: RpcName, request: Req, timeout: number): Promise<Resp> {
    const method = METHODS[name] as unknown as Rpc<Req, Resp>;
    return new Promise<Resp>((resolve, reject) => {
      this.channel.makeUnaryRequest<Req, Resp>(
        method.path,
        method.serialize,
        method.deserialize,
        request,
        this.metadata(),
        { deadline: Date.now() + Math.max(1, timeout * 1000) },
        (error, response) => {
          if (error) reject(error);
          else if (response === undefined) reject(new Error(`${name} answered nothing`));
          else resolve(response);
        },
      );
    });
  }

  private async send<Req, Resp>(name: RpcName, request: Req, options: SendOptions & { extraTimeout?: number } = {}): Promise<Resp> {
    const [response] = await this.sendAnswered<Req, Resp>(name, request, options);
    return response;
  }

  /** `send`, also returning the `monotonic()` instant at which the send that was
   *  answered began (re-sends included: each is its own call, and an abandoned one's
   *  reply is never read). */
  private sendAnswered<Req, Resp>(
    name: RpcName,
    request: Req,
    options: SendOptions & { extraTimeout?: number } = {},
  ): Promise<[Resp, number]> {
    return callWithRetryAnswered((timeout) => this.sendOnce<Req, Resp>(name, request, timeout), this.retry, {
      deadline: options.deadline,
      extraTimeout: options.extraTimeout ?? 0,
    });
  }

  // ---- Claim ---------------------------------------------------------------------

  /** A ClaimRequest; exactly one of jsonPayload, bytesPayload and fingerprint. */
  static claimRequest(operation: string, key: string, options: ClaimOptions): pb.ClaimRequest {
    return claimRequest(operation, key, options);
  }

  /**
   * Sends a prepared Claim (re-sent unchanged, same claim_token, after UNAVAILABLE or a
   * lost reply). Returns the answer and the `monotonic()` instant at which the send it
   * answers began, from which its lease and attempt deadline count: the server answers
   * each send with what is left at its own handling of that send, so the answered
   * send's start is early enough, and the first send's would be needlessly early.
   */
  async sendClaim(request: pb.ClaimRequest, options: SendOptions = {}): Promise<[pb.ClaimResponse, number]> {
    return this.sendAnswered<pb.ClaimRequest, pb.ClaimResponse>("Claim", request, {
      ...options,
      extraTimeout: seconds(request.wait),
    });
  }

  /** Claim: start or rejoin an operation. */
  async claim(operation: string, key: string, options: ClaimOptions & SendOptions): Promise<pb.ClaimResponse> {
    const [response] = await this.sendClaim(Client.claimRequest(operation, key, options), options);
    return response;
  }

  // ---- owner writes --------------------------------------------------------------

  /** Renew; returns the answer and the monotonic instant at which the send it answers
   *  began (re-sends included), from which the lease granted counts. */
  async sendRenew(
    operationId: string,
    fence: string,
    options: SendOptions & { lease?: number } = {},
  ): Promise<[pb.RenewResponse, number]> {
    const request = renewRequest(operationId, fence, options.lease);
    return this.sendAnswered<pb.RenewRequest, pb.RenewResponse>("Renew", request, options);
  }

  /** Renew: extend the owner's lease, never past the attempt deadline. */
  async renew(operationId: string, fence: string, options: SendOptions & { lease?: number } = {}): Promise<pb.RenewResponse> {
    const [response] = await this.sendRenew(operationId, fence, options);
    return response;
  }

  /** Complete: record the success result. Only the current fence may. */
  complete(
    operationId: string,
    fence: string,
    body: Uint8Array,
    options: SendOptions & CompleteOptions = {},
  ): Promise<pb.CompleteResponse> {
    const request = completeRequest(operationId, fence, body, options);
    return this.send<pb.CompleteRequest, pb.CompleteResponse>("Complete", request, options);
  }

  /** Fail with a disposition: TERMINAL, RETRYABLE (the effect certainly did not happen),
   *  UNKNOWN (it may have) or NOT_STARTED (this attempt declined before starting the
   *  effect: the operation is handed on as it was; no retryAfter with it). */
  fail(
    operationId: string,
    fence: string,
    disposition: pb.FailDisposition,
    options: SendOptions & FailOptions,
  ): Promise<pb.FailResponse> {
    const request = failRequest(operationId, fence, disposition, options);
    return this.send<pb.FailRequest, pb.FailResponse>("Fail", request, options);
  }

  // ---- reads and reconciliation ------------------------------------------------

  /** Lookup by operationId, or by scope (operation and key). */
  lookup(target: LookupTarget, options: SendOptions & LookupOptions = {}): Promise<pb.LookupResponse> {
    return this.send<pb.LookupRequest, pb.LookupResponse>("Lookup", lookupRequest(target, options), options);
  }

  /** Reconcile from outside evidence: exactly one of succeeded, failed, notApplied. */
  reconcile(
    operationId: string,
    expectedFence: string,
    resolution: Resolution,
    options: SendOptions = {},
  ): Promise<pb.ReconcileResponse> {
    const request = reconcileRequest(operationId, expectedFence, resolution);
    return this.send<pb.ReconcileRequest, pb.ReconcileResponse>("Reconcile", request, options);
  }

  /** One page of the operations a reconciler must look at, oldest first. */
  listUnresolved(options: SendOptions & ListUnresolvedOptions = {}): Promise<pb.ListUnresolvedResponse> {
    const request = listUnresolvedRequest(options);
    return this.send<pb.ListUnresolvedRequest, pb.ListUnresolvedResponse>("ListUnresolved", request, options);
  }

  /**
   * One page of the operations that match `filter` (docs/api.md has the language),
   * oldest first unless `order` is "ORDER_NEWEST_FIRST". Needs the reconcile or the
   * admin scope.
   */
  listOperations(options: SendOptions & ListOperationsOptions = {}): Promise<pb.ListOperationsResponse> {
    const request = listOperationsRequest(options);
    return this.send<pb.ListOperationsRequest, pb.ListOperationsResponse>("ListOperations", request, options);
  }

  /** executeOnce (execute.ts) on this client. */
  async executeOnce(operation: string, key: string, payload: Payload, effect: Effect, options: ExecuteOptions = {}): Promise<Result> {
    return executeOnce(this, operation, key, payload, effect, options);
  }
}
