// Command karmada-anchor runs Karmada v1.18.2's own member cluster config builder (before
// Karmada PR #7663) for Tether's scale bench: per member, util.BuildClusterConfig from
// github.com/karmada-io/karmada/pkg/util reads the member's Cluster and its Secret through the
// control plane, as Karmada's controllers do in util.NewClusterClientSet, and copies the
// Secret's token into rest.Config.BearerToken once, when the client is built. On that client it
// runs what client-go-anchor's bearer-token mode runs: a Deployment and a Node shared informer
// and a SelfSubjectReview every probe period (its answer names the ServiceAccount, so each
// request shows which token it carried).
//
// Input: --fleet FILE, the JSON the bench writes (see fleetFile; the members' Cluster objects
// and Secrets are on its control plane). Output: one JSON object a line on stdout (see
// observation), the protocol of client-go-anchor; progress and errors on stderr. It runs until
// SIGTERM or SIGINT; exit status 2 if the fleet file or the control plane client is unusable.
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

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karmada-io/karmada/pkg/util/gclient"
)

// requestTimeout bounds every request this program makes itself (reviews); watches are left
// to the informers, the Cluster and Secret reads to Karmada's getters.
const requestTimeout = 10 * time.Second

// maxFleetFile is the largest fleet file read (10,000 members fit in a few MiB).
const maxFleetFile = 64 << 20

// fleetFile is what the bench hands over (client-go-anchor reads the same file).
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

// memberDef is one member: its Cluster and its Secret on the control plane have its name.
// Server and CAPEM are not used: Karmada takes them from the Cluster and the Secret.
type memberDef struct {
	Name string `json:"name"`
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
		fmt.Fprintf(os.Stderr, "karmada-anchor: writing an observation: %v\n", err)
	}
}

func main() {
	fleetPath := flag.String("fleet", "", "the fleet file (JSON) the bench wrote")
	flag.Parse()

	fleet, err := readFleet(*fleetPath)
	if err != nil {
		fail(err)
	}
	// The client Karmada's controllers hold for the control plane: controller-runtime's, with
	// Karmada's scheme (its Cluster type among them).
	controlPlane, err := client.New(&rest.Config{
		Host:            fleet.ControlPlane.Server,
		BearerToken:     fleet.ControlPlane.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(fleet.ControlPlane.CAPEM)},
		QPS:             200,
		Burst:           400,
	}, client.Options{Scheme: gclient.NewSchema()})
	if err != nil {
		fail(fmt.Errorf("control plane client: %w", err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	out := &emitter{enc: json.NewEncoder(os.Stdout)}
	period := time.Duration(fleet.ProbePeriodMillis) * time.Millisecond
	for _, def := range fleet.Members {
		m := &member{def: def, fleet: fleet, out: out, controlPlane: controlPlane}
		go m.run(ctx, period)
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
	fmt.Fprintf(os.Stderr, "karmada-anchor: %v\n", err)
	os.Exit(2)
}
