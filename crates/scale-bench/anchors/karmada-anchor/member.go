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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/karmada-io/karmada/pkg/util"
)

// Karmada's defaults for member clients (karmada-controller-manager's --cluster-api-qps and
// --cluster-api-burst), set as its controller-manager sets them: one rate limiter per cluster.
const (
	clusterAPIQPS   = 40
	clusterAPIBurst = 60
)

// member is one member cluster's client and informers, built once.
type member struct {
	def          memberDef
	fleet        *fleetFile
	out          *emitter
	controlPlane client.Client

	mu       sync.Mutex
	client   kubernetes.Interface
	lastUser string
	ready    *int32
}

// run builds the member's client, starts its informers and probes it every period.
func (m *member) run(ctx context.Context, period time.Duration) {
	// A bench must not fail on the order in which the control plane's objects appear: build
	// until the Cluster and its Secret are there (the bench stops this process if they never are).
	started := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		err := m.start(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "karmada-anchor: %s: %v; retrying\n", m.def.Name, err)
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

// config is what Karmada v1.18.2's util.NewClusterClientSet builds: util.BuildClusterConfig
// over the getters it passes (util.GetCluster, and a controller-runtime Get of the Secret),
// then the cluster's rate limiter. The only addition is the observing transport.
func (m *member) config() (*rest.Config, error) {
	clusterGetter := func(name string) (*clusterv1alpha1.Cluster, error) {
		return util.GetCluster(m.controlPlane, name)
	}
	secretGetter := func(namespace, name string) (*corev1.Secret, error) {
		m.out.emit(observation{Member: m.def.Name, Event: "secretRead"})
		secret := &corev1.Secret{}
		err := m.controlPlane.Get(context.TODO(), types.NamespacedName{Namespace: namespace, Name: name}, secret)
		return secret, err
	}
	config, err := util.BuildClusterConfig(m.def.Name, clusterGetter, secretGetter)
	if err != nil {
		return nil, err
	}
	config.RateLimiter = util.GetClusterRateLimiterGetter().
		SetDefaultLimits(clusterAPIQPS, clusterAPIBurst).
		GetRateLimiter(m.def.Name)
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &observingTransport{inner: rt, member: m.def.Name, out: m.out}
	})
	return config, nil
}

// start builds the clientset and informers and waits until they have synced.
func (m *member) start(ctx context.Context) error {
	config, err := m.config()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(m.fleet.Namespace))
	deployments := factory.Apps().V1().Deployments().Informer()
	_, _ = deployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.sawDeployment,
		UpdateFunc: func(_, object interface{}) { m.sawDeployment(object) },
	})
	factory.Core().V1().Nodes().Informer()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	m.mu.Lock()
	m.client = client
	m.mu.Unlock()
	return nil
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

// observingTransport reports every 401 and every list of the watched collections, as
// client-go-anchor's does. It sits in rest.Config.WrapTransport, below the bearer token, so it
// sees the request as sent.
type observingTransport struct {
	inner  http.RoundTripper
	member string
	out    *emitter
}

func (t *observingTransport) RoundTrip(request *http.Request) (*http.Response, error) {
	if resource := listed(request); resource != "" {
		t.out.emit(observation{Member: t.member, Event: "list", Resource: resource})
	}
	response, err := t.inner.RoundTrip(request)
	if err == nil && response.StatusCode == http.StatusUnauthorized {
		t.out.emit(observation{Member: t.member, Event: "unauthorized", AtMs: time.Now().UnixMilli()})
	}
	return response, err
}

func (t *observingTransport) WrappedRoundTripper() http.RoundTripper { return t.inner }

// listed names the watched collection a request lists: a plain list, or a watch that streams
// the initial list (client-go's WatchListClient). A watch that resumes from a resourceVersion
// is not a list.
func listed(request *http.Request) string {
	if request.Method != http.MethodGet {
		return ""
	}
	query := request.URL.Query()
	if query.Get("watch") == "true" && query.Get("sendInitialEvents") != "true" {
		return ""
	}
	for _, resource := range []string{"deployments", "nodes"} {
		if strings.HasSuffix(request.URL.Path, "/"+resource) {
			return resource
		}
	}
	return ""
}
