package dev.idemd.client;

/** {@code LEASE_STILL_LIVE}: Reconcile while an owner holds the lease. */
public class LeaseStillLiveException extends FailedPreconditionException {
  private static final long serialVersionUID = 1L;

  LeaseStillLiveException(StatusDetails details) {
    super(details);
  }
}
