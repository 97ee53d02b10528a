package dev.idemd.client;

import java.util.concurrent.CompletionStage;

/**
 * The non-blocking form of {@link Effect}, for {@link IdemdClient#executeOnceAsync}: returns at
 * once with a stage that completes with the {@link Outcome} (a stage that fails counts as {@link
 * Outcome.Unknown}). At the attempt deadline, or when the lease is lost, the stage (if a {@link
 * java.util.concurrent.CompletableFuture}) is cancelled and {@link EffectContext#cancelled()}
 * completes.
 */
@FunctionalInterface
public interface AsyncEffect {
  CompletionStage<Outcome> run(EffectContext context);
}
