package dev.idemd.client;

import java.util.concurrent.CompletionStage;

/** The non-blocking form of {@link ProviderLookup}: completes with what it found, or null. */
@FunctionalInterface
public interface AsyncProviderLookup {
  CompletionStage<Outcome.Found> lookup(EffectContext context);
}
