package dev.idemd.client;

/**
 * The business effect {@link IdemdClient#executeOnce} runs at most once: call the provider (with
 * {@link EffectContext#operationId()} as its idempotency key, bounded by {@link
 * EffectContext#remaining()}), and return its {@link Outcome}. An effect that throws counts as
 * {@link Outcome.Unknown}. It runs on the calling thread, which is interrupted at the attempt
 * deadline or when the lease is lost (and {@link EffectContext#isCancelled()} turns true); whatever
 * it returns after that is never recorded.
 */
@FunctionalInterface
public interface Effect {
  Outcome run(EffectContext context) throws Exception;
}
