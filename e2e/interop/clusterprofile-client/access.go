package main

// What sigs.k8s.io/cluster-inventory-api's pkg/access (BuildConfigFromCP) does, written out
// here because that module is not available to this build: pick an access provider of a
// ClusterProfile that the provider file knows, merge the profile-sourced exec args and env
// where the file's policies allow, and turn the result into a rest.Config for the member.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// The reserved extensions of an access provider's cluster. The first is SIG Auth's (KEP-541):
// clientcmd hands it to the plugin as ExecCredential.spec.cluster.config. The other two are
// KEP-5339's, and are only honoured as the provider file's policies allow.
const (
	execExtension       = "client.authentication.k8s.io/exec"
	extraArgsExtension  = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
	extraEnvsExtension  = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
	argsAppend          = "Append"
	policyIgnore        = "Ignore"
	envsAppendIfMissing = "AppendIfNotExists"
	envsReplace         = "Replace"
)

// provider is one entry of the provider file: what the consumer (not the profile's producer)
// trusts to run, and how much of the profile may change its arguments and environment.
type provider struct {
	Name          string                  `json:"name"`
	ExecConfig    *clientcmdv1.ExecConfig `json:"execConfig"`
	ArgsPolicy    string                  `json:"profileSourcedCLIArgsPolicy,omitempty"`
	EnvVarsPolicy string                  `json:"profileSourcedEnvVarsPolicy,omitempty"`
}

type providerFile struct {
	Providers []provider `json:"providers"`
}

// accessProvider is one entry of status.accessProviders (or the deprecated
// status.credentialProviders): a kubeconfig Cluster, extensions included.
type accessProvider struct {
	Name    string              `json:"name"`
	Cluster clientcmdv1.Cluster `json:"cluster"`
}

type profileStatus struct {
	AccessProviders     []accessProvider `json:"accessProviders"`
	CredentialProviders []accessProvider `json:"credentialProviders"`
}

// readProviderFile parses the file and rejects what could only fail later: an entry without
// a command, or a policy upstream does not know ("" means Ignore, as upstream treats it).
func readProviderFile(path string) ([]provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the provider file: %w", err)
	}
	var file providerFile
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("parsing the provider file %s: %w", path, err)
	}
	if len(file.Providers) == 0 {
		return nil, fmt.Errorf("the provider file %s names no providers", path)
	}
	for _, p := range file.Providers {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("%s: a provider without a name", path)
		case p.ExecConfig == nil || p.ExecConfig.Command == "":
			return nil, fmt.Errorf("%s: provider %q has no execConfig.command", path, p.Name)
		case p.ArgsPolicy != "" && p.ArgsPolicy != argsAppend && p.ArgsPolicy != policyIgnore:
			return nil, fmt.Errorf("%s: provider %q: unsupported profileSourcedCLIArgsPolicy %q", path, p.Name, p.ArgsPolicy)
		case p.EnvVarsPolicy != "" && p.EnvVarsPolicy != envsAppendIfMissing &&
			p.EnvVarsPolicy != envsReplace && p.EnvVarsPolicy != policyIgnore:
			return nil, fmt.Errorf("%s: provider %q: unsupported profileSourcedEnvVarsPolicy %q", path, p.Name, p.EnvVarsPolicy)
		}
	}
	return file.Providers, nil
}

// chooseProvider does what upstream's getClusterAccessorFromClusterProfile does: the
// deprecated credentialProviders first, then accessProviders over them by name, and the
// first provider *of the file*, in the file's order, that the profile offers. The file's
// order is the consumer's preference, so it wins over the order in the profile.
func chooseProvider(profile *unstructured.Unstructured, providers []provider) (accessProvider, provider, error) {
	var status profileStatus
	if raw, ok := profile.Object["status"]; ok {
		// Through JSON, so certificate-authority-data (base64) and the extensions (raw
		// JSON) decode exactly as they would from a kubeconfig.
		data, err := json.Marshal(raw)
		if err == nil {
			err = json.Unmarshal(data, &status)
		}
		if err != nil {
			return accessProvider{}, provider{}, fmt.Errorf("ClusterProfile %s/%s: malformed status: %w",
				profile.GetNamespace(), profile.GetName(), err)
		}
	}
	offered := map[string]accessProvider{}
	for _, ap := range status.CredentialProviders {
		fmt.Fprintf(os.Stderr, "warning: ClusterProfile %s/%s uses the deprecated status.credentialProviders (%q)\n",
			profile.GetNamespace(), profile.GetName(), ap.Name)
		offered[ap.Name] = ap
	}
	for _, ap := range status.AccessProviders {
		offered[ap.Name] = ap
	}
	for _, p := range providers {
		if ap, ok := offered[p.Name]; ok {
			return ap, p, nil
		}
	}
	names := make([]string, 0, len(offered))
	for name := range offered {
		names = append(names, name)
	}
	sort.Strings(names)
	return accessProvider{}, provider{}, fmt.Errorf("ClusterProfile %s/%s offers no provider the provider file names (it offers %q)",
		profile.GetNamespace(), profile.GetName(), names)
}

