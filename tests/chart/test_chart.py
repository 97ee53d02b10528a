"""Facts the idemd chart must keep, asserted on `helm template` output.

Run through .ci/chart-check, which provides helm (HELM) and the Python packages.
"""

from __future__ import annotations

import re

import yaml

import kubernetes_validate
import pytest

from conftest import (
    CHART,
    KUBE_VERSION,
    NAMESPACE,
    POSTGRES,
    REPO_ROOT,
    Render,
    container,
    duration_seconds,
    env_map,
    fullname,
    matches,
    notes,
    pod_spec,
    render,
    render_error,
)

HOOK_EVENTS = "pre-install,pre-upgrade"
READINESS_SERVICE = "idem.v1.IdempotencyService"
PROM_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def hook_weight(doc: dict) -> int:
    return int(doc["metadata"]["annotations"]["helm.sh/hook-weight"])


def is_hook(doc: dict) -> bool:
    return "helm.sh/hook" in doc["metadata"].get("annotations", {})


def deployment(r: Render) -> dict:
    return r.one("Deployment", fullname())


def server(r: Render) -> dict:
    return container(deployment(r), "idemd")


def config_data(r: Render) -> dict[str, str]:
    return r.one("ConfigMap", fullname())["data"]


def container_port(ctr: dict, name: str) -> int:
    ports = {port["name"]: port["containerPort"] for port in ctr["ports"]}
    assert name in ports, f"container has no port named {name}: {ports}"
    return ports[name]


# --- probes ---------------------------------------------------------------------


# TLS off, as it may only be: plaintext asked for explicitly (behind a mesh).
PLAINTEXT = {"tls.enabled": False, "tls.insecurePlaintext": True}


@pytest.mark.parametrize("values", [PLAINTEXT, {**POSTGRES, **PLAINTEXT}],
                         ids=["embedded", "postgres"])
def test_probes_are_native_grpc_probes_on_the_grpc_port_without_tls(values):
    ctr = server(render(values))
    grpc_port = container_port(ctr, "grpc")
    for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = ctr[probe_name]
        assert set(probe) & {"httpGet", "tcpSocket", "exec"} == set(), probe_name
        assert probe["grpc"]["port"] == grpc_port, probe_name
    assert ctr["livenessProbe"]["grpc"]["service"] == ""
    assert ctr["startupProbe"]["grpc"]["service"] == ""
    assert ctr["readinessProbe"]["grpc"]["service"] == READINESS_SERVICE


def test_probes_use_the_plaintext_health_port_when_tls_is_on(full_render):
    ctr = server(full_render)
    health_port = container_port(ctr, "health")
    assert health_port != container_port(ctr, "grpc")
    for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert ctr[probe_name]["grpc"]["port"] == health_port, probe_name
    assert ctr["livenessProbe"]["grpc"]["service"] == ""
    assert ctr["readinessProbe"]["grpc"]["service"] == READINESS_SERVICE
    assert config_data(full_render)["IDEMD_HEALTH_LISTEN"].endswith(f":{health_port}")


def test_health_listener_is_only_configured_with_tls():
    plaintext = render({**POSTGRES, **PLAINTEXT})
    assert "IDEMD_HEALTH_LISTEN" not in config_data(plaintext)
    assert config_data(plaintext)["IDEMD_INSECURE_PLAINTEXT"] == "true"
    ports = {port["name"] for port in server(plaintext)["ports"]}
    assert ports == {"grpc", "metrics"}


def test_tls_secret_is_mounted_read_only_and_referenced_by_env(full_render, all_features_values):
    deploy = deployment(full_render)
    ctr = server(full_render)
    env = env_map(ctr)
    volumes = {volume["name"]: volume for volume in pod_spec(deploy)["volumes"]}
    tls_volume = volumes["tls"]
    assert tls_volume["secret"]["secretName"] == all_features_values["tls"]["existingSecret"]
    mount = next(m for m in ctr["volumeMounts"] if m["name"] == "tls")
    assert mount["readOnly"] is True
    assert env["IDEMD_TLS_CERT"]["value"] == f"{mount['mountPath']}/tls.crt"
    assert env["IDEMD_TLS_KEY"]["value"] == f"{mount['mountPath']}/tls.key"
    assert {item["path"] for item in tls_volume["secret"]["items"]} == {"tls.crt", "tls.key"}


def test_tls_is_on_by_default_from_the_releases_tls_secret(default_render, postgres_render):
    for r in (default_render, postgres_render):
        ctr = server(r)
        env = env_map(ctr)
        assert env["IDEMD_TLS_CERT"]["value"].endswith("/tls.crt")
        assert "IDEMD_INSECURE_PLAINTEXT" not in config_data(r)
        assert config_data(r)["IDEMD_TLS_RELOAD_INTERVAL"] == "5s"
        volumes = {volume["name"]: volume for volume in pod_spec(deployment(r))["volumes"]}
        assert volumes["tls"]["secret"]["secretName"] == f"{fullname()}-tls"
        # No cert-manager Certificate unless an issuer is named.
        assert r.all("Certificate") == []
        # Probes go to the plaintext health port.
        health_port = container_port(ctr, "health")
        assert ctr["readinessProbe"]["grpc"]["port"] == health_port


def test_plaintext_is_refused_unless_asked_for_explicitly():
    error = render_error({**POSTGRES, "tls.enabled": False})
    assert "tls.insecurePlaintext" in error
    assert "mesh" in error


