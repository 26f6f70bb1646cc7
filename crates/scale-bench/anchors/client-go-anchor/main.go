// Command client-go-anchor runs, with client-go's own machinery, what other multi-cluster
// systems run against their member clusters, so that Tether's scale bench can measure them
// beside Tether on the same members in the same run. Each member gets a Deployment and a Node
// shared informer (as a controller's informer manager keeps) and a SelfSubjectReview every
// probe period (its answer names the ServiceAccount, so each request shows which token it
// carried). How the member's bearer token reaches those clients is the --mode:
//
//   - karmada: Karmada >= 1.19 after PR #7663. rest.Config carries no token; WrapTransport is
//     transport.ResettableTokenSourceWrapTransport over transport.NewCachedTokenSource over a
//     source that GETs the member's Secret through the control plane, each token good for the
//     refresh period (--refresh-period, 5m). A 401 resets the cache; the request is not retried.
//   - bearer-token: Karmada before #7663, and any rest.Config{BearerToken}: the token is read
//     once, when the client is built.
//   - argocd: Argo CD's reaction to a changed cluster Secret. gitops-engine is not used (it is
//     not buildable here); its behaviour is written with client-go: a control-plane informer
//     on the cluster Secrets, and on a change of a member's token every informer of that
//     member is stopped, the config rebuilt with the new token, the informers started again
//     and waited for (Argo CD's handleModEvent: Invalidate(SetConfig), then EnsureSynced).
//
// Input: --fleet FILE, the JSON the bench writes (see fleetFile). Output: one JSON object a
// line on stdout (see observation); progress and errors on stderr. It runs until SIGTERM or
// SIGINT; exit status 2 if the fleet file is unusable.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// requestTimeout bounds every request this program makes itself (Secret GETs, reviews);
// watches are left to the informers.
const requestTimeout = 10 * time.Second

// maxFleetFile is the largest fleet file read (10,000 members fit in a few MiB).
const maxFleetFile = 64 << 20

// fleetFile is what the bench hands over.
type fleetFile struct {
	ControlPlane      endpoint    `json:"controlPlane"`
	SecretNamespace   string      `json:"secretNamespace"`
	Namespace         string      `json:"namespace"`
	Canary            string      `json:"canary"`
	ProbePeriodMillis int64       `json:"probePeriodMillis"`
	Members           []memberDef `json:"members"`
}

// endpoint is an apiserver and the admin token the bench reads the control plane with.
type endpoint struct {
	Server string `json:"server"`
	CAPEM  string `json:"caPEM"`
	Token  string `json:"token"`
}

// memberDef is one member: its Secret on the control plane has the member's name.
type memberDef struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	CAPEM  string `json:"caPEM"`
}

// observation is one line of output.
type observation struct {
	Member   string `json:"member"`
	Event    string `json:"event"` // synced, user, unauthorized, list, secretRead, canary
	User     string `json:"user,omitempty"`
	SentMs   int64  `json:"sentMs,omitempty"`
	AtMs     int64  `json:"atMs,omitempty"`
	Resource string `json:"resource,omitempty"`
	Ready    *int32 `json:"ready,omitempty"`
}

// emitter writes observations, one line each, from any goroutine.
type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *emitter) emit(o observation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enc.Encode(o); err != nil {
		fmt.Fprintf(os.Stderr, "client-go-anchor: writing an observation: %v\n", err)
	}
}

func main() {
	fleetPath := flag.String("fleet", "", "the fleet file (JSON) the bench wrote")
	mode := flag.String("mode", "", "karmada, bearer-token or argocd")
	refresh := flag.Duration("refresh-period", 5*time.Minute, "karmada: how long a token read from the Secret is used")
	flag.Parse()

	fleet, err := readFleet(*fleetPath)
	if err != nil {
		fail(err)
	}
	if *mode != "karmada" && *mode != "bearer-token" && *mode != "argocd" {
		fail(fmt.Errorf("--mode must be karmada, bearer-token or argocd, not %q", *mode))
	}
	controlPlane, err := kubernetes.NewForConfig(&rest.Config{
		Host:            fleet.ControlPlane.Server,
		BearerToken:     fleet.ControlPlane.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(fleet.ControlPlane.CAPEM)},
		QPS:             200,
		Burst:           400,
	})
	if err != nil {
		fail(fmt.Errorf("control plane client: %w", err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	out := &emitter{enc: json.NewEncoder(os.Stdout)}
	period := time.Duration(fleet.ProbePeriodMillis) * time.Millisecond
	members := make(map[string]*member, len(fleet.Members))
	for _, def := range fleet.Members {
		m := &member{
			def: def, fleet: fleet, mode: *mode, refresh: *refresh, out: out,
			secrets: controlPlane.CoreV1().Secrets(fleet.SecretNamespace),
		}
		members[def.Name] = m
		go m.run(ctx, period)
	}
	if *mode == "argocd" {
		go watchClusterSecrets(ctx, controlPlane, fleet.SecretNamespace, members)
	}
	<-ctx.Done()
}

func readFleet(path string) (*fleetFile, error) {
	if path == "" {
		return nil, fmt.Errorf("--fleet is required")
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	raw, err := io.ReadAll(io.LimitReader(file, maxFleetFile+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxFleetFile {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxFleetFile)
	}
	var fleet fleetFile
	if err := json.Unmarshal(raw, &fleet); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if fleet.ProbePeriodMillis <= 0 || len(fleet.Members) == 0 || fleet.Namespace == "" {
		return nil, fmt.Errorf("%s: needs probePeriodMillis, namespace and members", path)
	}
	return &fleet, nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "client-go-anchor: %v\n", err)
	os.Exit(2)
}
