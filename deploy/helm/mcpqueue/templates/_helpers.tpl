{{/*
Names, labels and the naming contract of the queues (one package owns it in
Go: the lead's issue #14; this chart follows it, and deploy/helm/test checks
the chart against an independent Go implementation of it).
*/}}

{{- define "mcpqueue.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mcpqueue.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels; call with (dict "root" $ "component" "api" "pool" "") */}}
{{- define "mcpqueue.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- with .pool }}
mcpqueue.dev/pool: {{ . }}
{{- end }}
{{- end -}}

{{- define "mcpqueue.secretName" -}}
{{- default (include "mcpqueue.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{- define "mcpqueue.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/*
mcpqueue.toolToken: the token of tool name t in consumer names. t itself when
it only has [A-Za-z0-9_-]; otherwise t with every other character (code
point) replaced by "_", then "_" and the first 8 hex digits of sha256(t), so
two names that map to the same characters still get different tokens.
  build_report → build_report;  pdf.render → pdf_render_<8 hex of sha256("pdf.render")>
*/}}
{{- define "mcpqueue.toolToken" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . -}}
{{- . -}}
{{- else -}}
{{- printf "%s_%s" (regexReplaceAll "[^A-Za-z0-9_-]" . "_") (sha256sum . | trunc 8) -}}
{{- end -}}
{{- end -}}

{{/* The job stream: the prefix upper-cased, then _JOBS (MCPQ_JOBS). */}}
{{- define "mcpqueue.stream" -}}
{{- printf "%s_JOBS" (upper .Values.prefix) -}}
{{- end -}}

{{/* Tool t's durable pull consumer; call with (dict "tool" t). */}}
{{- define "mcpqueue.consumer" -}}
{{- printf "tool_%s" (include "mcpqueue.toolToken" .tool) -}}
{{- end -}}

{{/* Tool t's Asynq queue and its pending list; call with (dict "root" $ "tool" t). */}}
{{- define "mcpqueue.asynqQueue" -}}
{{- printf "%s.tool.%s" .root.Values.prefix .tool -}}
{{- end -}}
{{- define "mcpqueue.asynqPending" -}}
{{- printf "asynq:{%s}:pending" (include "mcpqueue.asynqQueue" .) -}}
{{- end -}}

{{/* Seconds of a Go duration string ("25s", "2m", "1m30s", "500ms"), rounded up. */}}
{{- define "mcpqueue.seconds" -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ms|s|m|h)" . -1 -}}
{{- $n := float64 (regexFind "^[0-9.]+" .) -}}
{{- $u := regexFind "(ms|s|m|h)$" . -}}
{{- $mul := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total = addf $total (mulf $n (get $mul $u)) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}

{{/* The settings api and workers share, as env entries. */}}
{{- define "mcpqueue.commonEnv" -}}
- name: MCPQ_BROKER
  value: {{ .Values.broker | quote }}
- name: MCPQ_PREFIX
  value: {{ .Values.prefix | quote }}
{{- if eq .Values.broker "nats" }}
- name: NATS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "mcpqueue.secretName" . }}
      key: {{ .Values.secret.keys.natsURL }}
- name: MCPQ_NATS_STORAGE
  value: {{ .Values.nats.storage | quote }}
- name: MCPQ_NATS_REPLICAS
  value: {{ .Values.nats.replicas | quote }}
{{- else }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "mcpqueue.secretName" . }}
      key: {{ .Values.secret.keys.redisURL }}
{{- end }}
- name: MCPQ_MAX_ATTEMPTS
  value: {{ .Values.maxAttempts | quote }}
{{- if .Values.requireDurable }}
- name: MCPQ_REQUIRE_DURABLE
  value: "1"
{{- end }}
- name: MCPQ_LOG_LEVEL
  value: {{ .Values.log.level | quote }}
{{- if .Values.log.json }}
- name: MCPQ_LOG_JSON
  value: "1"
{{- end }}
{{- end -}}

{{/* env entries from a name: value map */}}
{{- define "mcpqueue.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/* Checks every template runs first: settings that cannot work fail the render. */}}
{{- define "mcpqueue.validate" -}}
{{- if not (has .Values.broker (list "nats" "asynq")) -}}
{{- fail (printf "broker must be nats or asynq, not %q" .Values.broker) -}}
{{- end -}}
{{- if not (regexMatch "^[A-Za-z0-9_-]+$" .Values.prefix) -}}
{{- fail (printf "prefix %q: only letters, digits, _ and - (it names streams, buckets and subjects)" .Values.prefix) -}}
{{- end -}}
{{- $api := .Values.api -}}
{{- if le (int $api.terminationGracePeriodSeconds) (add (include "mcpqueue.seconds" $api.shutdownDelay) (include "mcpqueue.seconds" $api.shutdownTimeout) | int) -}}
{{- fail (printf "api.terminationGracePeriodSeconds (%v) must exceed api.shutdownDelay (%s) + api.shutdownTimeout (%s), or the kubelet kills requests still draining" $api.terminationGracePeriodSeconds $api.shutdownDelay $api.shutdownTimeout) -}}
{{- end -}}
{{- $names := list -}}
{{- range .Values.pools -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?$" (toString .name)) -}}
{{- fail (printf "pools: name %q must be a DNS label of at most 30 characters" (toString .name)) -}}
{{- end -}}
{{- if has .name $names -}}
{{- fail (printf "pools: name %q appears twice" .name) -}}
{{- end -}}
{{- $names = append $names .name -}}
{{- range .tools -}}
{{- if eq (toString .) "" -}}
{{- fail "pools: a tool name is empty" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
mcpqueue.pools: the pools with the worker defaults and the autoscaling
defaults filled in (a pool's keys win, one level deep: a pool's resources
replace the default resources whole), as JSON {"pools": [...]}.
*/}}
{{- define "mcpqueue.pools" -}}
{{- $out := list -}}
{{- range .Values.pools -}}
{{- $p := deepCopy $.Values.worker -}}
{{- range $k, $v := . -}}
{{- $_ := set $p $k $v -}}
{{- end -}}
{{- $as := deepCopy $.Values.autoscaling -}}
{{- range $k, $v := (default dict .autoscaling) -}}
{{- $_ := set $as $k $v -}}
{{- end -}}
{{- $_ := set $p "autoscaling" $as -}}
{{- $_ := set $p "tools" (default list .tools) -}}
{{- $_ := set $p "deployment" (printf "%s-worker-%s" (include "mcpqueue.fullname" $) .name) -}}
{{- $out = append $out $p -}}
{{- end -}}
{{- dict "pools" $out | toJson -}}
{{- end -}}