def test_cert_manager_certificate_from_an_issuer_reference():
    r = render({**POSTGRES, "tls.certManager.issuerRef.name": "internal-ca",
                "tls.certManager.issuerRef.kind": "ClusterIssuer",
                "tls.certManager.dnsNames": ["idemd.example.com"]})
    certificate = r.one("Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    spec = certificate["spec"]
    assert spec["secretName"] == f"{fullname()}-tls"
    assert spec["issuerRef"] == {"name": "internal-ca", "kind": "ClusterIssuer",
                                 "group": "cert-manager.io"}
    assert f"{fullname()}.{NAMESPACE}.svc" in spec["dnsNames"]
    assert "idemd.example.com" in spec["dnsNames"]
    assert spec["usages"] == ["server auth"]
    volumes = {volume["name"]: volume for volume in pod_spec(deployment(r))["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == spec["secretName"]
    error = render_error({**POSTGRES, "tls.certManager.issuerRef.name": "internal-ca",
                          "tls.existingSecret": "mine"})
    assert "not both" in error


def test_mutual_tls_mounts_the_client_ca_and_the_identities(full_render, all_features_values):
    client_auth = all_features_values["tls"]["clientAuth"]
    ctr = server(full_render)
    env = env_map(ctr)
    mount = next(m for m in ctr["volumeMounts"] if m["name"] == "client-auth")
    assert mount["readOnly"] is True and "subPath" not in mount
    assert env["IDEMD_TLS_CLIENT_CA"]["value"] == f"{mount['mountPath']}/ca.crt"
    assert env["IDEMD_TLS_IDENTITIES"]["value"] == f"{mount['mountPath']}/identities.yaml"
    assert config_data(full_render)["IDEMD_TLS_REQUIRE_CLIENT_CERT"] == "false"
    volumes = {volume["name"]: volume for volume in pod_spec(deployment(full_render))["volumes"]}
    sources = volumes["client-auth"]["projected"]["sources"]
    secret = next(source["secret"] for source in sources if "secret" in source)
    assert secret["name"] == client_auth["caSecret"]
    assert secret["items"] == [{"key": client_auth["caKey"], "path": "ca.crt"}]
    config_map = next(source["configMap"] for source in sources if "configMap" in source)
    identities = full_render.one("ConfigMap", config_map["name"])
    mapping = yaml.safe_load(identities["data"]["identities.yaml"])
    assert mapping == {"identities": client_auth["identities"]}


def test_operation_policies_are_a_mounted_config_map_read_again_on_change(
        full_render, all_features_values):
    policy = all_features_values["policy"]
    ctr = server(full_render)
    mount = next(m for m in ctr["volumeMounts"] if m["name"] == "policy")
    assert mount["readOnly"] is True and "subPath" not in mount
    assert env_map(ctr)["IDEMD_POLICY_FILE"]["value"] == f"{mount['mountPath']}/policies.yaml"
    assert config_data(full_render)["IDEMD_POLICY_RELOAD_INTERVAL"] == policy["reloadInterval"]
    volumes = {volume["name"]: volume for volume in pod_spec(deployment(full_render))["volumes"]}
    config_map = full_render.one("ConfigMap", volumes["policy"]["configMap"]["name"])
    assert yaml.safe_load(config_map["data"]["policies.yaml"]) == {"policies": policy["operations"]}
    # None by default: no file, no mount, the server's bounds.
    plain = render(POSTGRES)
    assert "IDEMD_POLICY_FILE" not in env_map(server(plain))
    assert all(m["name"] != "policy" for m in server(plain)["volumeMounts"])


@pytest.mark.parametrize("entry", [
    {"lease": {"max": "1m"}},
    {"operation": "pay ments"},
    {"operation": "a.*", "lease": {"max": "soon"}},
    {"operation": "a.*", "leese": {"max": "1m"}},
    {"operation": "a.*", "max_attempts": {"max": 0}},
])
def test_schema_refuses_a_malformed_policy(entry):
    render_error({**POSTGRES, "policy.operations": [entry]})


@pytest.mark.parametrize("values,says", [
    ({"tls.clientAuth.enabled": True, "tls.clientAuth.identities": [
        {"uri": "spiffe://a/b", "tenant": "t", "scopes": ["operations"]}]},
     "tls.clientAuth.caSecret"),
    ({"tls.clientAuth.enabled": True, "tls.clientAuth.caSecret": "bundle"},
     "tls.clientAuth.identities"),
])
def test_mutual_tls_needs_a_ca_and_identities(values, says):
    assert says in render_error({**POSTGRES, **values})


@pytest.mark.parametrize("identity", [
    {"uri": "spiffe://a/b", "tenant": "t", "scopes": ["write"]},
    {"uri": "spiffe://a/b", "tenant": "t", "scopes": []},
    {"uri": "spiffe://a/b", "dns": "a.example", "tenant": "t", "scopes": ["admin"]},
    {"tenant": "t", "scopes": ["admin"]},
])
def test_schema_refuses_a_malformed_identity(identity):
    render_error({**POSTGRES, "tls.clientAuth.enabled": True,
                  "tls.clientAuth.caSecret": "bundle", "tls.clientAuth.identities": [identity]})


def test_production_values_example_renders_and_validates():
    production = yaml.safe_load((CHART / "values-production.yaml").read_text())
    r = render(_dotted(production))
    assert r.one("Certificate")["spec"]["issuerRef"]["name"] == \
        production["tls"]["certManager"]["issuerRef"]["name"]
    assert env_map(server(r))["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == \
        production["database"]["existingSecret"]
    assert "IDEMD_TLS_IDENTITIES" in env_map(server(r))
    manifests = [doc for doc in yaml.safe_load_all(r.text)
                 if doc and doc["kind"] != "Certificate"]
    for doc in manifests:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def _dotted(values: dict, prefix: str = "") -> dict:
    """Nested values as the dotted keys render() takes (lists stay whole)."""
    flat = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            flat.update(_dotted(value, path))
        else:
            flat[path] = value
    return flat


# --- database URL and secrets ---------------------------------------------------


def _workload_containers(r: Render) -> list[dict]:
    workloads = r.all("Deployment") + r.all("Job")
    return [ctr for workload in workloads for ctr in pod_spec(workload)["containers"]]


def test_database_url_comes_from_the_existing_secret_in_every_container(full_render,
                                                                        all_features_values):
    containers = _workload_containers(full_render)
    assert len(containers) == 3, "expected the server, migration and tenant-apply containers"
    for ctr in containers:
        entry = env_map(ctr)["DATABASE_URL"]
        assert "value" not in entry, f"{ctr['name']}: DATABASE_URL must not be a literal"
        ref = entry["valueFrom"]["secretKeyRef"]
        assert ref["name"] == all_features_values["database"]["existingSecret"]
        assert ref["key"] == all_features_values["database"]["secretKey"]


def test_embedded_store_has_no_database_url(default_render):
    assert "DATABASE_URL" not in env_map(server(default_render))


@pytest.mark.parametrize("values,all_features", [({}, False), (POSTGRES, False), ({}, True)],
                         ids=["embedded", "postgres", "all-features"])
def test_no_secret_value_is_inlined(values, all_features):
    r = render(values, all_features=all_features)
    assert r.all("Secret") == [], "the chart must only reference existing Secrets"
    url_with_credentials = re.compile(r"[a-z]+://[^\s/@\"]+:[^\s/@\"]+@")
    assert not url_with_credentials.search(r.text), "a URL with credentials was rendered"
    for ctr in _workload_containers(r):
        for entry in ctr.get("env", []):
            if re.search(r"(URL|PASSWORD|TOKEN|SECRET|KEY)$", entry["name"]) and "value" in entry:
                # Only file paths may be given literally (IDEMD_TLS_KEY is a path).
                assert entry["value"].startswith("/"), f"{entry['name']} is inlined"
    for config_map in r.all("ConfigMap"):
        for key in config_map.get("data", {}):
            assert not re.search(r"(PASSWORD|TOKEN|SECRET|DATABASE_URL)", key), key


def test_database_url_cannot_be_smuggled_through_extra_env():
    error = render_error({**POSTGRES, "config.extraEnv": [
        {"name": "DATABASE_URL", "value": "postgres://user:pw@db/idemd"}]})
    assert "database.existingSecret" in error


# --- migrations -----------------------------------------------------------------


def test_migration_job_is_a_pre_install_and_pre_upgrade_hook(postgres_render):
    job = postgres_render.one("Job", f"{fullname()}-migrate")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == HOOK_EVENTS
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"].split(",")
    ctr = container(job, "migrate")
    assert ctr["args"] == ["migrate"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] >= 0


def test_migration_job_dependencies_are_earlier_hooks(full_render):
    job = full_render.one("Job", f"{fullname()}-migrate")
    spec = pod_spec(job)
    sa = full_render.one("ServiceAccount", spec["serviceAccountName"])
    config_map_name = container(job, "migrate")["envFrom"][0]["configMapRef"]["name"]
    config_map = full_render.one("ConfigMap", config_map_name)
    policy = full_render.one("NetworkPolicy", f"{fullname()}-migrate")
    for dependency in (sa, config_map, policy):
        annotations = dependency["metadata"]["annotations"]
        kind = dependency["kind"]
        assert annotations["helm.sh/hook"] == HOOK_EVENTS, kind
        assert hook_weight(dependency) < hook_weight(job), kind
        assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"], kind
    # The hook NetworkPolicy selects the Job's pods and lets them reach the database.
    assert matches(policy["spec"]["podSelector"]["matchLabels"], job["spec"]["template"]["metadata"]["labels"])
    egress_ports = {port["port"] for rule in policy["spec"]["egress"] for port in rule.get("ports", [])}
    assert {53, 5432} <= egress_ports, egress_ports


def test_migration_job_runs_hardened_with_the_server_image(full_render):
    job = full_render.one("Job", f"{fullname()}-migrate")
    assert container(job, "migrate")["image"] == server(full_render)["image"]
    assert_hardened(pod_spec(job))


def test_declared_tenants_are_applied_after_the_migrations_without_a_secret_value(
        full_render, all_features_values):
    job = full_render.one("Job", f"{fullname()}-tenants")
    migrate = full_render.one("Job", f"{fullname()}-migrate")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == HOOK_EVENTS
    assert hook_weight(job) > hook_weight(migrate)
    assert_hardened(pod_spec(job))
    ctr = container(job, "tenant-apply")
    assert ctr["args"] == ["tenant", "apply", "-f", "/etc/idemd/tenants/tenants.yaml", "--prune"]
    assert ctr["image"] == server(full_render)["image"]
    config_map = full_render.one("ConfigMap", f"{fullname()}-tenants")
    assert hook_weight(config_map) < hook_weight(job)
    declared = yaml.safe_load(config_map["data"]["tenants.yaml"])
    payments = declared["tenants"][0]
    assert payments["tokens"][0] == {
        "name": "api-2026-12", "scopes": ["operations"],
        "sha256": all_features_values["tenants"]["declared"][0]["tokens"][0]["sha256"],
        "expiresAt": "2027-03-01T00:00:00Z"}
    token_file = payments["tokens"][1]["tokenFile"]
    assert "sha256" not in payments["tokens"][1]
    assert declared["tenants"][1] == {"name": "orders", "tokens": []}
    # The Secret holding the token is mounted read-only where tokenFile points.
    volumes = {volume["name"]: volume for volume in pod_spec(job)["volumes"]}
    mount = next(m for m in ctr["volumeMounts"] if token_file.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["secret"]["secretName"] == "idemd-payments-tokens"
    assert token_file.endswith("/idemd-payments-tokens/reconciler")


def test_no_tenant_job_without_declared_tenants(postgres_render):
    assert postgres_render.maybe("Job", f"{fullname()}-tenants") is None


def test_declared_tenants_need_the_migration_job():
    tenants = {"tenants.declared": [{"name": "t", "tokens": [{"name": "a", "sha256": "0" * 64}]}]}
    assert "migration Job" in render_error(tenants)
    assert "migration Job" in render_error({**POSTGRES, **tenants, "migrations.job.enabled": False})
    args = container(render({**POSTGRES, **tenants}).one("Job", f"{fullname()}-tenants"),
                     "tenant-apply")["args"]
    assert "--prune" not in args


def test_the_servers_own_resources_are_not_hooks(full_render):
    for doc in full_render.docs:
        if doc["metadata"]["name"] == fullname() or doc["kind"] in ("Deployment", "Service"):
            assert not is_hook(doc), f"{doc['kind']}/{doc['metadata']['name']} must not be a hook"


@pytest.mark.parametrize("values,expected", [
    (POSTGRES, "false"),
    ({**POSTGRES, "migrations.job.enabled": False}, "true"),
    ({}, "true"),
], ids=["postgres-with-job", "postgres-without-job", "embedded"])
def test_pods_migrate_on_start_only_when_no_job_migrates(values, expected):
    r = render(values)
    assert env_map(server(r))["IDEMD_MIGRATE_ON_START"]["value"] == expected
    has_job = r.maybe("Job", f"{fullname()}-migrate") is not None
    assert has_job == (expected == "false")


def test_hook_delete_policy_must_keep_before_hook_creation():
    error = render_error({**POSTGRES, "migrations.job.hookDeletePolicy": "hook-succeeded"})
    assert "before-hook-creation" in error


# --- graceful shutdown ----------------------------------------------------------


@pytest.mark.parametrize("all_features", [False, True], ids=["default", "all-features"])
def test_termination_grace_exceeds_the_drain_timeout(all_features):
    r = render(all_features=all_features)
    drain = duration_seconds(config_data(r)["IDEMD_DRAIN_TIMEOUT"])
    spec = pod_spec(deployment(r))
    pre_stop = server(r).get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    assert spec["terminationGracePeriodSeconds"] > drain + pre_stop


@pytest.mark.parametrize("values", [
    {"terminationGracePeriodSeconds": 25, "config.drainTimeoutSeconds": 25},
    {"terminationGracePeriodSeconds": 30, "config.drainTimeoutSeconds": 25,
     "lifecycle.preStopSleepSeconds": 5},
], ids=["grace-equals-drain", "grace-equals-drain-plus-prestop"])
def test_a_grace_period_not_above_the_drain_timeout_is_refused(values):
    assert "terminationGracePeriodSeconds" in render_error(values)


# --- embedded store -------------------------------------------------------------


def test_embedded_store_mounts_a_pvc_at_the_data_dir(default_render, chart_values):
    deploy = deployment(default_render)
    ctr = server(default_render)
    data_dir = env_map(ctr)["IDEMD_DATA_DIR"]["value"]
    assert data_dir == chart_values["persistence"]["mountPath"]
    mount = next(m for m in ctr["volumeMounts"] if m["mountPath"] == data_dir)
    volume = next(v for v in pod_spec(deploy)["volumes"] if v["name"] == mount["name"])
    claim = default_render.one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"]["type"] == "Recreate"


def test_embedded_store_uses_an_existing_claim_when_given():
    r = render({"persistence.existingClaim": "my-claim"})
    assert r.all("PersistentVolumeClaim") == []
    volume = next(v for v in pod_spec(deployment(r))["volumes"] if v["name"] == "data")
    assert volume["persistentVolumeClaim"]["claimName"] == "my-claim"


def test_embedded_store_without_persistence_uses_an_emptydir_and_warns():
    r = render({"persistence.enabled": False})
    assert r.all("PersistentVolumeClaim") == []
    volume = next(v for v in pod_spec(deployment(r))["volumes"] if v["name"] == "data")
    assert "emptyDir" in volume
    assert "WARNING: persistence.enabled is false" in notes({"persistence.enabled": False})


@pytest.mark.parametrize("values", [
    {"replicaCount": 2},
    {"autoscaling.enabled": True},
], ids=["replicas", "hpa"])
def test_embedded_store_refuses_more_than_one_replica(values):
    error = render_error(values)
    assert "embedded SQLite store" in error and "single replica" in error


def test_postgres_mode_rolls_without_downtime(postgres_render):
    strategy = deployment(postgres_render)["spec"]["strategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0
    assert postgres_render.all("PersistentVolumeClaim") == []
    assert "IDEMD_DATA_DIR" not in env_map(server(postgres_render))


def test_postgres_mode_allows_several_replicas():
    assert deployment(render({**POSTGRES, "replicaCount": 3}))["spec"]["replicas"] == 3


# --- security -------------------------------------------------------------------


def assert_hardened(spec: dict) -> None:
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert pod_security["seccompProfile"]["type"] == "RuntimeDefault"
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    for ctr in spec["containers"]:
        security = ctr["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, ctr["name"]
        assert security["allowPrivilegeEscalation"] is False, ctr["name"]
        assert "ALL" in security["capabilities"]["drop"], ctr["name"]
        assert not security["capabilities"].get("add"), ctr["name"]
        assert security.get("privileged", False) is False, ctr["name"]


@pytest.mark.parametrize("all_features", [False, True], ids=["default", "all-features"])
def test_pods_are_hardened(all_features):
    r = render(all_features=all_features)
    assert_hardened(pod_spec(deployment(r)))
    # A read-only root filesystem still needs a writable /tmp.
    assert any(m["mountPath"] == "/tmp" for m in server(r)["volumeMounts"])


@pytest.mark.parametrize("values", [
    {"replicaCount": "two"},
    {"replicaCount": -1},
    {"image.pullPolicy": "Sometimes"},
    {"config.logFormat": "xml"},
    {"config.drainTimeoutSeconds": "25s"},
    {"config.bounds.maxLease": "5 fortnights"},
    {"config.bounds.maxWait": "soon"},
    {"config.bounds.minLease": "-1s"},
    {"config.bounds.defaultMaxAttempts": 0},
    {"config.bounds.defaultMaxAttempts": 101},
    {"config.bounds.maxResultBytes": "1MiB"},
    {"config.answerCounts.capacity": 0},
    {"config.answerCounts.interval": "often"},
    {"config.newKeyRetries.threshold": 1},
    {"config.newKeyRetries.threshold": "3"},
    {"config.newKeyRetries.window": "a minute"},
    {"config.sweeper.batch": "many"},
    {"config.sweeper.tombstoneRetention": "forever"},
    {"config.authCacheTtl": 5},
    {"database.acquireTimeout": "soon"},
    {"service.port": 0},
    {"service.type": "Ingress"},
    {"database.maxConnections": 0},
    {"otel.sampler": "sometimes"},
    {"otel.samplerArg": 0.1},
    {"securityContext.readOnlyRootFilesystem": False},
    {"securityContext.allowPrivilegeEscalation": True},
    {"podSecurityContext.runAsNonRoot": False},
    {"persistence.size": "lots"},
    {"podDisruptionBudget.maxUnavailable": "half"},
    {"metrics.prometheusRule.rules.conflictRate.threshold": "high"},
    {"metrics.serviceMonitor.interval": "often"},
    {"unknownTopLevelKey": True},
    {"tls.unknown": True},
], ids=lambda values: ",".join(values))
def test_schema_rejects_wrong_values(values):
    assert "schema" in render_error(values)


# --- services and labels --------------------------------------------------------


def test_service_exposes_grpc_and_metrics_to_the_server_pods_only(full_render, chart_values):
    service = full_render.one("Service", fullname())
    ports = {port["name"]: port for port in service["spec"]["ports"]}
    assert ports["grpc"]["appProtocol"] == "grpc"
    assert ports["grpc"]["port"] == chart_values["service"]["port"]
    assert ports["metrics"]["port"] == chart_values["service"]["metricsPort"]
    ctr = server(full_render)
    for port in ports.values():
        container_port(ctr, port["targetPort"])
    selector = service["spec"]["selector"]
    assert matches(selector, deployment(full_render)["spec"]["template"]["metadata"]["labels"])
    job = full_render.one("Job", f"{fullname()}-migrate")
    assert not matches(selector, job["spec"]["template"]["metadata"]["labels"])
    assert matches(deployment(full_render)["spec"]["selector"]["matchLabels"],
                   deployment(full_render)["spec"]["template"]["metadata"]["labels"])


def test_headless_service_is_optional_and_headless(postgres_render, full_render):
    assert postgres_render.maybe("Service", f"{fullname()}-headless") is None
    headless = full_render.one("Service", f"{fullname()}-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"] == full_render.one("Service", fullname())["spec"]["selector"]
    assert [port["name"] for port in headless["spec"]["ports"]] == ["grpc"]


def test_every_resource_is_labelled_and_named_within_limits(full_render):
    for doc in full_render.docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "idemd"
        assert labels["app.kubernetes.io/instance"] == "rel"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert len(doc["metadata"]["name"]) <= 63
        assert doc["metadata"].get("namespace", NAMESPACE) == NAMESPACE


def test_long_release_names_stay_within_dns_limits():
    r = render({**POSTGRES, "fullnameOverride": "x" * 52, "headlessService.enabled": True,
                "metrics.serviceMonitor.enabled": True, "metrics.prometheusRule.enabled": True})
    assert "schema" in render_error({"fullnameOverride": "x" * 53})
    for doc in r.docs:
        assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]


def test_config_changes_roll_the_pods():
    before = deployment(render(POSTGRES))["spec"]["template"]["metadata"]["annotations"]
    after = deployment(render({**POSTGRES, "config.logLevel": "debug"}))
    checksum = before["checksum/config"]
    assert re.fullmatch(r"[0-9a-f]{64}", checksum)
    assert after["spec"]["template"]["metadata"]["annotations"]["checksum/config"] != checksum


def test_topology_spread_constraints_select_the_server_pods(postgres_render):
    deploy = deployment(postgres_render)
    constraints = pod_spec(deploy)["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in constraints} == {"topology.kubernetes.io/zone",
                                                      "kubernetes.io/hostname"}
    for constraint in constraints:
        assert constraint["labelSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]


# --- configuration --------------------------------------------------------------


def test_pods_listen_on_all_interfaces(postgres_render, chart_values):
    data = config_data(postgres_render)
    assert data["IDEMD_LISTEN"] == f"0.0.0.0:{chart_values['containerPorts']['grpc']}"
    assert data["IDEMD_METRICS_LISTEN"] == f"0.0.0.0:{chart_values['containerPorts']['metrics']}"
    assert data["IDEMD_DB_MAX_CONNECTIONS"] == str(chart_values["database"]["maxConnections"])
    assert data["IDEMD_LOG_FORMAT"] in ("json", "text")
    ctr = server(postgres_render)
    assert ctr["envFrom"][0]["configMapRef"]["name"] == fullname()
    assert ctr["args"] == ["serve"]


# Optional settings: value path -> environment variable. Empty or null leaves the variable
# out of the ConfigMap, so the server's built-in default applies.
OPTIONAL_SETTINGS = {
    "config.bounds.minLease": "IDEMD_MIN_LEASE",
    "config.bounds.maxLease": "IDEMD_MAX_LEASE",
    "config.bounds.defaultLease": "IDEMD_DEFAULT_LEASE",
    "config.bounds.defaultAttemptDuration": "IDEMD_DEFAULT_ATTEMPT_DURATION",
    "config.bounds.maxAttemptDuration": "IDEMD_MAX_ATTEMPT_DURATION",
    "config.bounds.maxRetryAfter": "IDEMD_MAX_RETRY_AFTER",
    "config.bounds.defaultRetention": "IDEMD_DEFAULT_RETENTION",
    "config.bounds.maxRetention": "IDEMD_MAX_RETENTION",
    "config.bounds.maxWait": "IDEMD_MAX_WAIT",
    "config.bounds.defaultMaxAttempts": "IDEMD_DEFAULT_MAX_ATTEMPTS",
    "config.bounds.maxResultBytes": "IDEMD_MAX_RESULT_BYTES",
    "config.bounds.maxPayloadBytes": "IDEMD_MAX_PAYLOAD_BYTES",
    "config.bounds.maxHistoryEntries": "IDEMD_MAX_HISTORY_ENTRIES",
    "config.transport.maxConcurrentStreams": "IDEMD_MAX_CONCURRENT_STREAMS",
    "config.transport.http2KeepaliveInterval": "IDEMD_HTTP2_KEEPALIVE_INTERVAL",
    "config.transport.http2KeepaliveTimeout": "IDEMD_HTTP2_KEEPALIVE_TIMEOUT",
    "config.transport.requestTimeout": "IDEMD_REQUEST_TIMEOUT",
    "config.transport.maxInFlight": "IDEMD_MAX_IN_FLIGHT",
    "config.transport.maxInFlightPerTenant": "IDEMD_MAX_IN_FLIGHT_PER_TENANT",
    "config.transport.maxWaiters": "IDEMD_MAX_WAITERS",
    "config.transport.maxWaitersPerTenant": "IDEMD_MAX_WAITERS_PER_TENANT",
    "config.transport.maxConnections": "IDEMD_MAX_CONNECTIONS",
    "config.transport.handshakeTimeout": "IDEMD_HANDSHAKE_TIMEOUT",
    "config.transport.connectionIdleTimeout": "IDEMD_CONNECTION_IDLE_TIMEOUT",
    "config.transport.maxRequestBytesInFlight": "IDEMD_MAX_REQUEST_BYTES_IN_FLIGHT",
    "config.transport.maxConnectionsPerSource": "IDEMD_MAX_CONNECTIONS_PER_SOURCE",
    "config.transport.maxConnectionAge": "IDEMD_MAX_CONNECTION_AGE",
    "config.transport.maxConnectionAgeGrace": "IDEMD_MAX_CONNECTION_AGE_GRACE",
    "config.authCacheTtl": "IDEMD_AUTH_CACHE_TTL",
    "config.authNegativeCacheTtl": "IDEMD_AUTH_NEGATIVE_CACHE_TTL",
    "config.authCacheEntries": "IDEMD_AUTH_CACHE_ENTRIES",
    "config.authLookupConcurrency": "IDEMD_AUTH_LOOKUP_CONCURRENCY",
    "config.authLookupQueue": "IDEMD_AUTH_LOOKUP_QUEUE",
    "config.authLookupQueueTimeout": "IDEMD_AUTH_LOOKUP_QUEUE_TIMEOUT",
    "config.resultCacheBytes": "IDEMD_RESULT_CACHE_BYTES",
    "config.readinessInterval": "IDEMD_READINESS_INTERVAL",
    "config.clockMargin": "IDEMD_CLOCK_MARGIN",
    "config.answerCounts.interval": "IDEMD_ANSWER_COUNT_INTERVAL",
    "config.answerCounts.capacity": "IDEMD_ANSWER_COUNT_CAPACITY",
    "config.newKeyRetries.window": "IDEMD_NEW_KEY_RETRY_WINDOW",
    "config.newKeyRetries.threshold": "IDEMD_NEW_KEY_RETRY_THRESHOLD",
    "config.sweeper.interval": "IDEMD_SWEEP_INTERVAL",
    "config.sweeper.batch": "IDEMD_SWEEP_BATCH",
    "config.sweeper.tombstoneRetention": "IDEMD_TOMBSTONE_RETENTION",
    "config.sweeper.auditRetention": "IDEMD_AUDIT_RETENTION",
    "database.acquireTimeout": "IDEMD_DB_ACQUIRE_TIMEOUT",
    "database.lockTimeout": "IDEMD_DB_LOCK_TIMEOUT",
    "database.statementTimeout": "IDEMD_DB_STATEMENT_TIMEOUT",
    "database.idleInTransactionTimeout": "IDEMD_DB_IDLE_IN_TRANSACTION_TIMEOUT",
    "database.callTimeout": "IDEMD_DB_CALL_TIMEOUT",
    "metrics.gaugeInterval": "IDEMD_GAUGE_INTERVAL",
}


def lookup(values: dict, path: str):
    for key in path.split("."):
        values = values[key]
    return values


def test_empty_optional_settings_are_left_to_the_server(default_render, full_render, chart_values,
                                                        all_features_values):
    assert set(chart_values["config"]["bounds"]) == {
        path.rsplit(".", 1)[1] for path in OPTIONAL_SETTINGS if path.startswith("config.bounds.")}
    for path in OPTIONAL_SETTINGS:
        assert lookup(chart_values, path) in ("", None), f"{path}: the default must be empty"
    assert not set(OPTIONAL_SETTINGS.values()) & set(config_data(default_render))
    data = config_data(full_render)
    for path, env in OPTIONAL_SETTINGS.items():
        value = lookup(all_features_values, path)
        assert value not in ("", None), f"ci/all-features-values.yaml should set {path}"
        assert data[env] == str(value), env


def test_large_numbers_are_written_as_integers():
    data = config_data(render({"config.bounds.maxResultBytes": 16777216, "config.sweeper.batch": 500}))
    assert data["IDEMD_MAX_RESULT_BYTES"] == "16777216"
    assert data["IDEMD_SWEEP_BATCH"] == "500"


def test_single_node_durability_is_acknowledged_only_when_asked():
    assert config_data(render())["IDEMD_SINGLE_NODE_DURABILITY_OK"] == "false"
    data = config_data(render({"database.singleNodeDurabilityOk": True}))
    assert data["IDEMD_SINGLE_NODE_DURABILITY_OK"] == "true"


def test_migration_job_gets_the_acquire_timeout(full_render, all_features_values):
    data = full_render.one("ConfigMap", f"{fullname()}-migrate")["data"]
    assert data["IDEMD_DB_ACQUIRE_TIMEOUT"] == all_features_values["database"]["acquireTimeout"]


def _rendered_env_names(r: Render) -> set[str]:
    names = set(config_data(r))
    names |= {entry["name"] for entry in server(r).get("env", [])}
    return names


# Settings of the binary the chart deliberately does not set.
UNMAPPED_SETTINGS = {
    "IDEMD_DEV",  # local development only: loopback listeners, a dev tenant
    # `idemd ops`, a client of a running server: where it calls and as whom, not the
    # server's settings.
    "IDEMD_ADDR", "IDEMD_TOKEN", "IDEMD_CA_CERT", "IDEMD_CLIENT_CERT", "IDEMD_CLIENT_KEY",
    "IDEMD_TIMEOUT",
}


def binary_settings() -> dict[str, str | None]:
    """IDEMD_* variables of src/config.rs -> their default (None when there is none)."""
    source = (REPO_ROOT / "src" / "config.rs").read_text()
    settings = {}
    for attribute in re.findall(r"#\[arg\((.*?)\)\]", source, re.DOTALL):
        env = re.search(r'env = "(IDEMD_[A-Z0-9_]+)"', attribute)
        if not env:
            continue
        default = re.search(r'default_value(?:_t)? = ("[^"]*"|[^,]+?)\s*(?:,|$)', attribute)
        settings[env.group(1)] = default.group(1).strip('"') if default else None
    assert settings, "no IDEMD_* setting found in src/config.rs"
    return settings


def test_every_setting_of_the_binary_is_a_value(full_render):
    variants = [full_render, render({**POSTGRES, "migrations.job.enabled": False}), render(),
                render({**POSTGRES, **PLAINTEXT})]
    rendered = set().union(*(_rendered_env_names(r) for r in variants))
    rendered = {name for name in rendered if name.startswith("IDEMD_")}
    missing = set(binary_settings()) - rendered - UNMAPPED_SETTINGS
    assert not missing, f"src/config.rs reads {sorted(missing)}: add chart values for them"
    unknown = rendered - set(binary_settings())
    assert not unknown, f"the chart sets {sorted(unknown)}, which src/config.rs does not read"


def test_documented_server_defaults_match_the_binary(chart_values):
    """values.yaml comments say "(IDEMD_X; server default Y)"; Y must be config.rs' default."""
    text = (CHART / "values.yaml").read_text()
    comments = " ".join(line.strip().lstrip("#").strip() for line in text.splitlines()
                        if line.strip().startswith("#"))
    documented = re.findall(r"\((IDEMD_[A-Z0-9_]+); server default ([^)]+)\)", comments)
    assert len(documented) >= 10, documented
    defaults = binary_settings()
    for env, default in documented:
        actual = defaults.get(env)
        assert actual is not None, f"{env} has no default in src/config.rs"
        if re.fullmatch(r"[0-9 *]+", actual):
            actual = str(eval(actual))  # e.g. 1024 * 1024
        assert default.strip() == actual, f"{env}: values.yaml says {default}, src/config.rs {actual}"


@pytest.mark.parametrize("duration", ["500ms", "30s", "5m", "1h30m", "1h 30m", "30days", "2w", "5 minutes"])
def test_bounds_accept_the_servers_duration_syntax(duration):
    assert config_data(render({"config.bounds.maxWait": duration}))["IDEMD_MAX_WAIT"] == duration


def test_otel_settings(default_render, full_render, all_features_values):
    assert not [key for key in config_data(default_render) if key.startswith("OTEL_")]
    data = config_data(full_render)
    otel = all_features_values["otel"]
    assert data["OTEL_EXPORTER_OTLP_ENDPOINT"] == otel["endpoint"]
    assert data["OTEL_SERVICE_NAME"] == otel["serviceName"]
    assert data["OTEL_TRACES_SAMPLER"] == otel["sampler"]
    assert data["OTEL_TRACES_SAMPLER_ARG"] == otel["samplerArg"]
    env = env_map(server(full_render))
    attributes = env["OTEL_RESOURCE_ATTRIBUTES"]["value"]
    assert "k8s.pod.name=$(POD_NAME)" in attributes
    assert "deployment.environment=production" in attributes
    names = [entry["name"] for entry in server(full_render)["env"]]
    assert names.index("POD_NAME") < names.index("OTEL_RESOURCE_ATTRIBUTES")


# --- scaling and disruption -----------------------------------------------------


def test_hpa_owns_the_replica_count(full_render, all_features_values):
    assert "replicas" not in deployment(full_render)["spec"]
    hpa = full_render.one("HorizontalPodAutoscaler", fullname())
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": fullname()}
    assert hpa["spec"]["minReplicas"] == all_features_values["autoscaling"]["minReplicas"]
    assert hpa["spec"]["maxReplicas"] == all_features_values["autoscaling"]["maxReplicas"]


def test_hpa_min_above_max_is_refused():
    error = render_error({**POSTGRES, "autoscaling.enabled": True, "autoscaling.minReplicas": 5,
                          "autoscaling.maxReplicas": 2})
    assert "minReplicas" in error


def test_pdb_selects_the_server_pods(postgres_render, full_render):
    for r in (postgres_render, full_render):
        pdb = r.one("PodDisruptionBudget", fullname())
        assert pdb["spec"]["selector"]["matchLabels"] == deployment(r)["spec"]["selector"]["matchLabels"]
        assert ("minAvailable" in pdb["spec"]) != ("maxUnavailable" in pdb["spec"])


# --- network policy -------------------------------------------------------------


def test_network_policy_limits_ingress_and_egress(full_render, all_features_values):
    policy = full_render.one("NetworkPolicy", fullname())
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert matches(policy["spec"]["podSelector"]["matchLabels"],
                   deployment(full_render)["spec"]["template"]["metadata"]["labels"])
    ctr = server(full_render)
    ingress = {rule["ports"][0]["port"]: rule for rule in policy["spec"]["ingress"]}
    grpc_rule = ingress[container_port(ctr, "grpc")]
    assert grpc_rule["from"] == all_features_values["networkPolicy"]["ingress"]["grpcFrom"]
    assert container_port(ctr, "metrics") in ingress
    egress = policy["spec"]["egress"]
    ports = {port["port"] for rule in egress for port in rule.get("ports", [])}
    assert {53, 5432, 4317} <= ports
    cidrs = {peer["ipBlock"]["cidr"] for rule in egress for peer in rule.get("to", []) if "ipBlock" in peer}
    assert set(all_features_values["networkPolicy"]["egress"]["database"]["cidrs"]) <= cidrs


def test_network_policy_without_a_database_destination_is_refused():
    error = render_error({**POSTGRES, "networkPolicy.enabled": True})
    assert "networkPolicy.egress.database" in error


# --- monitoring -----------------------------------------------------------------


def test_service_monitor_scrapes_the_metrics_port_of_one_service(full_render):
    monitor = full_render.one("ServiceMonitor", fullname())
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert NAMESPACE in monitor["spec"]["namespaceSelector"]["matchNames"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    selected = [s for s in full_render.all("Service") if matches(selector, s["metadata"]["labels"])]
    assert [s["metadata"]["name"] for s in selected] == [fullname()], "exactly the main Service"
    port_names = {port["name"] for port in selected[0]["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"
        assert PROM_DURATION.match(endpoint["interval"])
        assert duration_seconds(endpoint["scrapeTimeout"]) <= duration_seconds(endpoint["interval"])


def test_monitoring_resources_are_opt_in(postgres_render):
    assert postgres_render.all("ServiceMonitor") == []
    assert postgres_render.all("PrometheusRule") == []


def _rules(r: Render) -> list[dict]:
    rule = r.one("PrometheusRule", fullname())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    groups = rule["spec"]["groups"]
    assert groups and all(group["name"] and group["rules"] for group in groups)
    return [entry for group in groups for entry in group["rules"]]


def test_prometheus_rules_are_complete_alerts(full_render):
    rules = _rules(full_render)
    assert len({rule["alert"] for rule in rules}) == len(rules)
    for rule in rules:
        assert rule["alert"] and rule["expr"], rule
        assert PROM_DURATION.match(rule["for"]), rule
        assert rule["labels"]["severity"], rule
        assert rule["annotations"]["summary"], rule
        assert rule["annotations"]["runbook_url"].startswith("https://"), rule
        assert rule["expr"].count("(") == rule["expr"].count(")"), rule["expr"]
        assert rule["expr"].count("{") == rule["expr"].count("}"), rule["expr"]


def test_prometheus_rules_cover_idemd_metrics(full_render):
    exprs = " ".join(rule["expr"] for rule in _rules(full_render))
    for needle in ("idemd_unresolved_operations", 'outcome="conflict"', "idemd_claims_total",
                   "idemd_stale_writes_refused_total", "idemd_sweep_backlog",
                   "idemd_suspected_new_key_retries_total"):
        assert needle in exprs, needle
    # Series are scoped to this release, so two releases do not alert for each other.
    assert f'namespace="{NAMESPACE}"' in exprs


def test_prometheus_rule_thresholds_are_values():
    values = {"metrics.prometheusRule.enabled": True,
              "metrics.prometheusRule.rules.unresolvedHigh.threshold": 4321,
              "metrics.prometheusRule.rules.conflictRate.threshold": 0.75,
              "metrics.prometheusRule.rules.newKeyRetryRate.window": "15m",
              "metrics.prometheusRule.rules.sweepBacklog.for": "2h",
              "metrics.prometheusRule.rules.staleWriteRate.enabled": False}
    rules = {rule["alert"]: rule for rule in _rules(render({**POSTGRES, **values}))}
    assert rules["IdemdUnresolvedOperationsHigh"]["expr"].endswith("> 4321")
    assert rules["IdemdPayloadConflicts"]["expr"].endswith("> 0.75")
    assert "[15m]" in rules["IdemdSuspectedNewKeyRetries"]["expr"]
    assert rules["IdemdSweepBacklog"]["for"] == "2h"
    assert "IdemdStaleWritesRefused" not in rules


# --- variants, validated against the Kubernetes schemas -----------------------------

VARIANTS = {
    "postgres-defaults": POSTGRES,
    "postgres-no-job-no-sa": {**POSTGRES, "migrations.job.enabled": False,
                              "serviceAccount.create": False, "serviceAccount.name": "idemd"},
    "embedded-networkpolicy": {"networkPolicy.enabled": True},
    "embedded-no-persistence": {"persistence.enabled": False},
    "embedded-storage-class-none": {"persistence.storageClass": "-",
                                    "persistence.accessModes": ["ReadWriteOncePod"]},
    "embedded-tls": {"tls.enabled": True, "tls.existingSecret": "idemd-tls"},
    "postgres-pdb-percent-memory-hpa": {**POSTGRES, "podDisruptionBudget.maxUnavailable": "50%",
                                        "autoscaling.enabled": True,
                                        "autoscaling.targetCPUUtilizationPercentage": None,
                                        "autoscaling.targetMemoryUtilizationPercentage": 75},
    "postgres-ipv6-prestop": {**POSTGRES, "config.bindAddress": "[::]",
                              "lifecycle.preStopSleepSeconds": 3},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_are_valid_kubernetes(name):
    for doc in render(VARIANTS[name]).docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_storage_class_dash_means_no_class():
    claim = render({"persistence.storageClass": "-"}).one("PersistentVolumeClaim")
    assert claim["spec"]["storageClassName"] == ""
    assert "storageClassName" not in render().one("PersistentVolumeClaim")["spec"]


def test_ipv6_bind_address():
    assert config_data(render({**POSTGRES, "config.bindAddress": "[::]"}))["IDEMD_LISTEN"] == "[::]:50051"


# --- NOTES ----------------------------------------------------------------------


def test_notes_explain_access_and_tenant_creation():
    text = notes(POSTGRES)
    assert f"port-forward svc/{fullname()}" in text
    assert "grpcurl -cacert" in text
    assert f'Secret "{fullname()}-tls"' in text
    plaintext = notes({**POSTGRES, **PLAINTEXT})
    assert "grpcurl -plaintext" in plaintext
    assert "only behind a mesh" in plaintext
    assert f"exec deploy/{fullname()} -c idemd -- /idemd tenant create NAME" in text
    assert "DATABASE_URL" in text


# --- the web console ---------------------------------------------------------------

CONSOLE = {"console.enabled": True}
CONSOLE_TLS = {**CONSOLE, "console.tls.enabled": True}
CONSOLE_SERVICE = f"{fullname()}-console"


def console_rules(r: Render, port: int) -> list[dict]:
    policy = r.one("NetworkPolicy", fullname())
    return [rule for rule in policy["spec"]["ingress"]
            if any(p["port"] == port for p in rule["ports"])]


def test_the_console_is_off_by_default(default_render, full_render):
    assert "IDEMD_CONSOLE_LISTEN" not in config_data(default_render)
    assert not {"IDEMD_CONSOLE_TLS_CERT", "IDEMD_CONSOLE_TLS_KEY"} & set(env_map(server(default_render)))
    assert "console" not in {port["name"] for port in server(default_render)["ports"]}
    assert default_render.maybe("Service", CONSOLE_SERVICE) is None
    # Never a port of the API's Service, even when the console has its own.
    for r in (default_render, full_render):
        assert {port["name"] for port in r.one("Service", fullname())["spec"]["ports"]} <= {
            "grpc", "metrics"}


def test_without_tls_the_console_stays_on_the_pods_loopback():
    r = render({**POSTGRES, **CONSOLE, "networkPolicy.enabled": True,
                "networkPolicy.egress.database.cidrs": ["10.0.0.0/8"]})
    assert config_data(r)["IDEMD_CONSOLE_LISTEN"] == "127.0.0.1:8080"
    assert not {"IDEMD_CONSOLE_TLS_CERT", "IDEMD_CONSOLE_TLS_KEY"} & set(env_map(server(r)))
    assert "console" not in {port["name"] for port in server(r)["ports"]}
    assert r.maybe("Service", CONSOLE_SERVICE) is None
    assert console_rules(r, 8080) == []
    text = notes({**POSTGRES, **CONSOLE})
    assert "port-forward pod/POD 8080" in text
    assert "http://localhost:8080" in text


def test_console_tls_serves_https_on_the_pods_address_with_the_apis_certificate():
    r = render({**POSTGRES, **CONSOLE_TLS})
    assert config_data(r)["IDEMD_CONSOLE_LISTEN"] == "0.0.0.0:8080"
    ctr = server(r)
    env = env_map(ctr)
    # The API's Secret, already mounted: the same files, read again by the same reload.
    assert env["IDEMD_CONSOLE_TLS_CERT"]["value"] == env["IDEMD_TLS_CERT"]["value"]
    assert env["IDEMD_CONSOLE_TLS_KEY"]["value"] == env["IDEMD_TLS_KEY"]["value"]
    assert container_port(ctr, "console") == 8080
    assert "console-tls" not in {volume["name"] for volume in pod_spec(deployment(r))["volumes"]}
    # Reachable beyond the pod only through a Service asked for.
    assert r.maybe("Service", CONSOLE_SERVICE) is None
    assert "HTTPS on port 8080" in notes({**POSTGRES, **CONSOLE_TLS})


def test_console_tls_from_its_own_secret_even_with_a_plaintext_api():
    r = render({**POSTGRES, **PLAINTEXT, **CONSOLE_TLS, "console.tls.existingSecret": "console-cert"})
    ctr = server(r)
    env = env_map(ctr)
    volumes = {volume["name"]: volume for volume in pod_spec(deployment(r))["volumes"]}
    assert volumes["console-tls"]["secret"]["secretName"] == "console-cert"
    assert {item["path"] for item in volumes["console-tls"]["secret"]["items"]} == {
        "tls.crt", "tls.key"}
    mount = next(m for m in ctr["volumeMounts"] if m["name"] == "console-tls")
    assert mount["readOnly"] is True
    assert env["IDEMD_CONSOLE_TLS_CERT"]["value"] == f"{mount['mountPath']}/tls.crt"
    assert env["IDEMD_CONSOLE_TLS_KEY"]["value"] == f"{mount['mountPath']}/tls.key"
    assert "IDEMD_TLS_CERT" not in env


def test_the_console_service_is_https_with_session_affinity(full_render, all_features_values):
    console = all_features_values["console"]
    service = full_render.one("Service", CONSOLE_SERVICE)
    spec = service["spec"]
    assert spec["sessionAffinity"] == "ClientIP"
    assert spec["ports"] == [{"name": "console", "port": console["service"]["port"],
                              "targetPort": "console", "protocol": "TCP",
                              "appProtocol": "https"}]
    assert container_port(server(full_render), "console") == console["port"]
    assert matches(spec["selector"], deployment(full_render)["spec"]["template"]["metadata"]["labels"])
    rules = console_rules(full_render, console["port"])
    assert len(rules) == 1
    assert rules[0]["from"] == all_features_values["networkPolicy"]["ingress"]["consoleFrom"]
    assert config_data(full_render)["IDEMD_CONSOLE_LISTEN"] == f"0.0.0.0:{console['port']}"


def test_the_console_services_names_join_the_charts_certificate():
    issuer = {**POSTGRES, **CONSOLE_TLS, "tls.certManager.issuerRef.name": "internal-ca"}
    with_service = render({**issuer, "console.service.enabled": True}).one("Certificate")
    without = render(issuer).one("Certificate")
    name = f"{CONSOLE_SERVICE}.{NAMESPACE}.svc"
    assert name in with_service["spec"]["dnsNames"]
    assert name not in without["spec"]["dnsNames"]
    assert f"{fullname()}.{NAMESPACE}.svc" in with_service["spec"]["dnsNames"]


@pytest.mark.parametrize("values, says", [
    ({"console.service.enabled": True}, "console.service.enabled needs console.enabled and console.tls.enabled"),
    ({**CONSOLE, "console.service.enabled": True}, "over HTTPS only"),
    ({"console.tls.enabled": True}, "console.tls.enabled needs console.enabled"),
    ({**POSTGRES, **PLAINTEXT, **CONSOLE_TLS}, "console.tls.enabled needs a certificate"),
    ({**CONSOLE, "console.port": 50051}, "console.port must differ"),
    ({**CONSOLE_TLS, "console.port": 9464}, "console.port must differ"),
], ids=["service-without-console", "service-without-tls", "tls-without-console",
        "no-certificate", "grpc-port", "metrics-port"])
def test_the_console_leaves_loopback_only_over_https(values, says):
    assert says in render_error(values)
