{{/*
Chart name, truncated to the 63 characters a DNS label allows.
*/}}
{{- define "switchboard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: <release>-<chart>, or just <release> when it already contains the
chart name (release "switchboard" → "switchboard").
*/}}
{{- define "switchboard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "switchboard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels shared by every object of the release.
*/}}
{{- define "switchboard.commonLabels" -}}
helm.sh/chart: {{ include "switchboard.chart" . }}
app.kubernetes.io/name: {{ include "switchboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchboard
{{- end }}

{{/*
Gateway labels and selector labels. The component label keeps the gateway's selector from
matching the bundled Redis pods of the same release.
*/}}
{{- define "switchboard.labels" -}}
{{ include "switchboard.commonLabels" . }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{/*
Bundled Redis: name, labels, selector labels, and the URL the gateway gets as REDIS_URL.
*/}}
{{- define "switchboard.redis.fullname" -}}
{{- printf "%s-redis" (include "switchboard.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "switchboard.redis.labels" -}}
{{ include "switchboard.commonLabels" . }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "switchboard.redis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "switchboard.redis.url" -}}
{{- printf "redis://%s:%d/0" (include "switchboard.redis.fullname" .) (int .Values.redis.port) }}
{{- end }}

{{/*
Service account name.
*/}}
{{- define "switchboard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "switchboard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Image reference: repository:tag, or repository@digest when a digest is given.
*/}}
{{- define "switchboard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Name of the Secret loaded with envFrom: the existing one, or the one this chart creates.
Empty when there is none.
*/}}
{{- define "switchboard.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else if .Values.secrets.values }}
{{- include "switchboard.fullname" . }}
{{- end }}
{{- end }}

{{/*
The port the gateway listens on (config.listen.port, 8080 by default).
*/}}
{{- define "switchboard.port" -}}
{{- dig "listen" "port" 8080 .Values.config | int }}
{{- end }}

{{/*
The port of /metrics' own listener (config.metrics.listen.port), or 0 when /metrics is on
the API port.
*/}}
{{- define "switchboard.metricsPort" -}}
{{- dig "metrics" "listen" "port" 0 .Values.config | int }}
{{- end }}

{{/*
Whether the chart sets REDIS_URL ("true" or "").
*/}}
{{- define "switchboard.redisUrlProvided" -}}
{{- if or .Values.redis.enabled .Values.externalRedis.url .Values.externalRedis.existingSecret }}true{{ end }}
{{- end }}

{{/*
Checks that fail early, at `helm install`/`helm template`, instead of in a crash-looping pod.
*/}}
{{- define "switchboard.validate" -}}
{{- if and .Values.redis.enabled (or .Values.externalRedis.url .Values.externalRedis.existingSecret) }}
{{- fail "redis.enabled=true and externalRedis are both set: choose one (redis.enabled=false to use externalRedis)" }}
{{- end }}
{{- if and .Values.redis.enabled (has (dig "redis" "mode" "standalone" .Values.config) (list "cluster" "sentinel")) }}
{{- fail "config.redis.mode is cluster or sentinel, but the bundled Redis (redis.enabled=true) is one standalone server: set redis.enabled=false and list your nodes or sentinels in config.redis" }}
{{- end }}
{{- if and .Values.secrets.existingSecret .Values.secrets.values }}
{{- fail "secrets.existingSecret and secrets.values are both set: choose one" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (dig "metrics" "bearerToken" "" .Values.config) (not .Values.metrics.serviceMonitor.bearerTokenSecret.key) }}
{{- fail "config.metrics.bearerToken is set: name the Secret key that holds it in metrics.serviceMonitor.bearerTokenSecret.key, or Prometheus gets 401" }}
{{- end }}
{{- if not .Values.config.redis }}
{{- if or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) }}
{{- fail "config.redis is not set, so state is in memory: run one replica only (replicaCount=1, autoscaling.enabled=false), or configure Redis" }}
{{- end }}
{{- end }}
{{- /* Every ${VAR} in config must be provided, unless an existing Secret (whose keys the chart cannot see) is used. */}}
{{- $text := replace "$${" "" (toYaml .Values.config) }}
{{- $provided := dict }}
{{- if include "switchboard.redisUrlProvided" . }}
{{- $_ := set $provided "REDIS_URL" true }}
{{- end }}
{{- range .Values.extraEnv }}
{{- $_ := set $provided .name true }}
{{- end }}
{{- range $key, $value := .Values.secrets.values }}
{{- $_ := set $provided $key true }}
{{- end }}
{{- $missing := list }}
{{- range regexFindAll "\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}" $text -1 }}
{{- $var := trimSuffix "}" (trimPrefix "${" .) }}
{{- if not (hasKey $provided $var) }}
{{- $missing = append $missing $var }}
{{- end }}
{{- end }}
{{- $missing = uniq $missing }}
{{- if and $missing (has "REDIS_URL" $missing) }}
{{- fail "config.redis.url uses ${REDIS_URL}: set redis.enabled=true (bundled Redis), externalRedis.url or externalRedis.existingSecret" }}
{{- end }}
{{- if and $missing (not .Values.secrets.existingSecret) }}
{{- fail (printf "config references %s but nothing provides it: add it to secrets.values or extraEnv, or use secrets.existingSecret" (join ", " $missing)) }}
{{- end }}
{{- end }}

{{- /*
The part of the config that only a restart applies (src/reload/restart-keys.ts; keep the two
lists equal): the gateway reloads everything else from the mounted ConfigMap by itself
(docs/operations-reload.md), so with `configReload.rollOnChange: restartOnly` only a change
here rolls the pods. Backends with a stdio/sse transport count as restart-only (those with
`upstreamAuth` reload).
*/}}
{{- define "switchboard.restartOnlyConfig" -}}
{{- $c := .Values.config -}}
{{- $keep := dict -}}
{{- range $k := list "publicUrl" "listen" "redis" "auth" "secrets" "metrics" "allowedOrigins" "allowedHosts" "bridge" "admin" "telemetry" -}}
{{- if hasKey $c $k }}{{ $_ := set $keep $k (get $c $k) }}{{ end -}}
{{- end -}}
{{- $_ := set $keep "limits" (pick ($c.limits | default dict) "maxBodyBytes" "bodyTimeout") -}}
{{- $_ := set $keep "sessions" (pick ($c.sessions | default dict) "idleTtl") -}}
{{- $pinned := list -}}
{{- range $b := $c.backends | default list -}}
{{- if and $b.transport (ne $b.transport "streamable-http") }}{{ $pinned = append $pinned $b }}{{ end -}}
{{- end -}}
{{- $_ := set $keep "backends" $pinned -}}
{{- toYaml $keep -}}
{{- end -}}
