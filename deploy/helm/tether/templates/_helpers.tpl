{{/* The chart name, or nameOverride. */}}
{{- define "tether.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name: fullnameOverride, the release name if it has the chart name in
it, else "<release>-<chart>". */}}
{{- define "tether.fullname" -}}
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

{{/* Name of the collector's objects (ServiceAccount, Deployment, Service, roles). */}}
{{- define "tether.collector" -}}
{{- printf "%s-collector" (include "tether.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tether.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tether.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: collector
{{- end }}

{{- define "tether.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tether.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tether
{{- end }}

{{/* Labels of the API reader role and binding: not the collector's (component api-reader). */}}
{{- define "tether.readerLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "tether.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: api-reader
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tether
{{- end }}

{{/* Whether the collector reads Karmada Clusters. */}}
{{- define "tether.karmada" -}}
{{- if eq .Values.membersFrom "karmada" }}true{{ end }}
{{- end }}

{{/* Whether the collector writes Cluster status, Events and holds the Lease. */}}
{{- define "tether.writesStatus" -}}
{{- if and (eq .Values.membersFrom "karmada") .Values.writeStatus }}true{{ end }}
{{- end }}

{{/* Whether the collector joins the leader election: it writes status, or publishes
ClusterProfiles. */}}
{{- define "tether.electsLeader" -}}
{{- if or (include "tether.writesStatus" .) .Values.publishClusterProfiles .Values.tokenRotation.enabled }}true{{ end }}
{{- end }}

{{- define "tether.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/* Refuses values the chart cannot honour; renders nothing. */}}
{{- define "tether.validate" -}}
{{- if not (has .Values.membersFrom (list "karmada" "argocd" "capi" "kubeconfig" "clusterprofile")) }}
{{- fail (printf "membersFrom must be karmada, argocd, capi, kubeconfig or clusterprofile, not %q" .Values.membersFrom) }}
{{- end }}
{{- with .Values.publishClusterProfiles }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" .) }}
{{- fail (printf "publishClusterProfiles must be a namespace name, not %q" .) }}
{{- end }}
{{- end }}
{{- if and (eq .Values.membersFrom "clusterprofile") (not (and .Values.clusterProfiles.namespaces .Values.clusterProfiles.providers)) }}
{{- fail "membersFrom: clusterprofile needs clusterProfiles.namespaces and clusterProfiles.providers" }}
{{- end }}
{{- if and (not .Values.secretNamespaces) (ne .Values.membersFrom "clusterprofile") }}
{{- fail "secretNamespaces must name at least one namespace holding member Secrets" }}
{{- end }}
{{- if and .Values.sharding.enabled (or .Values.tokenRotation.enabled .Values.publishClusterProfiles) }}
{{- fail "sharding splits the writers; tokenRotation and publishClusterProfiles need a single one: enable one or the other" }}
{{- end }}
{{- if and .Values.tokenRotation.enabled (not (has .Values.membersFrom (list "karmada" "argocd"))) }}
{{- fail "tokenRotation writes minted tokens back into Karmada or Argo CD Secrets: membersFrom must be karmada or argocd" }}
{{- end }}
{{- if .Values.federation.enabled }}
{{- if ne .Values.membersFrom "karmada" }}
{{- fail "federation serves Karmada Clusters annotated tether.io/credential: federated: membersFrom must be karmada" }}
{{- end }}
{{- if not (regexMatch "^[^\\s]+$" (toString .Values.federation.audiencePrefix)) }}
{{- fail (printf "federation.audiencePrefix must be non-empty and without spaces, not %q" (toString .Values.federation.audiencePrefix)) }}
{{- end }}
{{- $lifetime := int .Values.federation.tokenLifetimeSeconds }}
{{- if or (lt $lifetime 600) (gt $lifetime 86400) }}
{{- fail (printf "federation.tokenLifetimeSeconds must be 600 to 86400, not %v" .Values.federation.tokenLifetimeSeconds) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The collector's flags. */}}
{{- define "tether.args" -}}
- --members-from={{ .Values.membersFrom }}
- --log-format={{ .Values.logFormat }}
{{- if eq .Values.membersFrom "argocd" }}
- --argocd-namespace={{ join "," .Values.secretNamespaces }}
{{- end }}
{{- if or (eq .Values.membersFrom "capi") (eq .Values.membersFrom "kubeconfig") }}
- --kubeconfig-namespace={{ join "," .Values.secretNamespaces }}
{{- end }}
{{- if and (eq .Values.membersFrom "kubeconfig") .Values.kubeconfigSelector }}
- --kubeconfig-selector={{ .Values.kubeconfigSelector }}
{{- end }}
{{- if eq .Values.membersFrom "clusterprofile" }}
- --clusterprofile-namespace={{ join "," .Values.clusterProfiles.namespaces }}
- --clusterprofile-provider-file=/etc/tether/clusterprofile/providers.json
{{- end }}
{{- if .Values.execPlugins }}
- --exec-plugins=/etc/tether/exec/plugins.json
{{- end }}
{{- range .Values.allowExec }}
- --allow-exec={{ . }}
{{- end }}
{{- if include "tether.execSandboxed" . }}
- --exec-run-as={{ int .Values.execSandbox.runAsUser }}:{{ int .Values.execSandbox.runAsGroup }}
{{- end }}
{{- if and (eq .Values.membersFrom "karmada") .Values.secretLabelSelector }}
- --secret-label-selector={{ .Values.secretLabelSelector }}
{{- end }}
- --mirror={{ join "," .Values.mirror }}
- --probe-period={{ int .Values.probePeriod }}
- --write-status={{ .Values.writeStatus }}
{{- with .Values.publishClusterProfiles }}
- --publish-clusterprofiles={{ . }}
{{- end }}
{{- if .Values.tokenRotation.enabled }}
{{- if .Values.tokenRotation.members }}
- --mint-tokens-for={{ join "," .Values.tokenRotation.members }}
{{- else }}
- --mint-tokens
{{- end }}
- --mint-at-fraction={{ .Values.tokenRotation.fraction }}
- --mint-max-expiration={{ .Values.tokenRotation.maxExpiration }}
{{- range .Values.tokenRotation.audiences }}
- --mint-audience={{ . }}
{{- end }}
{{- end }}
{{- if .Values.federation.enabled }}
- --federated-service-account={{ .Release.Namespace }}/{{ include "tether.collector" . }}
- --federated-audience-prefix={{ .Values.federation.audiencePrefix }}
- --federated-token-lifetime={{ int .Values.federation.tokenLifetimeSeconds }}
{{- end }}
{{- if .Values.sharding.enabled }}
- --shards=auto
- --shard-lease-seconds={{ int .Values.sharding.leaseSeconds }}
- --shard-load-factor={{ .Values.sharding.loadFactor }}
{{- end }}
- --self-rejected-grace={{ int .Values.selfRejectedGrace }}
{{- if .Values.insecureServeApi }}
- --insecure-serve-api
{{- end }}
{{- if .Values.tls.certManager.enabled }}
- --tls-cert-file=/etc/tether/tls/tls.crt
- --tls-private-key-file=/etc/tether/tls/tls.key
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end }}

{{/*
Non-empty when exec plugins may run (declared, allowed, or ClusterProfile providers) and the
sandbox is on: plugins run as another user, the
collector as UID 0 with SETUID, SETGID and CHOWN only, its token a 0400 projected volume.
*/}}
{{- define "tether.execSandboxed" -}}
{{- $profiles := and (eq .Values.membersFrom "clusterprofile") .Values.clusterProfiles.providers -}}
{{- if and .Values.execSandbox.enabled (or .Values.execPlugins .Values.allowExec $profiles) -}}
true
{{- end -}}
{{- end }}
