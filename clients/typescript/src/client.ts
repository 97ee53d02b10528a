/**
 * A typed client over every idemd RPC.
 *
 * Every call carries `authorization: Bearer <token>`, is re-sent unchanged as retry.ts
 * decides, and throws a typed errors.ts error decoded from the status's google.rpc
 * details. Durations are seconds; instants are `monotonic()` seconds.
 */
import { randomBytes } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import type { MethodDefinition } from "@grpc/proto-loader";
import { packageDefinition, SERVICE } from "./proto.js";
import { callWithRetryAnswered, DEFAULT_RETRY, RetryPolicy } from "./retry.js";
import type * as pb from "./types.js";
import type { Effect, ExecuteOptions, Payload, Result } from "./execute.js";

/** A protobuf Duration of `seconds`. */
export function duration(seconds: number): pb.Duration {
  const whole = Math.floor(seconds);
  return { seconds: String(whole), nanos: Math.round((seconds - whole) * 1e9) };
}

/** A Duration the server sent, in seconds; missing or negative counts as zero. */
export function seconds(message: pb.Duration | null | undefined): number {
  if (!message) return 0;
  return Math.max(0, Number(message.seconds) + message.nanos / 1e9);
}

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
  /** TLS: `grpc.credentials.createSsl()`; default insecure (plaintext). */
  credentials?: grpc.ChannelCredentials;
  retry?: RetryPolicy;
  /** gRPC channel options, added to (and overriding) DEFAULT_CHANNEL_OPTIONS. */
  channelOptions?: grpc.ChannelOptions;
}

export interface ClaimOptions {
  /** Exactly one of jsonPayload, bytesPayload and fingerprint identifies the request. */
  jsonPayload?: string;
  bytesPayload?: Uint8Array;
  fingerprint?: Uint8Array;
  /** Random per attempt, reused only to re-send that same Claim (default: empty). */
  claimToken?: Uint8Array;
  lease?: number;
  maxAttemptDuration?: number;
  maxAttempts?: number;
  retention?: number;
  operationDeadline?: number;
  wait?: number;
}

export interface SendOptions {
  /** A `monotonic()` instant bounding the call and its re-sends. */
  deadline?: number | undefined;
}

/** A fresh random claim_token (16 bytes). */
export function newClaimToken(): Buffer {
  return randomBytes(16);
}

type RpcName = "Claim" | "Renew" | "Complete" | "Fail" | "Lookup" | "Reconcile" | "ListUnresolved";

/** An idemd client on one gRPC channel; `close()` it at the end. */
export class Client {
  readonly retry: RetryPolicy;
  private readonly channel: grpc.Client;
  private readonly token: string;
  private readonly methods: Record<string, MethodDefinition<object, object>>;

