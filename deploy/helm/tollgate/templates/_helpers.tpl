{{/* The chart's name. */}}
{{- define "tollgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name. */}}
{{- define "tollgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "tollgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tollgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels that select the gateway's pods. */}}
{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tollgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The service account's name. */}}
{{- define "tollgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tollgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret mounted under /etc/tollgate/secrets, if any. */}}
{{- define "tollgate.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else if .Values.secrets.create -}}
{{- include "tollgate.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the admin API's bearer token: the one named by
adminToken.existingSecret, or the one the chart makes. */}}
{{- define "tollgate.adminTokenSecret" -}}
{{- .Values.adminToken.existingSecret | default (printf "%s-admin-token" (include "tollgate.fullname" .)) -}}
{{- end -}}

{{/* The key of that Secret holding the token. */}}
{{- define "tollgate.adminTokenKey" -}}
{{- if .Values.adminToken.existingSecret -}}
{{- required "adminToken.existingSecretKey: name the key of adminToken.existingSecret that holds the token" .Values.adminToken.existingSecretKey -}}
{{- else -}}
token
{{- end -}}
{{- end -}}

{{/* Where the pod reads the admin token: admin.token_file. */}}
{{- define "tollgate.adminTokenFile" -}}
/etc/tollgate/admin-token/token
{{- end -}}

{{/* The fewest replicas the gateway runs with: autoscaling.minReplicas
under the HorizontalPodAutoscaler, replicaCount otherwise. */}}
{{- define "tollgate.minReplicas" -}}
{{- if .Values.autoscaling.enabled -}}
{{- .Values.autoscaling.minReplicas | int -}}
{{- else -}}
{{- .Values.replicaCount | int -}}
{{- end -}}
{{- end -}}

{{/* A label map as k=v,k=v, sorted. */}}
{{- define "tollgate.labelList" -}}
{{- $out := list -}}
{{- range $k, $v := . -}}
{{- $out = append $out (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
