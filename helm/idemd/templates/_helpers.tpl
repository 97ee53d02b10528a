{{/*
Chart name, truncated to the 63 characters a DNS label allows.
*/}}
{{- define "idemd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name used as the prefix of every resource: RELEASE-CHART, or RELEASE when the
release name already contains the chart name. Suffixed names (-migrate, -headless) are
built from a 52-character prefix so they stay within 63 characters.
*/}}
{{- define "idemd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "idemd.migrateName" -}}
{{- printf "%s-migrate" (include "idemd.fullname" .) }}
{{- end }}

{{- define "idemd.tenantsName" -}}
{{- printf "%s-tenants" (include "idemd.fullname" .) }}
{{- end }}

{{- define "idemd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every resource.
*/}}
{{- define "idemd.labels" -}}
helm.sh/chart: {{ include "idemd.chart" . }}
{{ include "idemd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: idemd
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels that identify this release's resources; immutable once a Deployment exists.
*/}}
{{- define "idemd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idemd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector of the server pods. The component label keeps the migration Job's pods out of
the Services, the PodDisruptionBudget and the NetworkPolicy meant for the servers.
*/}}
{{- define "idemd.serverSelectorLabels" -}}
{{ include "idemd.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "idemd.migrateSelectorLabels" -}}
{{ include "idemd.selectorLabels" . }}
app.kubernetes.io/component: migrate
{{- end }}

{{- define "idemd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "idemd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "idemd.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
True (non-empty) when no PostgreSQL Secret is configured: the embedded SQLite store.
*/}}
{{- define "idemd.embeddedStore" -}}
{{- if not .Values.database.existingSecret }}true{{- end }}
{{- end }}

{{/*
True (non-empty) when a hook Job runs the migrations and pods must not.
*/}}
{{- define "idemd.migrationJob" -}}
{{- if and (not (include "idemd.embeddedStore" .)) .Values.migrations.job.enabled }}true{{- end }}
{{- end }}

{{/*
Port the kubelet's gRPC probes use: the plaintext health port when the API speaks TLS.
*/}}
{{- define "idemd.probePort" -}}
{{- if .Values.tls.enabled }}{{ .Values.containerPorts.health }}{{ else }}{{ .Values.containerPorts.grpc }}{{ end }}
{{- end }}

{{/*
The kubernetes.io/tls Secret the API's key pair comes from: tls.existingSecret, or the one
the chart's cert-manager Certificate writes.
*/}}
{{- define "idemd.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "idemd.fullname" .)) .Values.tls.existingSecret }}
{{- end }}

{{/*
The console is served over HTTPS: console.enabled with console.tls.enabled.
*/}}
{{- define "idemd.consoleTls" -}}
{{- if and .Values.console.enabled .Values.console.tls.enabled }}true{{- end }}
{{- end }}

{{/*
Where the console's certificate and key are mounted: its own Secret's directory, or the
API's when it shares the API's certificate.
*/}}
{{- define "idemd.consoleTlsDir" -}}
{{- if .Values.console.tls.existingSecret }}{{ .Values.console.tls.mountPath }}{{ else }}{{ .Values.tls.mountPath }}{{ end }}
{{- end }}

{{/*
Mutual TLS is on: TLS with clientAuth.enabled.
*/}}
{{- define "idemd.clientAuth" -}}
{{- if and .Values.tls.enabled .Values.tls.clientAuth.enabled }}true{{- end }}
{{- end }}

{{- define "idemd.otelServiceName" -}}
{{- default (include "idemd.fullname" .) .Values.otel.serviceName }}
{{- end }}

{{/*
The DATABASE_URL env entry: always a reference to an existing Secret, never a literal.
*/}}
{{- define "idemd.databaseUrlEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret | quote }}
      key: {{ .Values.database.secretKey | quote }}
{{- end }}

{{/*
Pod placement shared by the server pods and the migration Job.
*/}}
{{- define "idemd.podPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
One optional ConfigMap entry, from (list ENV VALUE): nothing when VALUE is null or empty;
numbers are written as integers (never 1e+06).
*/}}
{{- define "idemd.optionalSetting" -}}
{{- $value := index . 1 }}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) }}
{{- if kindIs "string" $value }}
{{ index . 0 }}: {{ $value | quote }}
{{- else }}
{{ index . 0 }}: {{ int64 $value | toString | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Settings of the ConfigMap read by the server with envFrom. Optional settings left empty
(or null) are left out, so that the server's built-in defaults apply.
*/}}
{{- define "idemd.configData" -}}
{{- $bind := .Values.config.bindAddress -}}
{{- $config := .Values.config -}}
IDEMD_LISTEN: {{ printf "%s:%d" $bind (int .Values.containerPorts.grpc) | quote }}
{{- if .Values.metrics.enabled }}
IDEMD_METRICS_LISTEN: {{ printf "%s:%d" $bind (int .Values.containerPorts.metrics) | quote }}
{{- else }}
IDEMD_METRICS_LISTEN: "off"
{{- end }}
{{- if .Values.console.enabled }}
{{- if .Values.console.tls.enabled }}
IDEMD_CONSOLE_LISTEN: {{ printf "%s:%d" $bind (int .Values.console.port) | quote }}
{{- else }}
IDEMD_CONSOLE_LISTEN: {{ printf "127.0.0.1:%d" (int .Values.console.port) | quote }}
{{- end }}
{{- end }}
{{- if .Values.tls.enabled }}
IDEMD_HEALTH_LISTEN: {{ printf "%s:%d" $bind (int .Values.containerPorts.health) | quote }}
IDEMD_TLS_RELOAD_INTERVAL: {{ .Values.tls.reloadInterval | quote }}
{{- else }}
IDEMD_INSECURE_PLAINTEXT: {{ .Values.tls.insecurePlaintext | toString | quote }}
{{- end }}
{{- if .Values.policy.operations }}
IDEMD_POLICY_RELOAD_INTERVAL: {{ .Values.policy.reloadInterval | quote }}
{{- end }}
{{- if include "idemd.clientAuth" . }}
IDEMD_TLS_REQUIRE_CLIENT_CERT: {{ .Values.tls.clientAuth.required | toString | quote }}
{{- end }}
IDEMD_LOG_FORMAT: {{ $config.logFormat | quote }}
RUST_LOG: {{ $config.logLevel | quote }}
IDEMD_DRAIN_TIMEOUT: {{ printf "%ds" (int $config.drainTimeoutSeconds) | quote }}
IDEMD_DB_MAX_CONNECTIONS: {{ .Values.database.maxConnections | int | toString | quote }}
IDEMD_METRICS_TENANT_LABEL: {{ .Values.metrics.tenantLabel | toString | quote }}
IDEMD_PG_NOTIFY: {{ .Values.database.notify | toString | quote }}
IDEMD_SINGLE_NODE_DURABILITY_OK: {{ .Values.database.singleNodeDurabilityOk | toString | quote }}
{{- with .Values.metrics.operations }}
IDEMD_METRICS_OPERATIONS: {{ join "," . | quote }}
{{- end }}
{{- $optional := list
  (list "IDEMD_MIN_LEASE" $config.bounds.minLease)
  (list "IDEMD_MAX_LEASE" $config.bounds.maxLease)
  (list "IDEMD_DEFAULT_LEASE" $config.bounds.defaultLease)
  (list "IDEMD_DEFAULT_ATTEMPT_DURATION" $config.bounds.defaultAttemptDuration)
  (list "IDEMD_MAX_ATTEMPT_DURATION" $config.bounds.maxAttemptDuration)
  (list "IDEMD_MAX_RETRY_AFTER" $config.bounds.maxRetryAfter)
  (list "IDEMD_DEFAULT_RETENTION" $config.bounds.defaultRetention)
  (list "IDEMD_MAX_RETENTION" $config.bounds.maxRetention)
  (list "IDEMD_MAX_WAIT" $config.bounds.maxWait)
  (list "IDEMD_DEFAULT_MAX_ATTEMPTS" $config.bounds.defaultMaxAttempts)
  (list "IDEMD_MAX_RESULT_BYTES" $config.bounds.maxResultBytes)
  (list "IDEMD_MAX_PAYLOAD_BYTES" $config.bounds.maxPayloadBytes)
  (list "IDEMD_MAX_HISTORY_ENTRIES" $config.bounds.maxHistoryEntries)
  (list "IDEMD_MAX_CONCURRENT_STREAMS" $config.transport.maxConcurrentStreams)
  (list "IDEMD_HTTP2_KEEPALIVE_INTERVAL" $config.transport.http2KeepaliveInterval)
  (list "IDEMD_HTTP2_KEEPALIVE_TIMEOUT" $config.transport.http2KeepaliveTimeout)
  (list "IDEMD_REQUEST_TIMEOUT" $config.transport.requestTimeout)
  (list "IDEMD_MAX_IN_FLIGHT" $config.transport.maxInFlight)
  (list "IDEMD_MAX_IN_FLIGHT_PER_TENANT" $config.transport.maxInFlightPerTenant)
  (list "IDEMD_MAX_WAITERS" $config.transport.maxWaiters)
  (list "IDEMD_MAX_WAITERS_PER_TENANT" $config.transport.maxWaitersPerTenant)
  (list "IDEMD_MAX_CONNECTIONS" $config.transport.maxConnections)
  (list "IDEMD_HANDSHAKE_TIMEOUT" $config.transport.handshakeTimeout)
  (list "IDEMD_CONNECTION_IDLE_TIMEOUT" $config.transport.connectionIdleTimeout)
  (list "IDEMD_MAX_REQUEST_BYTES_IN_FLIGHT" $config.transport.maxRequestBytesInFlight)
  (list "IDEMD_MAX_CONNECTIONS_PER_SOURCE" $config.transport.maxConnectionsPerSource)
  (list "IDEMD_MAX_CONNECTION_AGE" $config.transport.maxConnectionAge)
  (list "IDEMD_MAX_CONNECTION_AGE_GRACE" $config.transport.maxConnectionAgeGrace)
  (list "IDEMD_AUTH_CACHE_TTL" $config.authCacheTtl)
  (list "IDEMD_AUTH_NEGATIVE_CACHE_TTL" $config.authNegativeCacheTtl)
  (list "IDEMD_AUTH_CACHE_ENTRIES" $config.authCacheEntries)
  (list "IDEMD_AUTH_LOOKUP_CONCURRENCY" $config.authLookupConcurrency)
  (list "IDEMD_AUTH_LOOKUP_QUEUE" $config.authLookupQueue)
  (list "IDEMD_AUTH_LOOKUP_QUEUE_TIMEOUT" $config.authLookupQueueTimeout)
  (list "IDEMD_RESULT_CACHE_BYTES" $config.resultCacheBytes)
  (list "IDEMD_READINESS_INTERVAL" $config.readinessInterval)
  (list "IDEMD_CLOCK_MARGIN" $config.clockMargin)
  (list "IDEMD_ANSWER_COUNT_INTERVAL" $config.answerCounts.interval)
  (list "IDEMD_ANSWER_COUNT_CAPACITY" $config.answerCounts.capacity)
  (list "IDEMD_NEW_KEY_RETRY_WINDOW" $config.newKeyRetries.window)
  (list "IDEMD_NEW_KEY_RETRY_THRESHOLD" $config.newKeyRetries.threshold)
  (list "IDEMD_SWEEP_INTERVAL" $config.sweeper.interval)
  (list "IDEMD_SWEEP_BATCH" $config.sweeper.batch)
  (list "IDEMD_TOMBSTONE_RETENTION" $config.sweeper.tombstoneRetention)
  (list "IDEMD_AUDIT_RETENTION" $config.sweeper.auditRetention)
  (list "IDEMD_DB_ACQUIRE_TIMEOUT" .Values.database.acquireTimeout)
  (list "IDEMD_DB_LOCK_TIMEOUT" .Values.database.lockTimeout)
  (list "IDEMD_DB_STATEMENT_TIMEOUT" .Values.database.statementTimeout)
  (list "IDEMD_DB_IDLE_IN_TRANSACTION_TIMEOUT" .Values.database.idleInTransactionTimeout)
  (list "IDEMD_DB_CALL_TIMEOUT" .Values.database.callTimeout)
  (list "IDEMD_DB_TCP_KEEPALIVE" .Values.database.tcpKeepalive)
  (list "IDEMD_DB_TCP_USER_TIMEOUT" .Values.database.tcpUserTimeout)
  (list "IDEMD_GAUGE_INTERVAL" .Values.metrics.gaugeInterval) }}
{{- range $optional }}
{{- include "idemd.optionalSetting" . }}
{{- end }}
{{- with .Values.otel.endpoint }}
OTEL_EXPORTER_OTLP_ENDPOINT: {{ . | quote }}
OTEL_SERVICE_NAME: {{ include "idemd.otelServiceName" $ | quote }}
{{- with $.Values.otel.sampler }}
OTEL_TRACES_SAMPLER: {{ . | quote }}
{{- end }}
{{- with $.Values.otel.samplerArg }}
OTEL_TRACES_SAMPLER_ARG: {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
OTEL_RESOURCE_ATTRIBUTES: user attributes plus the pod's identity from the downward API
(expanded by the kubelet from the POD_* env vars declared before it).
*/}}
{{- define "idemd.otelResourceAttributes" -}}
{{- $attrs := list "k8s.namespace.name=$(POD_NAMESPACE)" "k8s.pod.name=$(POD_NAME)" "k8s.node.name=$(NODE_NAME)" }}
{{- range $key := keys .Values.otel.resourceAttributes | sortAlpha }}
{{- $attrs = append $attrs (printf "%s=%v" $key (index $.Values.otel.resourceAttributes $key)) }}
{{- end }}
{{- join "," $attrs }}
{{- end }}

{{/*
Refuse configurations that would deploy something broken. Included by the Deployment.
*/}}
{{- define "idemd.validate" -}}
{{- $embedded := include "idemd.embeddedStore" . }}
{{- if and $embedded (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "\n\nidemd: the embedded SQLite store (database.existingSecret is empty) serves a single replica only, but replicaCount is %d.\nSet replicaCount: 1, or set database.existingSecret to a Secret holding a PostgreSQL URL to run several replicas." (int .Values.replicaCount)) }}
{{- end }}
{{- if and $embedded .Values.autoscaling.enabled }}
{{- fail "\n\nidemd: the embedded SQLite store (database.existingSecret is empty) serves a single replica only, so autoscaling.enabled must be false.\nSet database.existingSecret to a Secret holding a PostgreSQL URL to autoscale." }}
{{- end }}
{{- $drain := int .Values.config.drainTimeoutSeconds }}
{{- $preStop := int .Values.lifecycle.preStopSleepSeconds }}
{{- $grace := int .Values.terminationGracePeriodSeconds }}
{{- if le $grace (add $drain $preStop) }}
{{- fail (printf "\n\nidemd: terminationGracePeriodSeconds (%d) must be greater than config.drainTimeoutSeconds (%d) + lifecycle.preStopSleepSeconds (%d), or Kubernetes kills pods before they finish draining." $grace $drain $preStop) }}
{{- end }}
{{- if and (not .Values.tls.enabled) (not .Values.tls.insecurePlaintext) }}
{{- fail "\n\nidemd: tls.enabled is false, so the API would be plaintext. Keep TLS on (tls.existingSecret, or tls.certManager.issuerRef.name), or set tls.insecurePlaintext: true, only behind a mesh whose sidecar terminates mutual TLS." }}
{{- end }}
{{- if and .Values.tls.enabled .Values.tls.existingSecret .Values.tls.certManager.issuerRef.name }}
{{- fail "\n\nidemd: give tls.existingSecret or tls.certManager.issuerRef.name, not both (the Certificate writes its own Secret)." }}
{{- end }}
{{- if and (include "idemd.clientAuth" .) (not .Values.tls.clientAuth.caSecret) }}
{{- fail "\n\nidemd: tls.clientAuth.enabled requires tls.clientAuth.caSecret, a Secret holding the client CA bundle." }}
{{- end }}
{{- if and (include "idemd.clientAuth" .) (not .Values.tls.clientAuth.identities) }}
{{- fail "\n\nidemd: tls.clientAuth.enabled requires tls.clientAuth.identities, the mapping of certificate identities to tenants and scopes." }}
{{- end }}
{{- if and .Values.console.tls.enabled (not .Values.console.enabled) }}
{{- fail "\n\nidemd: console.tls.enabled needs console.enabled." }}
{{- end }}
{{- if and .Values.console.service.enabled (not (include "idemd.consoleTls" .)) }}
{{- fail "\n\nidemd: console.service.enabled needs console.enabled and console.tls.enabled: beyond the pod's loopback the console is served over HTTPS only (its session cookie must not cross a network in plain HTTP)." }}
{{- end }}
{{- if and (include "idemd.consoleTls" .) (not .Values.console.tls.existingSecret) (not .Values.tls.enabled) }}
{{- fail "\n\nidemd: console.tls.enabled needs a certificate: console.tls.existingSecret, or the API's (tls.enabled)." }}
{{- end }}
{{- $ports := .Values.containerPorts }}
{{- if .Values.console.enabled }}
{{- $console := int .Values.console.port }}
{{- if or (eq $console (int $ports.grpc)) (and .Values.metrics.enabled (eq $console (int $ports.metrics))) (and .Values.tls.enabled (eq $console (int $ports.health))) }}
{{- fail "\n\nidemd: console.port must differ from containerPorts.grpc, containerPorts.metrics and (with TLS) containerPorts.health." }}
{{- end }}
{{- end }}
{{- if or (eq (int $ports.grpc) (int $ports.metrics)) (and .Values.tls.enabled (or (eq (int $ports.health) (int $ports.grpc)) (eq (int $ports.health) (int $ports.metrics)))) }}
{{- fail "\n\nidemd: containerPorts.grpc, containerPorts.metrics and (with TLS) containerPorts.health must be distinct." }}
{{- end }}
{{- if .Values.autoscaling.enabled }}
{{- if gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas) }}
{{- fail (printf "\n\nidemd: autoscaling.minReplicas (%d) must not exceed autoscaling.maxReplicas (%d)." (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- end }}
{{- if and (kindIs "invalid" .Values.autoscaling.targetCPUUtilizationPercentage) (kindIs "invalid" .Values.autoscaling.targetMemoryUtilizationPercentage) }}
{{- fail "\n\nidemd: autoscaling.enabled needs targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage." }}
{{- end }}
{{- end }}
{{- if .Values.podDisruptionBudget.enabled }}
{{- $min := .Values.podDisruptionBudget.minAvailable }}
{{- $max := .Values.podDisruptionBudget.maxUnavailable }}
{{- if and (kindIs "invalid" $min) (kindIs "invalid" $max) }}
{{- fail "\n\nidemd: podDisruptionBudget.enabled needs minAvailable or maxUnavailable." }}
{{- end }}
{{- end }}
{{- if not .Values.metrics.enabled }}
{{- if .Values.metrics.serviceMonitor.enabled }}
{{- fail "\n\nidemd: metrics.serviceMonitor.enabled needs metrics.enabled: with metrics off there is no /metrics to scrape." }}
{{- end }}
{{- if .Values.metrics.prometheusRule.enabled }}
{{- fail "\n\nidemd: metrics.prometheusRule.enabled needs metrics.enabled: with metrics off its alerts would see no series (and IdemdTargetDown nothing to scrape)." }}
{{- end }}
{{- end }}
{{- range .Values.config.extraEnv }}
{{- if eq .name "DATABASE_URL" }}
{{- fail "\n\nidemd: DATABASE_URL must not be set in config.extraEnv; put it in a Secret and set database.existingSecret and database.secretKey." }}
{{- end }}
{{- end }}
{{- $policies := splitList "," .Values.migrations.job.hookDeletePolicy }}
{{- if not (has "before-hook-creation" $policies) }}
{{- fail "\n\nidemd: migrations.job.hookDeletePolicy must include before-hook-creation, or the next upgrade collides with the previous migration Job." }}
{{- end }}
{{- range $policies }}
{{- if not (has . (list "before-hook-creation" "hook-succeeded" "hook-failed")) }}
{{- fail (printf "\n\nidemd: unknown hook delete policy %q in migrations.job.hookDeletePolicy." .) }}
{{- end }}
{{- end }}
{{- if .Values.networkPolicy.enabled }}
{{- $db := .Values.networkPolicy.egress.database }}
{{- if and (not $embedded) (not $db.cidrs) (not $db.to) }}
{{- fail "\n\nidemd: networkPolicy.enabled denies all egress but the listed peers: set networkPolicy.egress.database.cidrs (or .to) so idemd and its migration Job can reach PostgreSQL." }}
{{- end }}
{{- $otlp := .Values.networkPolicy.egress.otlp }}
{{- if and .Values.otel.endpoint (not $otlp.cidrs) (not $otlp.to) }}
{{- fail "\n\nidemd: networkPolicy.enabled denies all egress but the listed peers: set networkPolicy.egress.otlp.cidrs (or .to) so idemd can reach otel.endpoint." }}
{{- end }}
{{- end }}
{{- end }}

{{/*
An egress rule to a set of CIDRs and peers on one TCP port. Call with
(dict "cidrs" LIST "to" LIST "port" INT).
*/}}
{{- define "idemd.egressRule" -}}
- to:
    {{- range .cidrs }}
    - ipBlock:
        cidr: {{ . | quote }}
    {{- end }}
    {{- with .to }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - protocol: TCP
      port: {{ .port }}
{{- end }}

{{/*
DNS egress rule, shared by the server and the migration Job policies.
*/}}
{{- define "idemd.dnsEgressRule" -}}
{{- if .Values.networkPolicy.egress.dns.enabled }}
- ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
  {{- with .Values.networkPolicy.egress.dns.to }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
Annotations of the migration hook resources. Hooks run before the release's normal
resources exist, so everything the Job needs is a hook too, with a lower weight.
Call with (list $ WEIGHT).
*/}}
{{- define "idemd.migrationHookAnnotations" -}}
{{- $root := index . 0 -}}
helm.sh/hook: pre-install,pre-upgrade
helm.sh/hook-weight: {{ index . 1 | quote }}
helm.sh/hook-delete-policy: {{ $root.Values.migrations.job.hookDeletePolicy }}
{{- end }}

{{- define "idemd.migrateServiceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- include "idemd.migrateName" . }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Labels and annotations of one alert. Call with (list $ RULE_VALUES ALERTNAME SUMMARY DESCRIPTION).
*/}}
{{/*
Whole seconds as an alert reads them: 7200 -> 2h, 900 -> 15m, 45 -> 45s.
*/}}
{{- define "idemd.seconds" -}}
{{- $seconds := int . -}}
{{- if and (gt $seconds 0) (eq (mod $seconds 3600) 0) -}}{{ div $seconds 3600 }}h
{{- else if and (gt $seconds 0) (eq (mod $seconds 60) 0) -}}{{ div $seconds 60 }}m
{{- else -}}{{ $seconds }}s
{{- end -}}
{{- end }}

{{- define "idemd.alertMeta" -}}
{{- $root := index . 0 }}
{{- $rule := index . 1 }}
{{- $alert := index . 2 -}}
labels:
  severity: {{ $rule.severity }}
  {{- with $root.Values.metrics.prometheusRule.alertLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  summary: {{ index . 3 | quote }}
  description: {{ index . 4 | quote }}
  {{- with $root.Values.metrics.prometheusRule.runbookBaseUrl }}
  runbook_url: {{ printf "%s/%s.md" (trimSuffix "/" .) $alert | quote }}
  {{- end }}
{{- end }}
