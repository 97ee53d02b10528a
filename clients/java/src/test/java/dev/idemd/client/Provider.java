package dev.idemd.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** A fake provider that counts business effects and can be looked up by reference. */
final class Provider {
  final List<String> effects = Collections.synchronizedList(new ArrayList<>());
  final Map<String, byte[]> records = new ConcurrentHashMap<>();

  synchronized byte[] effect(String reference) {
    effects.add(reference);
    byte[] body =
        ("{\"charge\":\"ch_" + effects.size() + "\",\"ref\":\"" + reference + "\"}")
            .getBytes(StandardCharsets.UTF_8);
    records.put(reference, body);
    return body;
  }

  int count() {
    return effects.size();
  }

  /** A lookup reading the provider's current state. */
  Outcome.Found lookup(EffectContext context) {
    byte[] body = records.get(context.operationId());
    return body == null ? null : Outcome.success(body, "application/json");
  }
}
