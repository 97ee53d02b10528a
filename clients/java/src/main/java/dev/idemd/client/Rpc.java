package dev.idemd.client;

import com.google.protobuf.Descriptors;
import com.google.protobuf.Message;
import dev.idemd.idem.v1.ClaimRequest;
import dev.idemd.idem.v1.ClaimResponse;
import dev.idemd.idem.v1.CompleteRequest;
import dev.idemd.idem.v1.CompleteResponse;
import dev.idemd.idem.v1.DiagnoseRequest;
import dev.idemd.idem.v1.DiagnoseResponse;
import dev.idemd.idem.v1.FailRequest;
import dev.idemd.idem.v1.FailResponse;
import dev.idemd.idem.v1.ForgetRequest;
import dev.idemd.idem.v1.ForgetResponse;
import dev.idemd.idem.v1.GetPolicyRequest;
import dev.idemd.idem.v1.GetPolicyResponse;
import dev.idemd.idem.v1.HoldRequest;
import dev.idemd.idem.v1.HoldResponse;
import dev.idemd.idem.v1.Idempotency;
import dev.idemd.idem.v1.ListHoldsRequest;
import dev.idemd.idem.v1.ListHoldsResponse;
import dev.idemd.idem.v1.ListOperationsRequest;
import dev.idemd.idem.v1.ListOperationsResponse;
import dev.idemd.idem.v1.ListUnresolvedRequest;
import dev.idemd.idem.v1.ListUnresolvedResponse;
import dev.idemd.idem.v1.LookupRequest;
import dev.idemd.idem.v1.LookupResponse;
import dev.idemd.idem.v1.ReconcileRequest;
import dev.idemd.idem.v1.ReconcileResponse;
import dev.idemd.idem.v1.ReleaseRequest;
import dev.idemd.idem.v1.ReleaseResponse;
import dev.idemd.idem.v1.RenewRequest;
import dev.idemd.idem.v1.RenewResponse;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import java.util.List;

/**
 * One RPC of {@code idem.v1.IdempotencyService}: its gRPC method, built from the service descriptor
 * that protoc generated from the proto (so names and types cannot drift from it). The messages are
 * generated at build time; the method table is this file, as in the Python client, since a
 * grpc-java stub adds nothing a unary call needs.
 */
final class Rpc<Req extends Message, Resp extends Message> {
  static final Descriptors.ServiceDescriptor SERVICE =
      Idempotency.getDescriptor().findServiceByName("IdempotencyService");

  static final Rpc<ClaimRequest, ClaimResponse> CLAIM =
      new Rpc<>("Claim", ClaimRequest.getDefaultInstance(), ClaimResponse.getDefaultInstance());
  static final Rpc<RenewRequest, RenewResponse> RENEW =
      new Rpc<>("Renew", RenewRequest.getDefaultInstance(), RenewResponse.getDefaultInstance());
  static final Rpc<CompleteRequest, CompleteResponse> COMPLETE =
      new Rpc<>(
          "Complete", CompleteRequest.getDefaultInstance(), CompleteResponse.getDefaultInstance());
  static final Rpc<FailRequest, FailResponse> FAIL =
      new Rpc<>("Fail", FailRequest.getDefaultInstance(), FailResponse.getDefaultInstance());
  static final Rpc<LookupRequest, LookupResponse> LOOKUP =
      new Rpc<>("Lookup", LookupRequest.getDefaultInstance(), LookupResponse.getDefaultInstance());
  static final Rpc<ReconcileRequest, ReconcileResponse> RECONCILE =
      new Rpc<>(
          "Reconcile",
          ReconcileRequest.getDefaultInstance(),
          ReconcileResponse.getDefaultInstance());
  static final Rpc<ListUnresolvedRequest, ListUnresolvedResponse> LIST_UNRESOLVED =
      new Rpc<>(
          "ListUnresolved",
          ListUnresolvedRequest.getDefaultInstance(),
          ListUnresolvedResponse.getDefaultInstance());
  static final Rpc<ListOperationsRequest, ListOperationsResponse> LIST_OPERATIONS =
      new Rpc<>(
          "ListOperations",
          ListOperationsRequest.getDefaultInstance(),
          ListOperationsResponse.getDefaultInstance());
  static final Rpc<ForgetRequest, ForgetResponse> FORGET =
      new Rpc<>("Forget", ForgetRequest.getDefaultInstance(), ForgetResponse.getDefaultInstance());
  static final Rpc<GetPolicyRequest, GetPolicyResponse> GET_POLICY =
      new Rpc<>(
          "GetPolicy",
          GetPolicyRequest.getDefaultInstance(),
          GetPolicyResponse.getDefaultInstance());
  static final Rpc<HoldRequest, HoldResponse> HOLD =
      new Rpc<>("Hold", HoldRequest.getDefaultInstance(), HoldResponse.getDefaultInstance());
  static final Rpc<ReleaseRequest, ReleaseResponse> RELEASE =
      new Rpc<>(
          "Release", ReleaseRequest.getDefaultInstance(), ReleaseResponse.getDefaultInstance());
  static final Rpc<ListHoldsRequest, ListHoldsResponse> LIST_HOLDS =
      new Rpc<>(
          "ListHolds",
          ListHoldsRequest.getDefaultInstance(),
          ListHoldsResponse.getDefaultInstance());
  static final Rpc<DiagnoseRequest, DiagnoseResponse> DIAGNOSE =
      new Rpc<>(
          "Diagnose", DiagnoseRequest.getDefaultInstance(), DiagnoseResponse.getDefaultInstance());

  static final List<Rpc<?, ?>> ALL =
      List.of(
          CLAIM,
          RENEW,
          COMPLETE,
          FAIL,
          LOOKUP,
          RECONCILE,
          LIST_UNRESOLVED,
          LIST_OPERATIONS,
          FORGET,
          GET_POLICY,
          HOLD,
          RELEASE,
          LIST_HOLDS,
          DIAGNOSE);

  final String name;
  final MethodDescriptor<Req, Resp> method;

  private Rpc(String name, Req request, Resp response) {
    Descriptors.MethodDescriptor described = SERVICE.findMethodByName(name);
    if (described == null
        || !described.getInputType().equals(request.getDescriptorForType())
        || !described.getOutputType().equals(response.getDescriptorForType())) {
      throw new IllegalStateException(
          "idem.v1.IdempotencyService/" + name + " does not match the proto");
    }
    this.name = name;
    this.method =
        MethodDescriptor.<Req, Resp>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE.getFullName(), name))
            .setRequestMarshaller(ProtoUtils.marshaller(request))
            .setResponseMarshaller(ProtoUtils.marshaller(response))
            .setSampledToLocalTracing(true)
            .build();
  }
}