  /** `target` is `host:port`. */
  constructor(target: string, token: string, options: ClientOptions = {}) {
    this.retry = options.retry ?? DEFAULT_RETRY;
    this.token = token;
    this.channel = new grpc.Client(target, options.credentials ?? grpc.credentials.createInsecure(), {
      ...DEFAULT_CHANNEL_OPTIONS,
      ...(options.channelOptions ?? {}),
    });
    this.methods = packageDefinition()[SERVICE] as unknown as Record<string, MethodDefinition<object, object>>;
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
    const method = this.methods[name];
    if (method === undefined) throw new Error(`the loaded proto has no ${SERVICE}/${name}`);
    return new Promise<Resp>((resolve, reject) => {
      this.channel.makeUnaryRequest<Req, Resp>(
        method.path,
        (value: Req) => method.requestSerialize(value as object),
        (bytes: Buffer) => method.responseDeserialize(bytes) as Resp,
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
    const given = [options.jsonPayload, options.bytesPayload, options.fingerprint].filter((x) => x !== undefined);
    if (given.length !== 1) throw new TypeError("give exactly one of jsonPayload, bytesPayload, fingerprint");
    const request: pb.ClaimRequest = {
      scope: { operation, key },
      claim_token: Buffer.from(options.claimToken ?? new Uint8Array()),
      max_attempts: options.maxAttempts ?? 0,
    };
    if (options.jsonPayload !== undefined) request.json_payload = options.jsonPayload;
    else if (options.bytesPayload !== undefined) request.bytes_payload = Buffer.from(options.bytesPayload);
    else if (options.fingerprint !== undefined) request.fingerprint = Buffer.from(options.fingerprint);
    if (options.lease !== undefined) request.lease = duration(options.lease);
    if (options.maxAttemptDuration !== undefined) request.max_attempt_duration = duration(options.maxAttemptDuration);
    if (options.retention !== undefined) request.retention = duration(options.retention);
    if (options.operationDeadline !== undefined) request.operation_deadline = duration(options.operationDeadline);
    if (options.wait !== undefined) request.wait = duration(options.wait);
    return request;
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
    const request: pb.RenewRequest = { operation_id: operationId, fence };
    if (options.lease !== undefined) request.lease = duration(options.lease);
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
    options: SendOptions & { contentType?: string; metadata?: Record<string, string> } = {},
  ): Promise<pb.CompleteResponse> {
    return this.send<pb.CompleteRequest, pb.CompleteResponse>(
      "Complete",
      {
        operation_id: operationId,
        fence,
        result: { body: Buffer.from(body), content_type: options.contentType ?? "", metadata: options.metadata ?? {} },
      },
      options,
    );
  }

  /** Fail with a disposition: TERMINAL, RETRYABLE (the effect certainly did not happen),
   *  UNKNOWN (it may have) or NOT_STARTED (this attempt declined before starting the
   *  effect: the operation is handed on as it was; no retryAfter with it). */
  fail(
    operationId: string,
    fence: string,
    disposition: pb.FailDisposition,
    options: SendOptions & { code: string; message?: string; metadata?: Record<string, string>; retryAfter?: number },
  ): Promise<pb.FailResponse> {
    const request: pb.FailRequest = {
      operation_id: operationId,
      fence,
      disposition,
      error: { code: options.code, message: options.message ?? "", metadata: options.metadata ?? {} },
    };
    if (options.retryAfter !== undefined) request.retry_after = duration(options.retryAfter);
    return this.send<pb.FailRequest, pb.FailResponse>("Fail", request, options);
  }

  // ---- reads and reconciliation ------------------------------------------------

  /** Lookup by operationId, or by scope (operation and key). */
  lookup(
    target: { operationId: string } | { operation: string; key: string },
    options: SendOptions & { includeHistory?: boolean; historyPageSize?: number; historyPageToken?: string } = {},
  ): Promise<pb.LookupResponse> {
    const request: pb.LookupRequest = {
      include_history: options.includeHistory ?? false,
      history_page_size: options.historyPageSize ?? 0,
      history_page_token: options.historyPageToken ?? "",
    };
    if ("operationId" in target) request.operation_id = target.operationId;
    else request.scope = { operation: target.operation, key: target.key };
    return this.send<pb.LookupRequest, pb.LookupResponse>("Lookup", request, options);
  }

  /** Reconcile from outside evidence: exactly one of succeeded, failed, notApplied. */
  reconcile(
    operationId: string,
    expectedFence: string,
    resolution:
      | { succeeded: { body: Uint8Array; contentType?: string; metadata?: Record<string, string> } }
      | { failed: { code: string; message?: string; metadata?: Record<string, string> } }
      | { notApplied: true },
    options: SendOptions = {},
  ): Promise<pb.ReconcileResponse> {
    const request: pb.ReconcileRequest = { operation_id: operationId, expected_fence: expectedFence };
    if ("succeeded" in resolution) {
      const s = resolution.succeeded;
      request.succeeded = { body: Buffer.from(s.body), content_type: s.contentType ?? "", metadata: s.metadata ?? {} };
    } else if ("failed" in resolution) {
      const f = resolution.failed;
      request.failed = { code: f.code, message: f.message ?? "", metadata: f.metadata ?? {} };
    } else {
      request.not_applied = {};
    }
    return this.send<pb.ReconcileRequest, pb.ReconcileResponse>("Reconcile", request, options);
  }

  /** One page of the operations a reconciler must look at, oldest first. */
  listUnresolved(
    options: SendOptions & { operation?: string; pageSize?: number; pageToken?: string } = {},
  ): Promise<pb.ListUnresolvedResponse> {
    return this.send<pb.ListUnresolvedRequest, pb.ListUnresolvedResponse>(
      "ListUnresolved",
      { operation: options.operation ?? "", page_size: options.pageSize ?? 0, page_token: options.pageToken ?? "" },
      options,
    );
  }

  /** executeOnce (execute.ts) on this client. */
  async executeOnce(operation: string, key: string, payload: Payload, effect: Effect, options: ExecuteOptions = {}): Promise<Result> {
    const { executeOnce } = await import("./execute.js");
    return executeOnce(this, operation, key, payload, effect, options);
  }
}
