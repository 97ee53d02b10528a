"""The monitoring that ships with idemd: the Grafana dashboard, the chart's PrometheusRule,
the plain rule file in deploy/prometheus and the metrics table in deploy/README.md, checked
against the metrics that src/metrics.rs exports (read as text) and against each other."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from conftest import (CHART, NAMESPACE, POSTGRES, REPO_ROOT, fullname, helm_binary, render,
                      render_error)
from plain_rules import PLAIN_VALUES, plain_file_text
from promql import Selector, parse_many, selectors

METRICS_RS = REPO_ROOT / "src" / "metrics.rs"
# Label values metrics.rs takes from the domain (the one function naming claim outcomes).
LABEL_VALUE_SOURCES = (REPO_ROOT / "crates" / "idemd-domain" / "src" / "claim_outcome.rs",)
DASHBOARD = CHART / "dashboards" / "idemd-overview.json"
RULES_FILE = REPO_ROOT / "deploy" / "prometheus" / "idemd-alerts.yaml"
DEPLOY_README = REPO_ROOT / "deploy" / "README.md"

# Selector of the plain rule file, in place of the chart's default one.
PLAIN_SELECTOR = 'job="idemd"'
# Labels that the scrape adds (ServiceMonitor or the scrape config in deploy/README.md).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
# Series Prometheus makes itself.
PROMETHEUS_SERIES = {"up"}
# Series of kube-state-metrics that the alerts read (idemd exports no readiness metric),
# with their labels.
KUBE_STATE_METRICS_SERIES = {
    "kube_deployment_status_replicas_unavailable": {"namespace", "deployment"},
}
# tonic::Code's Debug names, the values of the `code` label.
GRPC_CODES = {
    "Ok", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",
    "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
}
# Labels whose values are string literals in src/metrics.rs.
ENUM_LABELS = {"outcome", "disposition", "resolution", "kind", "state"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
OBSERVE_RS = REPO_ROOT / "src" / "grpc" / "observe.rs"


@pytest.fixture(scope="module", autouse=True)
def _parse_every_expression_at_once():
    """One node run for the dashboard's and the rules' expressions, not one per call."""
    exprs = [expr for _, expr in dashboard_queries()]
    exprs += [re.fullmatch(r"label_values\((.+), *[a-z_]+\)", variable_query(var)).group(1)
              for var in variables().values() if var["type"] == "query"]
    exprs += [rule["expr"] for rule in chart_rules() + plain_rules()]
    parse_many(exprs)


# --- what src/metrics.rs exports ------------------------------------------------------


@lru_cache(maxsize=None)
def metrics_source() -> str:
    return METRICS_RS.read_text()


@lru_cache(maxsize=None)
def metric_families() -> dict[str, str]:
    """Metric name -> counter, gauge or histogram, from the "idemd_..." literals."""
    text = metrics_source()
    names = set(re.findall(r'"(idemd_[a-z0-9_]+)"', text))
    assert names, f"no \"idemd_...\" string literal in {METRICS_RS}"
    histograms = set(re.findall(
        r'(?:describe|register)_histogram\(\s*(?:&Key::from_parts\(\s*)?"(idemd_[a-z0-9_]+)"', text))
    assert histograms, "no histogram found in src/metrics.rs (describe_histogram/register_histogram)"
    return {name: "histogram" if name in histograms else
            "counter" if name.endswith("_total") else "gauge" for name in names}


def exported_series() -> set[str]:
    """Series names a scrape can return: histograms as _bucket/_sum/_count."""
    series = set()
    for name, kind in metric_families().items():
        if kind == "histogram":
            series.update(name + suffix for suffix in HISTOGRAM_SUFFIXES)
        else:
            series.add(name)
    return series


def family_of(series: str) -> str:
    if series in metric_families():
        return series
    for suffix in HISTOGRAM_SUFFIXES:
        base = series.removesuffix(suffix)
        if series.endswith(suffix) and metric_families().get(base) == "histogram":
            return base
    raise AssertionError(f"{series} is not exported by src/metrics.rs")


def metrics_rs_label_names() -> set[str]:
    # Label::new("name", …), Label::from_static_parts("name", …), or a ("name", value) pair.
    pattern = r'(?:Label::(?:new|from_static_parts)\(\s*|Some\(\(\s*)"([a-z_]+)"\s*,'
    return set(re.findall(pattern, metrics_source()))


def latency_buckets() -> set[float]:
    """The histograms' `le` values besides +Inf: LATENCY_BUCKETS in src/metrics.rs."""
    match = re.search(r"const LATENCY_BUCKETS: &\[f64\] = &\[([^\]]*)\]", metrics_source())
    assert match, "no LATENCY_BUCKETS in src/metrics.rs"
    return {float(value) for value in match.group(1).replace("\n", " ").split(",") if value.strip()}


