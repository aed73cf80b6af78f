{{/* Chart name, possibly overridden. */}}
{{- define "krg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full resource name: release-chart unless the release name already holds the chart name. */}}
{{- define "krg.fullname" -}}
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

{{- define "krg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "krg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "krg.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "krg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kasm-runtime-gateway
{{- end }}

{{- define "krg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "krg.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "krg.secretName" -}}
{{- default (include "krg.fullname" .) .Values.secret.existingSecret }}
{{- end }}

{{- define "krg.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
An environment value as a string. YAML numbers reach templates as float64, and `toString` would print
8388608 as 8.388608e+06: whole numbers are printed as integers, fractions as they are.
*/}}
{{- define "krg.envValue" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) }}{{ int64 . }}{{ else }}{{ toString . }}{{ end }}
{{- end }}

{{/* A config value as a string, empty when unset. */}}
{{- define "krg.config" -}}
{{- $v := index .root.Values.config .key }}
{{- if not (kindIs "invalid" $v) }}{{ include "krg.envValue" $v }}{{ end }}
{{- end }}

{{/* More than one pod can run at once: cluster mode, which needs Redis. */}}
{{- define "krg.clustered" -}}
{{- if or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{/* The drain, the preStop sleep and a margin: Kubernetes must never kill a draining gateway. */}}
{{- define "krg.terminationGracePeriodSeconds" -}}
{{- $graceMs := int64 (include "krg.config" (dict "root" . "key" "GATEWAY_SHUTDOWN_GRACE_MS") | default "30000") }}
{{- add (div (add $graceMs 999) 1000) .Values.lifecycle.preStopSleepSeconds .Values.lifecycle.terminationMarginSeconds }}
{{- end }}

{{- define "krg.port" -}}
{{- include "krg.config" (dict "root" . "key" "PORT") | default "8080" }}
{{- end }}

{{/* Whether a sessions file is mounted. */}}
{{- define "krg.sessionsFile" -}}
{{- if .Values.secret.existingSecret }}
{{- if .Values.secret.existingSecretHasSessionsFile }}true{{ end }}
{{- else if .Values.secret.env.GATEWAY_SESSIONS_FILE }}true{{ end }}
{{- end }}

{{/* Refusals that must stop rendering, with a message that says what to set. */}}
{{- define "krg.validate" -}}
{{- if and (include "krg.clustered" .) (not .Values.secret.existingSecret) (not .Values.config.GATEWAY_REDIS_SENTINELS) (not .Values.config.GATEWAY_REDIS_CLUSTER_NODES) }}
{{- $_ := required "secret.env.REDIS_URL is required with more than one replica (replicaCount > 1 or autoscaling): replicas share sessions and events through Redis. Set it (or config.GATEWAY_REDIS_SENTINELS, or config.GATEWAY_REDIS_CLUSTER_NODES), or set replicaCount: 1." .Values.secret.env.REDIS_URL }}
{{- end }}
{{- if eq (include "krg.config" (dict "root" . "key" "GATEWAY_DEMO")) "on" }}
{{- fail "config.GATEWAY_DEMO cannot be on in a deployment: it serves a simulated session with a built-in token." }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail "autoscaling.maxReplicas must be at least autoscaling.minReplicas." }}
{{- end }}
{{- end }}
