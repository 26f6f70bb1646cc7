package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
)

// member is one member cluster's clients: a clientset and its informers, which argocd mode
// replaces as a whole when the token changes.
type member struct {
	def     memberDef
	fleet   *fleetFile
	mode    string
	refresh time.Duration
	out     *emitter
	secrets corev1client.SecretInterface

	rebuild  sync.Mutex // one replace at a time
	mu       sync.Mutex
	client   kubernetes.Interface
	stop     chan struct{}
	token    string
	lastUser string
	ready    *int32
}

// run builds the member's clients, starts its informers and probes it every period.
func (m *member) run(ctx context.Context, period time.Duration) {
	// A bench must not fail on the order in which the control plane's objects appear: read
	// until the Secret is there (the bench stops this process if it never is).
	started := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		token, err := m.readToken(ctx)
		if err == nil {
			err = m.start(token)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "client-go-anchor: %s: %v; retrying\n", m.def.Name, err)
		}
		return err == nil, nil
	})
	if started != nil {
		return
	}
	m.out.emit(observation{Member: m.def.Name, Event: "synced"})
	// The condition never holds: probe every period until the bench stops this process.
	_ = wait.PollUntilContextCancel(ctx, period, false, func(ctx context.Context) (bool, error) {
		m.probe(ctx)
		return false, nil
	})
}

// readToken GETs the member's Secret through the control plane.
func (m *member) readToken(ctx context.Context) (string, error) {
	m.out.emit(observation{Member: m.def.Name, Event: "secretRead"})
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	secret, err := m.secrets.Get(ctx, m.def.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(secret.Data["token"]))
	if token == "" {
		return "", fmt.Errorf("secret %s/%s has no token", m.fleet.SecretNamespace, m.def.Name)
	}
	return token, nil
}

// config is the member's rest.Config for this mode; token is the one read at build time.
func (m *member) config(token string) *rest.Config {
	config := &rest.Config{
		Host:            m.def.Server,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(m.def.CAPEM)},
		// Karmada's defaults for member clients (--cluster-api-qps, --cluster-api-burst).
		QPS:   40,
		Burst: 60,
	}
	observe := func(rt http.RoundTripper) http.RoundTripper {
		return &observingTransport{inner: rt, member: m.def.Name, out: m.out}
	}
	switch m.mode {
	case "karmada":
		source := transport.NewCachedTokenSource(&secretTokenSource{member: m, period: m.refresh})
		config.WrapTransport = transport.Wrappers(transport.ResettableTokenSourceWrapTransport(source), observe)
	default:
		config.BearerToken = token
		config.WrapTransport = observe
	}
	return config
}

// start builds a clientset and informers for token and waits until they have synced.
func (m *member) start(token string) error {
	client, err := kubernetes.NewForConfig(m.config(token))
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(m.fleet.Namespace))
	deployments := factory.Apps().V1().Deployments().Informer()
	_, _ = deployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.sawDeployment,
		UpdateFunc: func(_, object interface{}) { m.sawDeployment(object) },
	})
	factory.Core().V1().Nodes().Informer()
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	m.mu.Lock()
	m.client, m.stop, m.token = client, stop, token
	m.mu.Unlock()
	return nil
}

// replace stops the member's informers and starts new ones with token (argocd mode).
func (m *member) replace(token string) {
	m.rebuild.Lock()
	defer m.rebuild.Unlock()
	m.mu.Lock()
	if token == m.token {
		m.mu.Unlock()
		return
	}
	old := m.stop
	m.stop = nil
	m.mu.Unlock()
	if old != nil {
		close(old)
	}
	if err := m.start(token); err != nil {
		fmt.Fprintf(os.Stderr, "client-go-anchor: %s: rebuilding: %v\n", m.def.Name, err)
	}
}

// sawDeployment reports the canary's ready replicas when they change.
func (m *member) sawDeployment(object interface{}) {
	deployment, ok := object.(*appsv1.Deployment)
	if !ok || deployment.Name != m.fleet.Canary {
		return
	}
	ready := deployment.Status.ReadyReplicas
	m.mu.Lock()
	changed := m.ready == nil || *m.ready != ready
	m.ready = &ready
	m.mu.Unlock()
	if changed {
		m.out.emit(observation{Member: m.def.Name, Event: "canary", Ready: &ready})
	}
}

// probe sends one SelfSubjectReview and reports the user when it differs from the last one.
func (m *member) probe(ctx context.Context) {
	m.mu.Lock()
	client := m.client
	m.mu.Unlock()
	if client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	sent := time.Now()
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return // a 401 was reported by the transport
	}
	user := review.Status.UserInfo.Username
	m.mu.Lock()
	changed := user != m.lastUser
	m.lastUser = user
	m.mu.Unlock()
	if changed {
		m.out.emit(observation{Member: m.def.Name, Event: "user", User: user, SentMs: sent.UnixMilli()})
	}
}
