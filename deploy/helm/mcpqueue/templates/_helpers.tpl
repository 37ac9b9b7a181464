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
{{- /* A pool's Asynq queue (asynqbroker.PoolQueueName): <prefix>.pool.<pool>; call with (dict "root" $ "pool" name) */ -}}
{{- define "mcpqueue.asynqQueue" -}}
{{- printf "%s.pool.%s" .root.Values.prefix .pool -}}
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

{{/*
Bytes of a Kubernetes quantity or byte count; call with (dict "what" "api.resources.limits.memory" "q" value).
  64Mi → 67108864;  1.5Gi → 1610612736;  500M → 500000000;  67108864 → 67108864
Binary (Ki Mi Gi Ti Pi) and decimal (k M G T P) suffixes; anything else fails
the render, naming the value.
*/}}
{{- define "mcpqueue.bytes" -}}
{{- $q := .q -}}
{{- if or (kindIs "float64" $q) (kindIs "int64" $q) (kindIs "int" $q) -}}
{{- $q = printf "%d" (int64 $q) -}}
{{- end -}}
{{- $q = toString $q | trim -}}
{{- $m := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $unit := trimPrefix $m $q -}}
{{- $mul := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 -}}
{{- if or (not $m) (not (hasKey $mul $unit)) -}}
{{- fail (printf "%s %q is no memory quantity: a number of bytes, or one with a suffix Ki, Mi, Gi, Ti (or k, M, G, T), e.g. 512Mi" .what $q) -}}
{{- end -}}
{{- mulf (float64 $m) (get $mul $unit) | ceil | int64 -}}
{{- end -}}

{{/*
The memory limits fit the results: a pool's limit is at least 3 × its
maxResult (a result is built, encoded and written), the api's 3 × the
largest maxResult of any pool (it holds results in flight while streaming
them into replies). A Deployment without a memory limit is not checked.
*/}}
{{- define "mcpqueue.validateMemory" -}}
{{- $largest := 0 -}}
{{- $from := "" -}}
{{- range $p := (include "mcpqueue.pools" . | fromJson).pools -}}
{{- $what := printf "pool %s: maxResult" $p.name -}}
{{- $max := include "mcpqueue.bytes" (dict "what" $what "q" $p.maxResult) | int64 -}}
{{- if le $max 0 -}}
{{- fail (printf "%s %v: must be more than 0" $what $p.maxResult) -}}
{{- end -}}
{{- if hasKey (default dict $p.env) "MCPQ_MAX_RESULT" -}}
{{- fail (printf "pool %s: set maxResult (worker.maxResult or pools[].maxResult), not env.MCPQ_MAX_RESULT: the memory limits are checked against it" $p.name) -}}
{{- end -}}
{{- if gt $max $largest -}}
{{- $largest = $max -}}
{{- $from = printf "pool %s's maxResult (%v)" $p.name $p.maxResult -}}
{{- end -}}
{{- $limit := (default dict (default dict $p.resources).limits).memory -}}
{{- if $limit -}}
{{- if lt (include "mcpqueue.bytes" (dict "what" (printf "pool %s: resources.limits.memory" $p.name) "q" $limit) | int64) (mul 3 $max) -}}
{{- fail (printf "pool %s: resources.limits.memory %v is below 3 × maxResult (%v): a result that large gets the pod OOM-killed; raise the limit or lower maxResult (worker.* or pools[].*)" $p.name $limit $p.maxResult) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $limit := (default dict (default dict .Values.api.resources).limits).memory -}}
{{- if $limit -}}
{{- if lt (include "mcpqueue.bytes" (dict "what" "api.resources.limits.memory" "q" $limit) | int64) (mul 3 $largest) -}}
{{- fail (printf "api.resources.limits.memory %v is below 3 × %s: the api holds results in flight; raise the limit or lower maxResult" $limit $from) -}}
{{- end -}}
{{- end -}}
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
{{- include "mcpqueue.brokerEnv" . }}
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
{{- include "mcpqueue.validateBrokerSecrets" . -}}
{{- include "mcpqueue.validateMemory" . -}}
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