def rpc_names() -> set[str]:
    """The `rpc` label's values: the api_methods! list in src/grpc/observe.rs, and unknown."""
    match = re.search(r'api_methods!\("[^"]+":([^)]*)\);', OBSERVE_RS.read_text())
    assert match, "no api_methods! list in src/grpc/observe.rs"
    return {name.strip() for name in match.group(1).split(",") if name.strip()} | {"unknown"}


def metrics_rs_literals() -> set[str]:
    sources = [metrics_source()] + [source.read_text() for source in LABEL_VALUE_SOURCES]
    return {literal for text in sources for literal in re.findall(r'"([a-z_]+)"', text)}


# --- the metrics table of deploy/README.md ------------------------------------------------


@lru_cache(maxsize=None)
def metrics_table() -> dict[str, dict]:
    rows = {}
    for line in DEPLOY_README.read_text().splitlines():
        match = re.match(r"^\| `(idemd_[a-z0-9_]+)` \|(.*)\|$", line)
        if match:
            kind, labels, across, meaning = [cell.strip() for cell in match.group(2).split("|")]
            rows[match.group(1)] = {
                "type": kind,
                "labels": set(re.findall(r"`([a-z_]+)`", labels)),
                "across": across,
                "meaning": meaning,
            }
    assert rows, "no metrics table in deploy/README.md"
    return rows


def database_counts() -> set[str]:
    return {name for name, row in metrics_table().items() if "database count" in row["across"]}


def test_readme_table_lists_exactly_the_exported_metrics():
    table, families = metrics_table(), metric_families()
    assert set(table) - set(families) == set(), "deploy/README.md lists metrics idemd does not export"
    assert set(families) - set(table) == set(), "add the new metrics to the table in deploy/README.md"
    for name, row in table.items():
        assert row["type"] == families[name], f"{name}: README says {row['type']}"
        assert row["meaning"], name
        assert row["across"], name


def test_readme_table_labels_are_the_ones_metrics_rs_sets():
    documented = set().union(*(row["labels"] for row in metrics_table().values()))
    assert documented == metrics_rs_label_names()


def test_database_counts_are_the_gauges_metrics_rs_calls_database_counts():
    # metrics.rs says "(database count)" in the help text of exactly those gauges.
    marked = set(re.findall(r'"(idemd_[a-z0-9_]+)",\s*"[^"]*\(database count\)', metrics_source()))
    assert marked and database_counts() == marked
    for name in marked:
        assert metric_families()[name] == "gauge"
        assert metrics_table()[name]["across"].startswith("max"), name


# --- checking one PromQL expression ----------------------------------------------------------


def check_selector(selector: Selector, where: str) -> None:
    name = selector.metric
    if name in PROMETHEUS_SERIES:
        return
    if name in KUBE_STATE_METRICS_SERIES:
        for label, _, _ in selector.matchers:
            assert label in KUBE_STATE_METRICS_SERIES[name] | TARGET_LABELS, \
                f"{where}: {name} has no label {label}"
        return
    assert name in exported_series(), f"{where}: {name} is not exported by src/metrics.rs"
    family = family_of(name)
    kind = metric_families()[family]
    allowed = metrics_table()[family]["labels"] | TARGET_LABELS
    if name.endswith("_bucket"):
        allowed = allowed | {"le"}
    for label, op, value in selector.matchers:
        assert label in allowed, f"{where}: {name} has no label {label}"
        if op in ("=", "!=") and label in ENUM_LABELS:
            assert value in metrics_rs_literals(), f"{where}: {label}={value!r} is never set"
        if op in ("=", "!=") and label == "code":
            assert value in GRPC_CODES, f"{where}: code={value!r} is not a gRPC code name"
    calls = [call.name for call in selector.calls]
    if kind == "counter" or kind == "histogram":
        assert selector.has_range and calls and calls[0] in ("rate", "irate", "increase"), \
            f"{where}: {name} is a counter; use rate()/increase() over a range"
        aggregation = selector.first_aggregation()
        if aggregation is not None:
            assert aggregation.name == "sum", \
                f"{where}: add counters up across replicas with sum, not {aggregation.name}"
    if name.endswith("_bucket"):
        aggregation = selector.first_aggregation()
        assert "histogram_quantile" in calls, f"{where}: {name} outside histogram_quantile"
        assert aggregation and aggregation.grouping == "by" and "le" in aggregation.labels, \
            f"{where}: aggregate {name} by (le, ...) before histogram_quantile"
    if family in database_counts():
        aggregation = selector.first_aggregation()
        assert aggregation is not None and aggregation.name in ("max", "min"), \
            f"{where}: {name} is the same database count on every replica: aggregate with max"


