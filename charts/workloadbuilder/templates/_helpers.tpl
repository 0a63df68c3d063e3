{{/* The prefix of every object's name. */}}
{{- define "wb.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "wb.scheduler.name" -}}{{ include "wb.fullname" . }}-scheduler{{- end -}}
{{- define "wb.integrations.name" -}}{{ include "wb.fullname" . }}-integrations{{- end -}}

{{/* The image of every component. */}}
{{- define "wb.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Labels of every object (component: scheduler or integrations). */}}
{{- define "wb.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: workloadbuilder
app.kubernetes.io/version: {{ .root.Values.image.tag | default .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The pod selector of a component. */}}
{{- define "wb.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* The scheduler's first profile's schedulerName (its Lease's default name). */}}
{{- define "wb.scheduler.schedulerName" -}}
{{- $profiles := .Values.scheduler.config.profiles | default list -}}
{{- if not $profiles -}}
{{- fail "scheduler.config.profiles: at least one profile (with a schedulerName) is needed" -}}
{{- end -}}
{{- (index $profiles 0).schedulerName | required "scheduler.config.profiles[0].schedulerName is required" -}}
{{- end -}}

{{- define "wb.scheduler.leaseName" -}}
{{- .Values.scheduler.leaderElection.leaseName | default (include "wb.scheduler.schedulerName" .) -}}
{{- end -}}

{{- define "wb.integrations.tlsSecret" -}}
{{- .Values.integrations.webhook.certificate.secretName | default (printf "%s-tls" (include "wb.integrations.name" .)) -}}
{{- end -}}

{{/* The webhook certificate's source, checked. */}}
{{- define "wb.integrations.certSource" -}}
{{- $s := .Values.integrations.webhook.certificate.source -}}
{{- if not (has $s (list "secret" "selfSigned")) -}}
{{- fail (printf "integrations.webhook.certificate.source: %q is not one of secret, selfSigned" $s) -}}
{{- end -}}
{{- $s -}}
{{- end -}}

{{/* The restricted pod and container security settings every component runs with. */}}
{{- define "wb.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "wb.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
