package dev.idemd.client;

/**
 * {@code LEASE_LOST}: the write carried a stale fence; another owner or a reconciler took over.
 * Look the operation up and answer with what is stored; never redo the effect.
 */
public class LeaseLostException extends AbortedException {
  private static final long serialVersionUID = 1L;

  LeaseLostException(StatusDetails details) {
    super(details);
  }
}