// memberConfig builds the member's rest.Config the way a kubeconfig is read: one cluster (its
// extensions included), one user whose exec is the provider's, through clientcmd. That is
// the code that copies the exec extension into ExecProvider.Config, so client-go's exec
// authenticator passes it to the plugin as spec.cluster.config when provideClusterInfo is set.
func memberConfig(ap accessProvider, p provider) (*rest.Config, error) {
	exec := p.ExecConfig.DeepCopy() // the file's entry may serve several profiles
	for _, ext := range ap.Cluster.Extensions {
		var err error
		switch ext.Name {
		case extraArgsExtension:
			err = appendArgs(exec, ext.Extension.Raw, p.ArgsPolicy)
		case extraEnvsExtension:
			err = mergeEnv(exec, ext.Extension.Raw, p.EnvVarsPolicy)
		}
		if err != nil {
			return nil, fmt.Errorf("access provider %q: %w", ap.Name, err)
		}
	}
	// A background consumer has no terminal to prompt on; upstream sets Never as well.
	exec.InteractiveMode = clientcmdv1.NeverExecInteractiveMode

	cluster := *ap.Cluster.DeepCopy()
	// A file path is meaningful only on the producer's machine: never read one named by a
	// profile (upstream uses certificate-authority-data alone).
	cluster.CertificateAuthority = ""
	kubeconfig := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []clientcmdv1.NamedCluster{{Name: ap.Name, Cluster: cluster}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: p.Name, AuthInfo: clientcmdv1.AuthInfo{Exec: exec}}},
		Contexts:       []clientcmdv1.NamedContext{{Name: "member", Context: clientcmdv1.Context{Cluster: ap.Name, AuthInfo: p.Name}}},
		CurrentContext: "member",
	}
	data, err := json.Marshal(kubeconfig)
	if err != nil {
		return nil, err
	}
	loaded, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("access provider %q: %w", ap.Name, err)
	}
	config, err := clientcmd.NewDefaultClientConfig(*loaded, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("access provider %q: %w", ap.Name, err)
	}
	if cluster.ProxyURL == "" {
		// Upstream dials the member directly unless the profile names a proxy; the
		// consumer's HTTPS_PROXY is for its own traffic, not for every member.
		config.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	}
	return config, nil
}

// appendArgs: the extension is a list of strings, in YAML or JSON (upstream decodes it as
// YAML, of which JSON is a subset), appended after the file's own args under Append.
func appendArgs(exec *clientcmdv1.ExecConfig, raw []byte, policy string) error {
	if policy != argsAppend {
		return nil
	}
	var args []string
	if err := yaml.Unmarshal(raw, &args); err != nil {
		return fmt.Errorf("%s is not a list of strings: %w", extraArgsExtension, err)
	}
	exec.Args = append(exec.Args, args...)
	return nil
}

// mergeEnv: the extension is a map of variable name to value (upstream's encoding, not a
// list of {name, value}). Under AppendIfNotExists the file's own variables win, under
// Replace the profile's. The file's variables keep their order; new ones follow, sorted.
func mergeEnv(exec *clientcmdv1.ExecConfig, raw []byte, policy string) error {
	if policy != envsAppendIfMissing && policy != envsReplace {
		return nil
	}
	var extra map[string]string
	if err := yaml.Unmarshal(raw, &extra); err != nil {
		return fmt.Errorf("%s is not a map of names to values: %w", extraEnvsExtension, err)
	}
	have := map[string]bool{}
	for i, env := range exec.Env {
		have[env.Name] = true
		if value, ok := extra[env.Name]; ok && policy == envsReplace {
			exec.Env[i].Value = value
		}
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		if !have[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		exec.Env = append(exec.Env, clientcmdv1.ExecEnvVar{Name: name, Value: extra[name]})
	}
	return nil
}
