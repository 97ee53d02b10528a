package dev.idemd.client;

import com.google.protobuf.Message;

/**
 * What the protocol ({@link ExecuteOnceProtocol}, {@link Renewals}) asks its driver to do next. The
 * driver performs it and hands back an {@link Answer}; the protocol itself performs no I/O and
 * reads time only from the clock it was given, so a test (or a shared protocol vector) can drive it
 * step by step without a server.
 */
sealed interface Step {
  /**
   * Send {@code request} (re-sent as the retry policy decides, never past {@code deadline}, a
   * {@link Clocks} instant). Answered {@link Answer.Replied} or {@link Answer.Refused}.
   */
  record Send<Req extends Message, Resp extends Message>(
      Rpc<Req, Resp> rpc, Req request, long deadline, long extraTimeoutNanos) implements Step {}

  /** Pause. Answered {@link Answer.Done}. */
  record Sleep(long nanos) implements Step {}

  /**
   * Run the effect, the provider lookup, or a pause of {@code nanos}, under the attempt's guard:
   * when the lease is lost or the attempt's time is up first, stop it (cancel, interrupt) and
   * answer {@link Answer.Interrupted}; else {@link Answer.Returned} or {@link Answer.Raised}
   * ({@link Answer.Done} for a pause).
   */
  record Guarded(Attempt attempt, Work work, long nanos) implements Step {}

  /** Run {@link Renewals} of the attempt alongside, until {@link StopRenewing}. */
  record StartRenewing(Attempt attempt) implements Step {}

  record StopRenewing(Attempt attempt) implements Step {}

  /** The call's answer: done. */
  record Finish(OperationResult result) implements Step {}

  /** The call fails with {@code error}: done. */
  record Raise(Throwable error) implements Step {}

  /** What a {@link Guarded} step runs. */
  enum Work {
    EFFECT,
    LOOKUP,
    PAUSE
  }
}
