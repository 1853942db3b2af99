{{/*
Name of every object, and the prefix of the per-component names. The chart is a cluster singleton
(CRDs, ClusterRoles, the MutatingWebhookConfiguration and the scheduler name are cluster-wide), so
the release name is not part of it; a second release collides visibly instead of half-working.
*/}}
{{- define "sky.fullname" -}}
{{- default .Chart.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sky.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Per-component names. */}}
{{- define "sky.scheduler.fullname" -}}{{ include "sky.fullname" . }}{{- end -}}
{{- define "sky.webhook.serviceName" -}}{{ printf "%s-webhook" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "sky.webhook.secretName" -}}
{{- if eq .Values.webhook.certificates.mode "secret" -}}
{{- .Values.webhook.certificates.secret.name -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- define "sky.webhook.certificateName" -}}{{ printf "%s-webhook" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "sky.webhook.configName" -}}{{ include "sky.fullname" . }}{{- end -}}
{{- define "sky.metrics.serviceName" -}}{{ printf "%s-metrics" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "sky.roce.fullname" -}}{{ printf "%s-roce" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "sky.kubeScheduler.fullname" -}}{{ printf "%s-kube-scheduler" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "sky.extender.serviceName" -}}{{ printf "%s-extender" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "sky.extender.serverSecret" -}}{{ printf "%s-extender-tls" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "sky.extender.clientSecret" -}}{{ printf "%s-extender-client-tls" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}
{{/* "true" when kube-scheduler and serve run in separate pods (scheduler.layout: separate), else "". */}}
{{- define "sky.separate" -}}{{ if eq .Values.scheduler.layout "separate" }}true{{ end }}{{- end -}}
{{/* The ServiceAccount kube-scheduler runs as: its own in the separate layout, the pod's otherwise. */}}
{{- define "sky.kubeScheduler.serviceAccount" -}}
{{- if include "sky.separate" . -}}{{ include "sky.kubeScheduler.fullname" . }}{{- else -}}{{ include "sky.scheduler.fullname" . }}{{- end -}}
{{- end -}}
{{- define "sky.ib.fullname" -}}{{ printf "%s-ib" (include "sky.fullname" .) | trunc 63 | trimSuffix "-" }}{{- end -}}

{{/* Common labels; the component label is added by each object. */}}
{{- define "sky.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "sky.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sky-scheduler
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of a component: (dict "ctx" $ "component" "scheduler") */}}
{{- define "sky.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sky.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sky.componentLabels" -}}
{{ include "sky.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The sky-scheduler image reference. */}}
{{- define "sky.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The lldpd sidecar image: its own when a repository is set, else the sky-scheduler image. */}}
{{- define "sky.lldpd.image" -}}
{{- $img := .Values.discovery.roce.lldpd.image -}}
{{- if $img.repository -}}
{{- printf "%s:%s" $img.repository (required "discovery.roce.lldpd.image.tag is required with a repository" $img.tag) -}}
{{- else -}}
{{- include "sky.image" . -}}
{{- end -}}
{{- end -}}

{{/*
kube-scheduler image. Without a tag: the cluster's version vX.Y.Z, with distribution suffixes
(-eks-…, -gke.…, +k3s1) removed, so kube-scheduler is never newer than the API server.
*/}}
{{- define "sky.kubeScheduler.image" -}}
{{- $ks := .Values.scheduler.kubeScheduler.image -}}
{{- $tag := $ks.tag -}}
{{- if not $tag -}}
{{- $tag = regexFind "^v?[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version -}}
{{- if not (hasPrefix "v" $tag) -}}{{- $tag = printf "v%s" $tag -}}{{- end -}}
{{- end -}}
{{- printf "%s:%s" $ks.repository $tag -}}
{{- end -}}

{{/* The scheduling policy file: the values' text, else the chart's copy of the default. */}}
{{- define "sky.policy" -}}
{{- if .Values.scheduler.policy -}}
{{- .Values.scheduler.policy -}}
{{- else -}}
{{- .Files.Get "files/default-policy.yaml" -}}
{{- end -}}
{{- end -}}

{{/* The restricted container securityContext shared by the non-root containers. */}}
{{- define "sky.restrictedSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
Checks of combinations values.schema.json cannot express (comparisons between values). They stop
`helm install/upgrade/template`; `helm lint` renders in lint mode, where `fail` only logs.
*/}}
{{- define "sky.validate" -}}
{{- $s := .Values.scheduler.serve -}}
{{- $ports := list (int $s.extenderPort) (int $s.webhookPort) (int $s.opsPort) (int .Values.scheduler.kubeScheduler.securePort) -}}
{{- if ne (len $ports) (len (uniq $ports)) -}}
{{- fail "scheduler.serve.extenderPort, webhookPort, opsPort and scheduler.kubeScheduler.securePort must differ (the containers share the pod's network namespace)" -}}
{{- end -}}
{{- $le := $s.leaderElection -}}
{{- if not (and (lt (float64 $le.renewDeadline) (float64 $le.leaseDuration)) (lt (float64 $le.retryPeriod) (float64 $le.renewDeadline))) -}}
{{- fail "scheduler.serve.leaderElection: need retryPeriod < renewDeadline < leaseDuration" -}}
{{- end -}}
{{- if and (not $le.enabled) (gt (int .Values.scheduler.replicas) 1) -}}
{{- fail "scheduler.serve.leaderElection.enabled=false runs the binder loop in every replica: set scheduler.replicas to 1" -}}
{{- end -}}
{{- if eq $le.leaseName .Values.scheduler.kubeScheduler.leaderElection.leaseName -}}
{{- fail "the binder Lease (scheduler.serve.leaderElection.leaseName) and kube-scheduler's Lease must have different names" -}}
{{- end -}}
{{- if and .Values.scheduler.podDisruptionBudget.enabled (ge (int .Values.scheduler.podDisruptionBudget.minAvailable) (int .Values.scheduler.replicas)) (gt (int .Values.scheduler.replicas) 0) -}}
{{- fail "scheduler.podDisruptionBudget.minAvailable must be below scheduler.replicas, or no node could ever be drained" -}}
{{- end -}}
{{- if and .Values.webhook.enabled (eq .Values.webhook.certificates.mode "secret") (or (not .Values.webhook.certificates.secret.name) (not .Values.webhook.certificates.secret.caBundle)) -}}
{{- fail "webhook.certificates.mode=secret needs webhook.certificates.secret.name and .caBundle" -}}
{{- end -}}
{{- if and .Values.discovery.roce.enabled (not .Values.discovery.roce.lldpd.enabled) (not .Values.discovery.roce.lldpd.hostSocket) -}}
{{- fail "discovery.roce.lldpd.enabled=false needs discovery.roce.lldpd.hostSocket (the host lldpd's control socket)" -}}
{{- end -}}
{{- end -}}

{{/*
What both webhook entries share: the rules (pod CREATE), the service, the timeout.
Called with (dict "ctx" . "svc" <service name> "caBundle" <b64 or ""> "failurePolicy" <policy>).
*/}}
{{- define "sky.webhook.common" -}}
{{- $ctx := .ctx -}}
admissionReviewVersions: ["v1"]
# it writes claims on Quota objects (which expire if the pod is never created), never on dryRun
sideEffects: NoneOnDryRun
failurePolicy: {{ .failurePolicy }}
matchPolicy: Equivalent
reinvocationPolicy: Never
timeoutSeconds: {{ $ctx.Values.webhook.timeoutSeconds }}
clientConfig:
  service:
    name: {{ .svc }}
    namespace: {{ $ctx.Release.Namespace }}
    path: /mutate/pods
    port: {{ $ctx.Values.webhook.servicePort }}
  {{- if .caBundle }}
  caBundle: {{ .caBundle }}
  {{- end }}
rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
    scope: Namespaced
{{- end -}}

{{/*
Liveness and readiness of a discovery agent: the --alive-file its loop touches after every round.
Live while touched within 3 periods (and at least 2 minutes, find -mmin's granularity); ready
once the first round is done. Called with (dict "period" <seconds>).
*/}}
{{- define "sky.discovery.probes" -}}
{{- $minutes := max 2 (add1 (div (mul 3 (int .period)) 60)) -}}
livenessProbe:
  exec:
    command: ["sh", "-c", "test -n \"$(find /run/sky-alive/alive -mmin -{{ $minutes }} 2>/dev/null)\""]
  initialDelaySeconds: {{ mul 3 (int .period) }}
  periodSeconds: 30
  failureThreshold: 3
readinessProbe:
  exec:
    command: ["test", "-e", "/run/sky-alive/alive"]
  periodSeconds: 10
{{- end -}}