# --- the dashboard ---------------------------------------------------------------------------


@lru_cache(maxsize=None)
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def all_panels(panels: list[dict]) -> list[dict]:
    found = []
    for panel in panels:
        found.append(panel)
        found.extend(all_panels(panel.get("panels", [])))
    return found


def variables() -> dict[str, dict]:
    return {var["name"]: var for var in dashboard()["templating"]["list"]}


def variable_query(var: dict) -> str:
    query = var["query"]
    return query["query"] if isinstance(query, dict) else query


def test_dashboard_is_grafana_10_json_with_a_datasource_variable():
    board = dashboard()
    assert board["schemaVersion"] >= 37, "Grafana 10 writes schemaVersion 37 or later"
    assert board["uid"] and board["title"]
    assert board.get("id") is None, "an exported dashboard carries no database id"
    assert "__inputs" not in board, "use the ${datasource} variable, not import-time inputs"
    vars_ = variables()
    assert vars_["datasource"]["type"] == "datasource"
    assert vars_["datasource"]["query"] == "prometheus"
    for name in ("namespace", "job"):
        assert vars_[name]["type"] == "query"
        assert vars_[name]["datasource"]["uid"] == "${datasource}"
        assert re.fullmatch(r"label_values\(.+, *" + name + r"\)", variable_query(vars_[name]))
    # Every query goes through the variable: no data source uid of someone's Grafana.
    for node in [*all_panels(board["panels"]), *vars_.values()]:
        for holder in [node, *node.get("targets", [])]:
            ds = holder.get("datasource")
            if ds is not None and node.get("type") != "datasource":
                assert ds == {"type": "prometheus", "uid": "${datasource}"}, node.get("title")


