{{/*
How secret variables reach the gateway: as files of a read-only Secret volume named by `<NAME>_FILE`
(`secret.mountAsFiles`, the default), or as environment variables from the Secret.
*/}}

{{/* The keys the chart generates when left empty: the rule secret.yaml applies (it keeps them across upgrades). */}}
{{- define "krg.generatedSecretKeys" -}}
GATEWAY_COOKIE_SECRET GATEWAY_ENCRYPTION_KEY{{ if not .Values.config.GATEWAY_JWKS_URL }} GATEWAY_JWT_SECRET{{ end }}
{{- end }}

{{/* Whether Redis comes from Sentinel (REDIS_URL then optional). */}}
{{- define "krg.sentinel" -}}
{{- if include "krg.config" (dict "root" . "key" "GATEWAY_REDIS_SENTINELS") }}true{{ end }}
{{- end }}

{{/*
Space-separated keys of the Secret that reach the gateway (the sessions file is mounted apart):
- the chart's Secret: every key it holds (a value, or generated);
- an existing Secret as files: `secret.existingSecretKeys`, or the keys the configuration requires;
- an existing Secret as environment: every secret variable, each optional (REDIS_URL aside, see krg.secretEnv).
*/}}
{{- define "krg.secretKeys" -}}
{{- $keys := list }}
{{- $generated := splitList " " (include "krg.generatedSecretKeys" .) }}
{{- if not .Values.secret.existingSecret }}
{{- range $key := keys .Values.secret.env | sortAlpha }}
{{- if and (ne $key "GATEWAY_SESSIONS_FILE") (or (index $.Values.secret.env $key) (has $key $generated)) }}
{{- $keys = append $keys $key }}
{{- end }}
{{- end }}
{{- else if not .Values.secret.mountAsFiles }}
{{- $keys = without (keys .Values.secret.env | sortAlpha) "GATEWAY_SESSIONS_FILE" }}
{{- else if .Values.secret.existingSecretKeys }}
{{- $keys = .Values.secret.existingSecretKeys }}
{{- else }}
{{- $keys = list "GATEWAY_COOKIE_SECRET" }}
{{- if not .Values.config.GATEWAY_JWKS_URL }}{{ $keys = append $keys "GATEWAY_JWT_SECRET" }}{{ end }}
{{- if include "krg.clustered" . }}
{{- $keys = append $keys "GATEWAY_ENCRYPTION_KEY" }}
{{- if not (include "krg.sentinel" .) }}{{ $keys = append $keys "REDIS_URL" }}{{ end }}
{{- end }}
{{- end }}
{{- join " " $keys }}
{{- end }}

{{/* The container's `env` entries for the secret variables. */}}
{{- define "krg.secretEnv" -}}
{{- $required := and (include "krg.clustered" .) (not (include "krg.sentinel" .)) }}
{{- range $key := splitList " " (include "krg.secretKeys" .) | compact }}
{{- if $.Values.secret.mountAsFiles }}
- name: {{ $key }}_FILE
  value: {{ printf "%s/%s" $.Values.secret.mountPath $key | quote }}
{{- else }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef:
      name: {{ include "krg.secretName" $ }}
      key: {{ $key }}
      {{- /* Replicas without Redis would each hold their own sessions: refuse to start instead. */}}
      optional: {{ not (and (eq $key "REDIS_URL") $required) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The volume of the secret files (with secret.mountAsFiles). */}}
{{- define "krg.secretVolume" -}}
{{- $keys := splitList " " (include "krg.secretKeys" .) | compact }}
{{- if and .Values.secret.mountAsFiles $keys }}
- name: secrets
  secret:
    secretName: {{ include "krg.secretName" . }}
    defaultMode: 0440
    items:
      {{- range $keys }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
{{- end }}
{{- end }}

{{- define "krg.secretVolumeMount" -}}
{{- if and .Values.secret.mountAsFiles (include "krg.secretKeys" .) }}
- name: secrets
  mountPath: {{ .Values.secret.mountPath }}
  readOnly: true
{{- end }}
{{- end }}
