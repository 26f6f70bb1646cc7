package main

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watchClusterSecrets is Argo CD's cluster Secret watch: when a member's token changes, its
// cluster cache is invalidated and synced again, which relists every watched collection.
func watchClusterSecrets(ctx context.Context, controlPlane kubernetes.Interface, namespace string, members map[string]*member) {
	factory := informers.NewSharedInformerFactoryWithOptions(controlPlane, 0, informers.WithNamespace(namespace))
	secrets := factory.Core().V1().Secrets().Informer()
	_, _ = secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, object interface{}) {
			secret, ok := object.(*corev1.Secret)
			if !ok {
				return
			}
			m, known := members[secret.Name]
			token := strings.TrimSpace(string(secret.Data["token"]))
			if !known || token == "" {
				return
			}
			go m.replace(token)
		},
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
}
