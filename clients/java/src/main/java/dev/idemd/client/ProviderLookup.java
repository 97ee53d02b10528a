package dev.idemd.client;

/**
 * Asked on ReconcileFirst (an earlier attempt's outcome is unknown): what the provider has for that
 * attempt, looked up by {@link EffectContext#operationId()} or the caller's stable reference: its
 * {@link Outcome.Success} or {@link Outcome.Terminal}, or null when it has nothing. It must read
 * the provider's <em>current</em> state (not a cache, not a replica that may lag behind): a
 * "nothing" counts only from a lookup that started once the earlier attempt settled, and the client
 * asks again until then.
 */
@FunctionalInterface
public interface ProviderLookup {
  Outcome.Found lookup(EffectContext context) throws Exception;
}
