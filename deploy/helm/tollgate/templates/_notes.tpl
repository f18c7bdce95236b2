{{/* The release notes, printed after install and upgrade. A define, so
that the chart test can render them: `helm template` skips NOTES.txt. */}}
{{- define "tollgate.notes" -}}
{{- $full := include "tollgate.fullname" . -}}
{{- $ns := .Release.Namespace -}}
Tollgate is listening on the Service {{ $full }} (port {{ .Values.service.port }}).
The admin listener (/metrics, /admin/*, /debug/pprof, probes) is the Service
{{ $full }}-admin:{{ .Values.adminService.port }}; keep it internal.
{{- if .Values.rls.enabled }}
Envoy's rate limit service (gRPC, ShouldRateLimit) is the port "grpc" of
{{ $full }}: point Envoy's rate_limit_service cluster at
{{ $full }}.{{ $ns }}.svc:{{ .Values.rls.servicePort }} (HTTP/2).
{{- end }}
{{- with .Values.networkPolicy }}
{{- if .enabled }}
The NetworkPolicy {{ $full }} admits to the admin port only:
{{- if .prometheus.enabled }}
  - Prometheus pods labelled {{ include "tollgate.labelList" .prometheus.podLabels }}
    {{- if .prometheus.namespaceSelector }} in the namespaces of networkPolicy.prometheus.namespaceSelector{{ else }} in {{ $ns }}{{ end }}
{{- end }}
{{- if .adminFrom }}
  - the {{ len .adminFrom }} peer(s) of networkPolicy.adminFrom
{{- end }}
  - kubectl port-forward and the kubelet's probes (never filtered).
{{- end }}
{{- end }}

Reach the admin API from your machine:

  kubectl -n {{ $ns }} port-forward svc/{{ $full }}-admin {{ .Values.adminService.port }}:{{ .Values.adminService.port }} &
{{- if .Values.adminToken.enabled }}
  TOKEN=$(kubectl -n {{ $ns }} get secret {{ include "tollgate.adminTokenSecret" . }} \
    -o jsonpath='{.data.{{ include "tollgate.adminTokenKey" . }}}' | base64 -d)
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:{{ .Values.adminService.port }}/admin/config
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:{{ .Values.adminService.port }}/metrics
{{- else }}
  curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:{{ .Values.adminService.port }}/admin/config
with TOKEN the admin token your config names (adminToken is off).
{{- end }}

Behind an Ingress or a load balancer every request comes from the proxy's
address: set identity.trusted_proxies in the config to the proxies' CIDRs,
so that each client is counted by the address in X-Forwarded-For and not
all clients as one.
{{- if not .Values.redis.url }}

WARNING: no Redis (redis.url): each of the {{ .Values.replicaCount }} replicas counts on its own,
so a client spread over them gets up to {{ .Values.replicaCount }} times its limit.
{{- end }}

Edit the config value and upgrade: the pods reload the ConfigMap by themselves
{{- if not .Values.watchConfig }} (watchConfig is off: restart them){{ end }}.
{{- end -}}
