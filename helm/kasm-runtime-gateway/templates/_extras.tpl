{{/* Escape hatches (extraEnv, extraVolumes, ...) and the private CA bundle. */}}

{{/* Where the private CA bundle is mounted (extraCACerts). */}}
{{- define "krg.caDir" -}}/etc/kasm-runtime-gateway-ca{{- end }}

{{- define "krg.caVolume" -}}
{{- with .Values.extraCACerts }}
{{- if .configMap }}
- name: extra-ca-certs
  configMap:
    name: {{ .configMap }}
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- else if .secret }}
- name: extra-ca-certs
  secret:
    secretName: {{ .secret }}
    defaultMode: 0444
    items:
      - key: {{ .key }}
        path: {{ .key }}
{{- end }}
{{- end }}
{{- end }}

{{- define "krg.caEnv" -}}
{{- if or .Values.extraCACerts.configMap .Values.extraCACerts.secret }}
- name: NODE_EXTRA_CA_CERTS
  value: {{ printf "%s/%s" (include "krg.caDir" .) .Values.extraCACerts.key | quote }}
{{- end }}
{{- end }}

{{- define "krg.caVolumeMount" -}}
{{- if or .Values.extraCACerts.configMap .Values.extraCACerts.secret }}
- name: extra-ca-certs
  mountPath: {{ include "krg.caDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* Refusals for the escape hatches and the routes. */}}
{{- define "krg.validateExtras" -}}
{{- $gateway := concat (keys .Values.config) (keys .Values.secret.env) }}
{{- range .Values.extraEnv }}
{{- if has .name $gateway }}
{{- fail (printf "extraEnv: %s is a gateway variable: set config.%s or secret.env.%s, where it is validated." .name .name .name) }}
{{- end }}
{{- if and (hasSuffix "_FILE" .name) (has (trimSuffix "_FILE" .name) (splitList " " (include "krg.secretKeys" $))) }}
{{- fail (printf "extraEnv: %s: the chart already gives %s from its Secret (see secret.mountAsFiles and secret.existingSecretKeys)." .name (trimSuffix "_FILE" .name)) }}
{{- end }}
{{- if and (eq .name "NODE_EXTRA_CA_CERTS") (include "krg.caEnv" $) }}
{{- fail "extraEnv: NODE_EXTRA_CA_CERTS is set by extraCACerts; use one or the other." }}
{{- end }}
{{- end }}
{{- if and .Values.extraCACerts.configMap .Values.extraCACerts.secret }}
{{- fail "extraCACerts: set configMap or secret, not both." }}
{{- end }}
{{- if and .Values.httpRoute.enabled (not .Values.httpRoute.parentRefs) }}
{{- fail "httpRoute.parentRefs is required with httpRoute.enabled: name the Gateway (and listener) the route attaches to." }}
{{- end }}
{{- end }}