{{/*
Broker credentials and certificates from Secrets the user names (values
nats.auth, nats.tls, redis.auth, redis.tls, redis.sentinel): files are
mounted, the rest are secretKeyRef variables; only the broker in use counts.

mcpqueue.brokerFiles: the files, as JSON {"volumes": [{"name", "secret",
"items": [{"key", "path", "env"}]}]}. Volume <name> is mounted read-only at
/etc/mcpq/<name>; each item's variable (a flag of the binaries) names the
file /etc/mcpq/<name>/<path>.
*/}}
{{- define "mcpqueue.brokerFiles" -}}
{{- $vols := list -}}
{{- if eq .Values.broker "nats" -}}
{{- $a := .Values.nats.auth -}}
{{- if $a.creds.secretName -}}
{{- $vols = append $vols (dict "name" "nats-creds" "secret" $a.creds.secretName "items" (list (dict "key" (required "nats.auth.creds.key: the Secret's key holding the creds file" $a.creds.key) "path" "nats.creds" "env" "MCPQ_NATS_CREDS"))) -}}
{{- end -}}
{{- if $a.nkey.secretName -}}
{{- $vols = append $vols (dict "name" "nats-nkey" "secret" $a.nkey.secretName "items" (list (dict "key" (required "nats.auth.nkey.key: the Secret's key holding the nkey seed" $a.nkey.key) "path" "nkey.seed" "env" "MCPQ_NATS_NKEY"))) -}}
{{- end -}}
{{- with (include "mcpqueue.tlsVolume" (dict "name" "nats-tls" "what" "nats.tls" "tls" .Values.nats.tls "env" "MCPQ_NATS_TLS") | fromJson) }}{{ $vols = append $vols . }}{{ end -}}
{{- else -}}
{{- with (include "mcpqueue.tlsVolume" (dict "name" "redis-tls" "what" "redis.tls" "tls" .Values.redis.tls "env" "MCPQ_REDIS_TLS") | fromJson) }}{{ $vols = append $vols . }}{{ end -}}
{{- end -}}
{{- dict "volumes" $vols | toJson -}}
{{- end -}}

