{{/*
The scheduler pods, in either layout (scheduler.layout):
- samePod: one Deployment whose pods hold both containers (kube-scheduler reaches the extender on
  127.0.0.1 in plain HTTP; one ServiceAccount holds both containers' roles);
- separate: a kube-scheduler Deployment and a serve Deployment, each with its own ServiceAccount;
  the extender on mutual TLS behind a Service (kube-scheduler presents a client certificate).
The helpers below render the parts both layouts share.
*/}}

{{/*
Pod-level settings of a scheduler pod: identity, priority, security, placement (anti-affinity
between the pods of the same component). Called with (dict "ctx" $ "component" <label> "sa" <name>).
*/}}
{{- define "sky.scheduler.podSettings" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values.scheduler -}}
{{- $selector := include "sky.selectorLabels" (dict "ctx" $ctx "component" .component) -}}
serviceAccountName: {{ .sa }}
automountServiceAccountToken: true
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if or $v.affinity (ne $v.podAntiAffinity "none") }}
affinity:
  {{- with $v.affinity.nodeAffinity }}
  nodeAffinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity.podAffinity }}
  podAffinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $v.affinity.podAntiAffinity }}
  podAntiAffinity:
    {{- toYaml $v.affinity.podAntiAffinity | nindent 4 }}
  {{- else if eq $v.podAntiAffinity "hard" }}
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- $selector | nindent 12 }}
  {{- else if eq $v.podAntiAffinity "soft" }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- $selector | nindent 14 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* The pod template's metadata. Called with (dict "ctx" $ "component" <label>). */}}
{{- define "sky.scheduler.podMetadata" -}}
{{- $ctx := .ctx -}}
labels:
  {{- include "sky.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 2 }}
  {{- with $ctx.Values.scheduler.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  # roll the pods when their configuration changes
  checksum/config: {{ include (print $ctx.Template.BasePath "/scheduler/configmap.yaml") $ctx | sha256sum }}
  {{- with $ctx.Values.scheduler.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* The Deployment spec fields before the pod template. Called with (dict "ctx" $ "component" <label>). */}}
{{- define "sky.scheduler.deploymentSpec" -}}
replicas: {{ .ctx.Values.scheduler.replicas }}
revisionHistoryLimit: 5
strategy:
  type: RollingUpdate
  rollingUpdate:
    # one replica at a time; no surge, so a hard anti-affinity never blocks a rollout
    maxUnavailable: 1
    maxSurge: 0
selector:
  matchLabels:
    {{- include "sky.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
{{- end -}}

{{/* The stock kube-scheduler container. Called with the root context. */}}
{{- define "sky.kubeScheduler.container" -}}
{{- $ks := .Values.scheduler.kubeScheduler -}}
name: kube-scheduler
image: {{ include "sky.kubeScheduler.image" . }}
imagePullPolicy: {{ $ks.image.pullPolicy }}
command:
  - kube-scheduler
args:
  - --config=/etc/kubernetes/sky-scheduler/scheduler-config.yaml
  - --secure-port={{ $ks.securePort }}
  - --v={{ $ks.verbosity }}
  {{- range $ks.extraArgs }}
  - {{ . | quote }}
  {{- end }}
ports:
  - name: sched-https
    containerPort: {{ $ks.securePort }}
    protocol: TCP
livenessProbe:
  httpGet:
    path: /healthz
    port: sched-https
    scheme: HTTPS
  initialDelaySeconds: 15
  periodSeconds: 10
  failureThreshold: 6
readinessProbe:
  httpGet:
    path: /readyz
    port: sched-https
    scheme: HTTPS
  periodSeconds: 10
resources:
  {{- toYaml $ks.resources | nindent 2 }}
securityContext:
  {{- include "sky.restrictedSecurityContext" . | nindent 2 }}
volumeMounts:
  - name: scheduler-config
    mountPath: /etc/kubernetes/sky-scheduler
    readOnly: true
  {{- if include "sky.separate" . }}
  # its client certificate for the extender, and the CA that signed the extender's certificate
  - name: extender-client-tls
    mountPath: /etc/kubernetes/sky-scheduler-extender-tls
    readOnly: true
  {{- end }}
{{- end -}}

{{/* The kube-scheduler container's volumes. Called with the root context. */}}
{{- define "sky.kubeScheduler.volumes" -}}
- name: scheduler-config
  configMap:
    name: {{ include "sky.scheduler.fullname" . }}-config
{{- if include "sky.separate" . }}
- name: extender-client-tls
  secret:
    secretName: {{ include "sky.extender.clientSecret" . }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* The `sky-scheduler serve` container. Called with the root context. */}}
{{- define "sky.serve.container" -}}
{{- $s := .Values.scheduler.serve -}}
{{- $webhook := .Values.webhook.enabled -}}
{{- $separate := include "sky.separate" . -}}
name: sky-scheduler
image: {{ include "sky.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args:
  - serve
  - --scheduler-name={{ .Values.schedulerName }}
  - --policy=/etc/sky-scheduler/policy/policy.yaml
  {{- if $separate }}
  # reached through the extender Service by kube-scheduler's pods only: TLS, and a client
  # certificate signed by the extender CA is required (the NetworkPolicy admits only them too)
  - --extender-address=0.0.0.0
  - --extender-port={{ $s.extenderPort }}
  - --extender-tls-cert-file=/etc/sky-scheduler/extender-tls/tls.crt
  - --extender-tls-key-file=/etc/sky-scheduler/extender-tls/tls.key
  - --extender-client-ca-file=/etc/sky-scheduler/extender-tls/ca.crt
  {{- else }}
  - --extender-address=127.0.0.1
  - --extender-port={{ $s.extenderPort }}
  {{- end }}
  {{- if $webhook }}
  - --webhook-address=0.0.0.0
  - --webhook-port={{ $s.webhookPort }}
  - --tls-cert-file=/etc/sky-scheduler/tls/tls.crt
  - --tls-key-file=/etc/sky-scheduler/tls/tls.key
  {{- if .Values.webhook.clientAuth.caConfigMap }}
  - --webhook-client-ca-file=/etc/sky-scheduler/webhook-client-ca/ca.crt
  {{- end }}
  {{- else }}
  - --webhook-port=0
  {{- end }}
  - --ops-address=0.0.0.0
  - --ops-port={{ $s.opsPort }}
  - --binder-period={{ $s.binderPeriod }}
  - --gc-refreeze-seconds={{ $s.gcRefreezeSeconds }}
  - --policy-reload-seconds={{ $s.policyReloadSeconds }}
  {{- if $s.leaderElection.enabled }}
  - --leader-elect
  {{- else }}
  - --no-leader-elect
  {{- end }}
  - --lease-name={{ $s.leaderElection.leaseName }}
  - --lease-namespace=$(POD_NAMESPACE)
  - --lease-duration={{ $s.leaderElection.leaseDuration }}
  - --renew-deadline={{ $s.leaderElection.renewDeadline }}
  - --retry-period={{ $s.leaderElection.retryPeriod }}
  - --identity=$(POD_NAME)
  - --reservation-ttl={{ $s.reservationTTL }}
  - --gpu-spec-labels={{ join "," $s.gpuSpecLabels }}
  - --topology-labels={{ join "," $s.topologyLabels }}
  - --gpu-resources={{ join "," $s.gpuResources }}
  - --spot-resource={{ $s.spotResource }}
  - --max-body-bytes={{ int64 $s.maxBodyBytes }}
  - --read-timeout={{ $s.readTimeoutSeconds }}
  - --max-connections={{ int64 $s.maxConnections }}
  - --log-level={{ $s.logLevel | lower }}
  - --log-format={{ $s.logFormat }}
  {{- range $s.extraArgs }}
  - {{ . | quote }}
  {{- end }}
env:
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  - name: POD_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  {{- with $s.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
ports:
  {{- if $webhook }}
  - name: webhook
    containerPort: {{ $s.webhookPort }}
    protocol: TCP
  {{- end }}
  - name: ops
    containerPort: {{ $s.opsPort }}
    protocol: TCP
  {{- if $separate }}
  - name: extender
    containerPort: {{ $s.extenderPort }}
    protocol: TCP
  {{- else }}
  # the extender listens on 127.0.0.1:{{ $s.extenderPort }} only (not declared: not reachable)
  {{- end }}
startupProbe:
  httpGet:
    path: /healthz
    port: ops
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet:
    path: /healthz
    port: ops
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: ops
  periodSeconds: 5
  failureThreshold: 2
resources:
  {{- toYaml $s.resources | nindent 2 }}
securityContext:
  {{- include "sky.restrictedSecurityContext" . | nindent 2 }}
volumeMounts:
  - name: policy
    mountPath: /etc/sky-scheduler/policy
    readOnly: true
  {{- if $webhook }}
  - name: webhook-tls
    mountPath: /etc/sky-scheduler/tls
    readOnly: true
  {{- if .Values.webhook.clientAuth.caConfigMap }}
  - name: webhook-client-ca
    mountPath: /etc/sky-scheduler/webhook-client-ca
    readOnly: true
  {{- end }}
  {{- end }}
  {{- if $separate }}
  - name: extender-tls
    mountPath: /etc/sky-scheduler/extender-tls
    readOnly: true
  {{- end }}
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{/* The serve container's volumes. Called with the root context. */}}
{{- define "sky.serve.volumes" -}}
- name: policy
  configMap:
    name: {{ include "sky.scheduler.fullname" . }}-policy
{{- if .Values.webhook.enabled }}
- name: webhook-tls
  secret:
    secretName: {{ include "sky.webhook.secretName" . }}
    defaultMode: 0440
{{- with .Values.webhook.clientAuth.caConfigMap }}
- name: webhook-client-ca
  configMap:
    name: {{ . }}
    items:
      - {key: ca.crt, path: ca.crt}
{{- end }}
{{- end }}
{{- if include "sky.separate" . }}
- name: extender-tls
  secret:
    secretName: {{ include "sky.extender.serverSecret" . }}
    defaultMode: 0440
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}
