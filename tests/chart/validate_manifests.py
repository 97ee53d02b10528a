#!/usr/bin/env python3
"""Validate rendered Kubernetes manifests offline with kubernetes-validate.

Usage: validate_manifests.py KUBERNETES_VERSION FILE...

Every document is checked in strict mode (unknown fields are errors) against the
given Kubernetes version. Kinds whose schema kubernetes-validate does not ship are
errors too, except the prometheus-operator kinds listed in EXCLUDED, which
tests/chart/test_chart.py checks instead. Prints one line per document and exits 1
if any document fails.
"""

import sys

import kubernetes_validate
import yaml

# Custom resources that are not part of Kubernetes; their shape is asserted by
# tests/chart/test_chart.py (test_service_monitor_*, test_prometheus_rule_*,
# test_cert_manager_*) and tests/chart/test_monitoring.py.
EXCLUDED = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("cert-manager.io/v1", "Certificate"),
}


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    version, files = argv[1], argv[2:]
    failures = 0
    valid = 0
    for path in files:
        with open(path, encoding="utf-8") as handle:
            documents = [doc for doc in yaml.safe_load_all(handle) if doc]
        if not documents:
            print(f"FAIL {path}: no Kubernetes documents rendered")
            failures += 1
        for doc in documents:
            name = f"{path}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            if (doc.get("apiVersion"), doc.get("kind")) in EXCLUDED:
                print(f"SKIP {name} (custom resource, checked by tests/chart)")
                continue
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                location = ".".join(str(part) for part in error.path) or "(root)"
                print(f"FAIL {name}: {location}: {error.message}")
                failures += 1
            except kubernetes_validate.SchemaNotFoundError as error:
                print(f"FAIL {name}: {error.message}")
                failures += 1
            else:
                print(f"ok   {name}")
                valid += 1
    print(f"{valid} valid, {failures} invalid (Kubernetes {version}, strict)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