{{/* One TLS Secret's files; call with (dict "name" volume "what" "nats.tls" "tls" values "env" "MCPQ_NATS_TLS"). */}}
{{- define "mcpqueue.tlsVolume" -}}
{{- $t := .tls -}}
{{- if $t.secretName -}}
{{- $items := list -}}
{{- if $t.caKey -}}
{{- $items = append $items (dict "key" $t.caKey "path" "ca.crt" "env" (printf "%s_CA" .env)) -}}
{{- end -}}
{{- if $t.clientCert -}}
{{- if or (not $t.certKey) (not $t.keyKey) -}}
{{- fail (printf "%s.clientCert needs %s.certKey and %s.keyKey (the client certificate and its private key)" .what .what .what) -}}
{{- end -}}
{{- $items = append $items (dict "key" $t.certKey "path" "tls.crt" "env" (printf "%s_CERT" .env)) -}}
{{- $items = append $items (dict "key" $t.keyKey "path" "tls.key" "env" (printf "%s_KEY" .env)) -}}
{{- end -}}
{{- if not $items -}}
{{- fail (printf "%s.secretName %q: nothing to mount; set %s.caKey or %s.clientCert" .what $t.secretName .what .what) -}}
{{- end -}}
{{- dict "name" .name "secret" $t.secretName "items" $items | toJson -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* An env entry from a Secret's key; call with (dict "env" name "secret" s "key" k). */}}
{{- define "mcpqueue.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret | quote }}
      key: {{ .key | quote }}
{{- end -}}

{{/* The broker variables beyond the URL, as env entries (each on a new line; nothing by default). */}}
{{- define "mcpqueue.brokerEnv" -}}
{{- range (include "mcpqueue.brokerFiles" . | fromJson).volumes }}
{{- $dir := printf "/etc/mcpq/%s" .name }}
{{- range .items }}
- name: {{ .env }}
  value: {{ printf "%s/%s" $dir .path | quote }}
{{- end }}
{{- end }}
{{- if eq .Values.broker "nats" }}
{{- with .Values.nats.auth.userPassword }}
{{- if .secretName }}
{{ include "mcpqueue.secretEnv" (dict "env" "MCPQ_NATS_USER" "secret" .secretName "key" .userKey) }}
{{ include "mcpqueue.secretEnv" (dict "env" "MCPQ_NATS_PASSWORD" "secret" .secretName "key" .passwordKey) }}
{{- end }}
{{- end }}
{{- with .Values.nats.auth.token }}
{{- if .secretName }}
{{ include "mcpqueue.secretEnv" (dict "env" "MCPQ_NATS_TOKEN" "secret" .secretName "key" .key) }}
{{- end }}
{{- end }}
{{- else }}
{{- $r := .Values.redis }}
{{- with $r.auth }}
{{- if .secretName }}
{{- with .userKey }}
{{ include "mcpqueue.secretEnv" (dict "env" "MCPQ_REDIS_USER" "secret" $r.auth.secretName "key" .) }}
{{- end }}
{{- with .passwordKey }}
{{ include "mcpqueue.secretEnv" (dict "env" "MCPQ_REDIS_PASSWORD" "secret" $r.auth.secretName "key" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- with $r.sentinel }}
{{- if .addresses }}
- name: MCPQ_REDIS_SENTINELS
  value: {{ join "," .addresses | quote }}
- name: MCPQ_REDIS_MASTER
  value: {{ .masterName | quote }}
{{- end }}
{{- if .auth.secretName }}
{{- with .auth.userKey }}
{{ include "mcpqueue.secretEnv" (dict "env" "MCPQ_REDIS_SENTINEL_USER" "secret" $r.sentinel.auth.secretName "key" .) }}
{{- end }}
{{- with .auth.passwordKey }}
{{ include "mcpqueue.secretEnv" (dict "env" "MCPQ_REDIS_SENTINEL_PASSWORD" "secret" $r.sentinel.auth.secretName "key" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $r.waitReplicas }}
- name: MCPQ_REDIS_WAIT_REPLICAS
  value: {{ $r.waitReplicas | quote }}
{{- end }}
{{- with $r.waitTimeout }}
- name: MCPQ_REDIS_WAIT_TIMEOUT
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* volumeMounts and volumes of the broker files (nothing by default). */}}
{{- define "mcpqueue.brokerVolumeMounts" -}}
{{- range (include "mcpqueue.brokerFiles" . | fromJson).volumes }}
- name: {{ .name }}
  mountPath: /etc/mcpq/{{ .name }}
  readOnly: true
{{- end }}
{{- end -}}
{{- define "mcpqueue.brokerVolumes" -}}
{{- range (include "mcpqueue.brokerFiles" . | fromJson).volumes }}
- name: {{ .name }}
  secret:
    secretName: {{ .secret | quote }}
    defaultMode: 288 # 0440: owner root, group the pod's fsGroup; nobody else
    items:
      {{- range .items }}
      - key: {{ .key | quote }}
        path: {{ .path }}
      {{- end }}
{{- end }}
{{- end -}}

{{/*
The pod securityContext: podSecurityContext, plus fsGroup (its runAsGroup)
when broker files are mounted and it sets none. A Secret volume's files are
root's; with fsGroup the kubelet gives them that group (and group read), so
the non-root uid reads them through its group while others cannot.
*/}}
{{- define "mcpqueue.podSecurityContext" -}}
{{- $psc := deepCopy .Values.podSecurityContext -}}
{{- if and (include "mcpqueue.brokerFiles" . | fromJson).volumes (not (hasKey $psc "fsGroup")) -}}
{{- $_ := set $psc "fsGroup" (default 65532 $psc.runAsGroup) -}}
{{- end -}}
{{- toYaml $psc -}}
{{- end -}}

{{/* Settings of the broker Secrets that cannot work fail the render. */}}
{{- define "mcpqueue.validateBrokerSecrets" -}}
{{- $_ := include "mcpqueue.brokerFiles" . -}}
{{- if eq .Values.broker "nats" -}}
{{- $a := .Values.nats.auth -}}
{{- $ways := list -}}
{{- range $w := list "creds" "nkey" "userPassword" "token" -}}
{{- if (get $a $w).secretName -}}
{{- $ways = append $ways (printf "nats.auth.%s" $w) -}}
{{- end -}}
{{- end -}}
{{- if gt (len $ways) 1 -}}
{{- fail (printf "%s exclude each other: NATS authenticates one way" (join " and " $ways)) -}}
{{- end -}}
{{- if and $a.userPassword.secretName (or (not $a.userPassword.userKey) (not $a.userPassword.passwordKey)) -}}
{{- fail "nats.auth.userPassword needs userKey and passwordKey" -}}
{{- end -}}
{{- if and $a.token.secretName (not $a.token.key) -}}
{{- fail "nats.auth.token needs key" -}}
{{- end -}}
{{- else -}}
{{- $r := .Values.redis -}}
{{- $scheme := regexFind "^[a-z+]+://" $r.url -}}
{{- $known := not .Values.secret.existingSecret -}}
{{- if and $r.auth.secretName (not $r.auth.userKey) (not $r.auth.passwordKey) -}}
{{- fail "redis.auth.secretName needs redis.auth.passwordKey or redis.auth.userKey" -}}
{{- end -}}
{{- if and $r.sentinel.auth.secretName (not $r.sentinel.auth.userKey) (not $r.sentinel.auth.passwordKey) -}}
{{- fail "redis.sentinel.auth.secretName needs redis.sentinel.auth.passwordKey or redis.sentinel.auth.userKey" -}}
{{- end -}}
{{- if and $r.passwordInSecret $r.auth.secretName $r.auth.passwordKey -}}
{{- fail "redis.passwordInSecret and redis.auth both give KEDA the Redis password: drop redis.passwordInSecret (redis.auth serves api, workers and KEDA)" -}}
{{- end -}}
{{- if ne (empty $r.sentinel.masterName) (empty $r.sentinel.addresses) -}}
{{- fail "redis.sentinel.masterName and redis.sentinel.addresses go together" -}}
{{- end -}}
{{- if and $known $r.sentinel.addresses (has $scheme (list "redis+sentinel://" "rediss+sentinel://")) -}}
{{- fail "redis.sentinel.addresses and a redis+sentinel:// redis.url both name the Sentinels: give them once" -}}
{{- end -}}
{{- if and $known $r.tls.secretName (not (has $scheme (list "rediss://" "rediss+sentinel://"))) -}}
{{- fail (printf "redis.tls needs a rediss:// (or rediss+sentinel://) redis.url, not %s" (default "no scheme" $scheme)) -}}
{{- end -}}
{{- end -}}
{{- end -}}


{{/*
mcpqueue.urlPorts: the TCP ports of a URL's hosts, as JSON {"ports": [...]};
call with (dict "url" u "default" port). Comma-separated hosts or URLs
(nats://a:4222,nats://b:4222, redis+sentinel://s0:26379,s1:26379/m) each
count; a host without a port has the default; a URL without a host adds none.
*/}}
{{- define "mcpqueue.urlPorts" -}}
{{- $ports := list -}}
{{- range splitList "," .url -}}
{{- $hp := regexReplaceAll "^[A-Za-z][A-Za-z0-9+.-]*://" (trim .) "" -}}
{{- $hp = regexReplaceAll "/.*$" $hp "" -}}
{{- $hp = regexReplaceAll "^.*@" $hp "" -}}
{{- if $hp -}}
{{- $port := trimPrefix ":" (regexFind ":[0-9]+$" $hp) -}}
{{- $ports = append $ports (default (toString $.default) $port | int) -}}
{{- end -}}
{{- end -}}
{{- dict "ports" (uniq $ports) | toJson -}}
{{- end -}}

{{/*
The broker's TCP ports: networkPolicy.egress.brokerPorts, or those of
nats.url (4222 by default); of redis.url (6379, 26379 for a Sentinel URL)
and, with redis.sentinel, the Sentinels' and 6379 (the primary they name).
*/}}
{{- define "mcpqueue.brokerPorts" -}}
{{- $ports := .Values.networkPolicy.egress.brokerPorts -}}
{{- if not $ports -}}
{{- if eq .Values.broker "nats" -}}
{{- $ports = (include "mcpqueue.urlPorts" (dict "url" .Values.nats.url "default" 4222) | fromJson).ports -}}
{{- else -}}
{{- $r := .Values.redis -}}
{{- $ports = (include "mcpqueue.urlPorts" (dict "url" $r.url "default" (ternary 26379 6379 (contains "sentinel" $r.url))) | fromJson).ports -}}
{{- if $r.sentinel.addresses -}}
{{- $ports = concat $ports (include "mcpqueue.urlPorts" (dict "url" (join "," $r.sentinel.addresses) "default" 26379) | fromJson).ports (list 6379) -}}
{{- else if contains "sentinel" $r.url -}}
{{- $ports = append $ports 6379 -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range $ports }}{{ $out = append $out (int .) }}{{ end -}}
{{- dict "ports" (uniq $out) | toJson -}}
{{- end -}}

{{/* The admin port's ingress rule (none when from is empty); call with (dict "from" peers "port" n). */}}
{{- define "mcpqueue.adminIngress" -}}
{{- with .from -}}
- ports:
    - {protocol: TCP, port: {{ $.port }}}
  from:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{/* The egress rules api and workers share: DNS and the broker. */}}
{{- define "mcpqueue.egress" -}}
{{- $e := .Values.networkPolicy.egress -}}
- ports:
    - {protocol: UDP, port: 53}
    - {protocol: TCP, port: 53}
  {{- with $e.dnsTo }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
- ports:
    {{- range (include "mcpqueue.brokerPorts" . | fromJson).ports }}
    - {protocol: TCP, port: {{ . }}}
    {{- end }}
  {{- with $e.brokerTo }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