def test_every_panel_has_a_title_and_a_unique_id():
    panels = all_panels(dashboard()["panels"])
    assert panels
    for panel in panels:
        assert isinstance(panel.get("title"), str) and panel["title"].strip(), panel
        assert isinstance(panel.get("id"), int), panel["title"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {sorted(ids)}"


def test_panels_fit_the_grid_without_overlapping():
    cells: dict[tuple[int, int], str] = {}
    for panel in all_panels(dashboard()["panels"]):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, expr) of every panel target."""
    queries = []
    for panel in all_panels(dashboard()["panels"]):
        if panel["type"] == "row":
            continue
        assert panel.get("targets"), f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            assert target.get("expr"), f"panel {panel['title']!r}: empty expr"
            queries.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    return queries


def test_dashboard_queries_use_only_exported_metrics_and_labels():
    for where, expr in dashboard_queries():
        found = selectors(expr)
        assert found, f"{where}: no metric in {expr!r}"
        for selector in found:
            check_selector(selector, where)
            # Every series is scoped by the dashboard's variables.
            assert selector.matcher("namespace") == ("=~", "$namespace"), where
            assert selector.matcher("job") == ("=~", "$job"), where
    for name, var in variables().items():
        if var["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+), *([a-z_]+)\)", variable_query(var))
        for selector in selectors(match.group(1)):
            check_selector(selector, f"variable {name}")


def test_dashboard_shows_what_operators_need():
    used: dict[str, set[str]] = {}
    for panel in all_panels(dashboard()["panels"]):
        for target in panel.get("targets", []):
            for selector in selectors(target["expr"]):
                used.setdefault(selector.metric, set()).add(panel["title"])
    for series in (
        "idemd_claims_total", "idemd_stale_writes_refused_total", "idemd_late_writes_refused_total",
        "idemd_takeovers_total", "idemd_unresolved_operations", "idemd_in_progress_operations",
        "idemd_retry_wait_operations", "idemd_sweep_backlog", "idemd_swept_total",
        "idemd_rpc_duration_seconds_bucket", "idemd_rpc_duration_seconds_count",
        "idemd_store_duration_seconds_bucket", "idemd_db_pool_connections",
        "idemd_db_pool_max_connections",
    ):
        assert series in used, f"no panel shows {series}"
    exprs = " ".join(expr for _, expr in dashboard_queries())
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.99," in exprs
    assert 'code!="Ok"' in exprs
    claims = next(p for p in all_panels(dashboard()["panels"])
                  if p.get("targets") and "sum by (outcome)" in p["targets"][0]["expr"])
    assert claims["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"


# --- the dashboard ConfigMap ------------------------------------------------------------------


def dashboard_config_map(values: dict) -> dict:
    return render({"metrics.grafanaDashboard.enabled": True, **values}).one(
        "ConfigMap", f"{fullname()}-dashboard")


def test_dashboard_config_map_is_opt_in(default_render, full_render):
    assert default_render.maybe("ConfigMap", f"{fullname()}-dashboard") is None
    assert full_render.maybe("ConfigMap", f"{fullname()}-dashboard") is not None


def test_dashboard_config_map_carries_the_json_for_the_sidecar():
    config_map = dashboard_config_map({})
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["idemd-overview.json"]) == dashboard()


def test_dashboard_config_map_namespace_labels_and_annotations_are_values():
    config_map = dashboard_config_map({
        "metrics.grafanaDashboard.namespace": "monitoring",
        "metrics.grafanaDashboard.labels": {"grafana_dashboard": "idemd"},
        "metrics.grafanaDashboard.annotations": {"grafana_folder": "Platform"},
    })
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "idemd"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Platform"}


# --- the PrometheusRule and the plain rule file ---------------------------------------------

CHART_SELECTOR = f'namespace="{NAMESPACE}",service="{fullname()}"'
CHART_READY_SELECTOR = f'namespace="{NAMESPACE}",deployment="{fullname()}"'
RUNBOOKS = REPO_ROOT / "docs" / "runbooks"


def chart_rules(values: dict | None = None) -> list[dict]:
    rule = render({"metrics.prometheusRule.enabled": True, **(values or {})}).one(
        "PrometheusRule", fullname())
    return [entry for group in rule["spec"]["groups"] for entry in group["rules"]]


@lru_cache(maxsize=None)
def plain_rule_file() -> dict:
    return yaml.safe_load(RULES_FILE.read_text())


def plain_rules() -> list[dict]:
    return [entry for group in plain_rule_file()["groups"] for entry in group["rules"]]


def test_plain_rule_file_is_a_prometheus_rule_file():
    document = plain_rule_file()
    assert set(document) == {"groups"}
    names = [group["name"] for group in document["groups"]]
    assert len(names) == len(set(names)) and all(names)
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "limit", "rules", "labels", "query_offset"}
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "record", "expr", "for", "keep_firing_for",
                                 "labels", "annotations"}, rule


def test_plain_rule_file_is_the_charts_rules_with_the_plain_selectors():
    """deploy/prometheus/idemd-alerts.yaml is the chart's PrometheusRule with default values
    and plain_rules.PLAIN_VALUES, alert for alert and byte for byte."""
    expected = chart_rules(PLAIN_VALUES)
    plain = plain_rules()
    assert [rule["alert"] for rule in plain] == [rule["alert"] for rule in expected]
    for got, want in zip(plain, expected):
        assert got == want, f"{got['alert']} differs from the chart"
    assert RULES_FILE.read_text() == plain_file_text(helm_binary()), \
        "regenerate it: HELM=... python3 tests/chart/plain_rules.py"


def test_chart_selects_its_own_release():
    for rule in chart_rules():
        wanted = CHART_READY_SELECTOR if rule["alert"] == "IdemdNotReady" else CHART_SELECTOR
        found = selectors(rule["expr"])
        assert found, rule["alert"]
        for selector in found:
            for matcher in wanted.split(","):
                label, value = matcher.split("=", 1)
                assert selector.matcher(label) == ("=", value.strip('"')), rule["alert"]


def test_plain_rules_select_the_scrape_job_only():
    for rule in plain_rules():
        for selector in selectors(rule["expr"]):
            if selector.metric in KUBE_STATE_METRICS_SERIES:
                assert selector.matcher("deployment") == ("=", "idemd"), rule["alert"]
            else:
                assert selector.matcher("job") == ("=", "idemd"), rule["alert"]
            assert selector.matcher("namespace") is None, rule["alert"]


@pytest.mark.parametrize("source", ["chart", "plain"])
def test_alerts_use_only_exported_metrics_and_labels(source):
    rules = chart_rules() if source == "chart" else plain_rules()
    assert rules
    for rule in rules:
        found = selectors(rule["expr"])
        assert found, rule["alert"]
        for selector in found:
            check_selector(selector, f"{source} alert {rule['alert']}")


def test_alerts_group_by_namespace_and_job():
    # job exists in every Prometheus (the ServiceMonitor sets it to the Service's name), so
    # the same rules work with and without prometheus-operator. Histogram buckets keep le
    # for histogram_quantile; per-replica figures keep instance; kube-state-metrics' job is
    # its own, so readiness groups by the Deployment.
    allowed = {("namespace", "job"), ("namespace", "job", "le"),
               ("namespace", "job", "instance"), ("namespace", "deployment")}
    for rule in chart_rules():
        for selector in selectors(rule["expr"]):
            aggregation = selector.first_aggregation()
            if aggregation is not None:
                assert aggregation.labels in allowed, rule["alert"]


def test_every_alert_links_its_runbook():
    for rule in chart_rules():
        url = rule["annotations"]["runbook_url"]
        assert url == f"docs/runbooks/{rule['alert']}.md", rule["alert"]
        assert (REPO_ROOT / url).is_file(), f"{url} is missing"
    rules = chart_rules({"metrics.prometheusRule.runbookBaseUrl": "https://example.com/rb/"})
    assert all(rule["annotations"]["runbook_url"] == f"https://example.com/rb/{rule['alert']}.md"
               for rule in rules)
    rules = chart_rules({"metrics.prometheusRule.runbookBaseUrl": ""})
    assert all("runbook_url" not in rule["annotations"] for rule in rules)


def test_no_runbook_without_its_alert():
    alerts = {rule["alert"] for rule in chart_rules()}
    pages = {page.stem for page in RUNBOOKS.glob("*.md")} - {"README"}
    assert pages == alerts


@pytest.mark.parametrize("alert", sorted(rule["alert"] for rule in yaml.safe_load(
    RULES_FILE.read_text())["groups"][0]["rules"]))
def test_runbook_answers_the_on_call_questions(alert):
    text = (RUNBOOKS / f"{alert}.md").read_text()
    assert text.startswith(f"# {alert}\n"), alert
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings == ["Meaning", "Impact on callers", "Confirm", "Act", "Escalate"], alert


# --- the promtool unit tests (tests/chart/idemd-alerts.test.yaml) ---------------------------
# .ci/chart-check runs them with `promtool test rules`; these tests keep them honest.

RULE_TESTS = Path(__file__).with_name("idemd-alerts.test.yaml")
SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$')
SERIES_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


@lru_cache(maxsize=None)
def rule_tests() -> dict:
    return yaml.safe_load(RULE_TESTS.read_text())


def input_series() -> list[tuple[str, dict[str, str]]]:
    found = []
    for test in rule_tests()["tests"]:
        for entry in test["input_series"]:
            match = SERIES.fullmatch(entry["series"])
            assert match, entry["series"]
            labels = dict(SERIES_LABEL.findall(match.group(2)))
            found.append((match.group(1), labels))
    return found


def test_rule_tests_load_the_plain_rule_file():
    assert [(RULE_TESTS.parent / path).resolve() for path in rule_tests()["rule_files"]] == \
        [RULES_FILE.resolve()]


def test_rule_tests_feed_only_series_idemd_exports():
    """An expression naming a metric, label or value idemd never produces could only be
    made to fire by input naming it too: refused here."""
    for name, labels in input_series():
        where = f"input series {name}{labels}"
        assert "job" in labels, where
        if name in PROMETHEUS_SERIES:
            continue
        if name in KUBE_STATE_METRICS_SERIES:
            assert set(labels) <= KUBE_STATE_METRICS_SERIES[name] | TARGET_LABELS, where
            continue
        assert name in exported_series(), f"{where}: not exported by src/metrics.rs"
        family = family_of(name)
        allowed = metrics_table()[family]["labels"] | TARGET_LABELS
        if name.endswith("_bucket"):
            allowed = allowed | {"le"}
            assert labels["le"] == "+Inf" or float(labels["le"]) in latency_buckets(), where
        assert set(labels) <= allowed, f"{where}: labels {set(labels) - allowed} never set"
        for label, value in labels.items():
            if label in ENUM_LABELS:
                assert value in metrics_rs_literals(), f"{where}: {label}={value!r} is never set"
            if label == "code":
                assert value in GRPC_CODES, where
            if label == "rpc":
                assert value in rpc_names(), where


def test_every_alert_is_tested_firing_and_quiet():
    firing, quiet = set(), set()
    for test in rule_tests()["tests"]:
        for case in test["alert_rule_test"]:
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    alerts = {rule["alert"] for rule in plain_rules()}
    assert alerts - firing == set(), "add a promtool test where these fire"
    assert alerts - quiet == set(), "add a promtool test where these stay quiet"
    assert (firing | quiet) - alerts == set(), "tests of alerts that do not exist"


def test_the_alert_values_turn_alerts_off_and_set_thresholds():
    rules = chart_rules({"metrics.prometheusRule.rules.serverErrors.enabled": False,
                         "metrics.prometheusRule.rules.latency.threshold": 2,
                         "metrics.prometheusRule.rules.latency.for": "20m"})
    by_name = {rule["alert"]: rule for rule in rules}
    assert "IdemdServerErrors" not in by_name
    assert by_name["IdemdLatencyHigh"]["expr"].endswith(" > 2")
    assert by_name["IdemdLatencyHigh"]["for"] == "20m"


# --- metrics switch and label settings ----------------------------------------------------


def test_metrics_can_be_switched_off():
    r = render({**POSTGRES, "metrics.enabled": False, "networkPolicy.enabled": True,
                "networkPolicy.egress.database.cidrs": ["10.0.0.0/24"]})
    assert r.one("ConfigMap", fullname())["data"]["IDEMD_METRICS_LISTEN"] == "off"
    deployment = r.one("Deployment", fullname())
    ctr = deployment["spec"]["template"]["spec"]["containers"][0]
    # TLS is on by default: the plaintext health port stays, for the probes.
    ports = {port["name"]: port["containerPort"] for port in ctr["ports"]}
    assert set(ports) == {"grpc", "health"}
    service = r.one("Service", fullname())
    assert {port["name"] for port in service["spec"]["ports"]} == {"grpc"}
    policy = r.one("NetworkPolicy", fullname())
    ingress_ports = {port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]}
    assert ingress_ports == {ports["grpc"], ports["health"]}


@pytest.mark.parametrize("feature", ["serviceMonitor", "prometheusRule"])
def test_scraping_switched_off_metrics_is_refused(feature):
    error = render_error({"metrics.enabled": False, f"metrics.{feature}.enabled": True})
    assert "metrics.enabled" in error


def test_metric_labels_are_settings(default_render, full_render, all_features_values):
    data = default_render.one("ConfigMap", fullname())["data"]
    assert data["IDEMD_METRICS_TENANT_LABEL"] == "false"
    assert "IDEMD_METRICS_OPERATIONS" not in data
    data = full_render.one("ConfigMap", fullname())["data"]
    metrics = all_features_values["metrics"]
    assert data["IDEMD_METRICS_OPERATIONS"] == ",".join(metrics["operations"])
    assert data["IDEMD_METRICS_TENANT_LABEL"] == str(metrics["tenantLabel"]).lower()


@pytest.mark.parametrize("values", [
    {"metrics.operations": ["payments.charge,refunds"]},
    {"metrics.operations": ["has space"]},
    {"metrics.operations": "payments.charge"},
    {"metrics.tenantLabel": "yes"},
    {"metrics.gaugeInterval": "often"},
    {"metrics.grafanaDashboard.labels": {"grafana_dashboard": 1}},
    {"metrics.prometheusRule.rules.serverErrors.threshold": 5},
    {"metrics.prometheusRule.rules.serverErrors.codes": "Internal|Unavailable"},
    {"metrics.prometheusRule.rules.latency.rpcs": ["Claim|Renew"]},
    {"metrics.prometheusRule.rules.latency.quantile": 99},
    {"metrics.prometheusRule.rules.unresolvedStuck.for": "two hours"},
    {"metrics.prometheusRule.runbookBaseUrl": "has space"},
], ids=lambda values: ",".join(values))
def test_schema_rejects_wrong_metrics_values(values):
    assert "schema" in render_error(values)
