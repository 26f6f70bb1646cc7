// Command clusterprofile-client is what a client-go consumer of SIG-Multicluster's
// ClusterProfile API does with it: read a profile from the control plane, pick an access
// provider the provider file trusts, and reach the member with client-go's own exec
// credential plugin machinery (KEP-541). It lists and watches the member's Deployments and
// reports what it sees as JSON lines, so that Tether's e2e tests can check that profiles and
// plugins they publish work for a consumer other than Tether.
//
// Output (stdout, one JSON object a line):
//
//	{"kind":"list","ok":true,"items":["ns/name",...]}
//	{"kind":"list","ok":false,"code":401,"error":"..."}   code: HTTP status, or 0
//	{"kind":"watch","type":"ADDED"|"MODIFIED"|"DELETED","object":"ns/name"}
//	{"kind":"watch-error","error":"..."}
//	{"kind":"synced"}
//
// Exit status: 2 if the member cannot even be configured (flags, profile, provider file);
// with --once, 0 if the first list succeeded and 1 if not; otherwise 0 after SIGTERM/SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

var clusterProfiles = schema.GroupVersionResource{
	Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "clusterprofiles",
}

// requestTimeout bounds each Get and List; watches are left to the informer, which
// re-establishes them itself.
const requestTimeout = 10 * time.Second

// out writes whole lines under a lock: the informer's handlers, its watch-error handler and
// the list loop run on different goroutines. os.Stdout is unbuffered, so a line is flushed
// as soon as it is written.
var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(line any) {
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(line)
}

// line is one output line: a JSON object.
type line = map[string]any

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "clusterprofile-client: "+format+"\n", args...)
	os.Exit(2)
}

// check fails with `what` before err, if there is an error.
func check(err error, what string) {
	if err != nil {
		fail("%s%v", what, err)
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the control plane holding the ClusterProfile (required)")
	profileNS := flag.String("profile-namespace", "", "namespace of the ClusterProfile (required)")
	profileName := flag.String("profile-name", "", "name of the ClusterProfile (required)")
	providerPath := flag.String("provider-file", "", "provider file: JSON {\"providers\":[...]} (required)")
	namespace := flag.String("namespace", "", "namespace of the member's Deployments (empty: all)")
	interval := flag.Duration("list-interval", time.Second, "list again this often (0: never)")
	once := flag.Bool("once", false, "list once, print it and exit (0 if it succeeded, 1 if not)")
	flag.Parse()
	if *kubeconfig == "" || *profileNS == "" || *profileName == "" || *providerPath == "" {
		fail("--kubeconfig, --profile-namespace, --profile-name and --provider-file are required")
	}
	if flag.NArg() > 0 {
		fail("unexpected arguments: %q", flag.Args())
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	providers, err := readProviderFile(*providerPath)
	check(err, "")
	controlPlane, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err, "control plane kubeconfig: ")
	dyn, err := dynamic.NewForConfig(controlPlane)
	check(err, "control plane client: ")
	getCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	profile, err := dyn.Resource(clusterProfiles).Namespace(*profileNS).Get(getCtx, *profileName, metav1.GetOptions{})
	cancel()
	check(err, fmt.Sprintf("reading ClusterProfile %s/%s: ", *profileNS, *profileName))
	access, chosen, err := chooseProvider(profile, providers)
	check(err, "")
	member, err := memberConfig(access, chosen)
	check(err, "")
	apps, err := appsclient.NewForConfig(member)
	check(err, "member client: ")

	if ok := list(ctx, apps, *namespace); *once && ok {
		os.Exit(0)
	} else if *once {
		os.Exit(1)
	}
	check(watch(ctx, apps, *namespace), "")
	if *interval > 0 {
		// The condition never holds: list every interval until SIGTERM/SIGINT.
		_ = wait.PollUntilContextCancel(ctx, *interval, false, func(ctx context.Context) (bool, error) {
			list(ctx, apps, *namespace)
			return false, nil
		})
	}
	<-ctx.Done()
}

// list prints one list line and says whether the list succeeded.
func list(ctx context.Context, apps appsclient.AppsV1Interface, namespace string) bool {
	listCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	deployments, err := apps.Deployments(namespace).List(listCtx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return false // shutting down: not the member's failure
		}
		var code int32
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			code = status.Status().Code
		}
		emit(line{"kind": "list", "ok": false, "code": code, "error": err.Error()})
		return false
	}
	items := make([]string, 0, len(deployments.Items))
	for _, d := range deployments.Items {
		items = append(items, d.Namespace+"/"+d.Name)
	}
	sort.Strings(items)
	emit(line{"kind": "list", "ok": true, "items": items})
	return true
}

// watch starts an informer on the member's Deployments. The informer, not this program,
// re-lists and re-watches after an error, and every request goes through the same exec
// authenticator, so a 401 after a credential rotation runs the plugin again.
func watch(ctx context.Context, apps appsclient.AppsV1Interface, namespace string) error {
	lw := cache.NewListWatchFromClient(apps.RESTClient(), "deployments", namespace, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &appsv1.Deployment{}, 0, cache.Indexers{})
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		emit(line{"kind": "watch-error", "error": err.Error()})
	}); err != nil {
		return err
	}
	report := func(kind string, obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			emit(line{"kind": "watch", "type": kind, "object": key})
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { report("ADDED", obj) },
		UpdateFunc: func(old, new any) {
			// A relist after a watch error replays every object as an update; only a
			// new resourceVersion is a modification.
			o, okOld := old.(*appsv1.Deployment)
			n, okNew := new.(*appsv1.Deployment)
			if okOld && okNew && o.ResourceVersion == n.ResourceVersion {
				return
			}
			report("MODIFIED", new)
		},
		DeleteFunc: func(obj any) { report("DELETED", obj) },
	})
	if err != nil {
		return err
	}
	go informer.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			emit(line{"kind": "synced"})
		}
	}()
	return nil
}
