package suite

import (
	"context"
	"fmt"
	"io"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// WebserverImageEnv names the local node's webserver image (by digest):
// a small HTTP server that is also its own client (make e2e-node sets it).
const WebserverImageEnv = "E2E_WEBSERVER_IMAGE"

// webItem is a manifest deploy item of a Deployment of two replicas of image,
// with a readiness probe, and a Service in front of it.
func webItem(ns, image string) string {
	return fmt.Sprintf(`- name: web
  type: landscaper.gardener.cloud/kubernetes-manifest
  target:
    import: cluster
  config:
    apiVersion: manifest.deployer.landscaper.gardener.cloud/v1alpha2
    kind: ProviderConfiguration
    readinessChecks:
      timeout: 3m
    manifests:
    - policy: manage
      manifest:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web, namespace: %[1]s}
        spec:
          replicas: 2
          selector: {matchLabels: {app: web}}
          template:
            metadata: {labels: {app: web}}
            spec:
              securityContext: {runAsNonRoot: true}
              containers:
              - name: web
                image: %[2]s
                ports: [{containerPort: 8080}]
                readinessProbe:
                  httpGet: {path: /healthz, port: 8080}
                  periodSeconds: 1
    - policy: manage
      manifest:
        apiVersion: v1
        kind: Service
        metadata: {name: web, namespace: %[1]s}
        spec:
          selector: {app: web}
          ports: [{port: 80, targetPort: 8080}]
`, ns, image)
}

var _ = Describe("Workloads on the local node", func() {
	It("waits for two ready pods of a deployed Deployment, whose Service answers another pod by its DNS name", func(ctx SpecContext) {
		image := os.Getenv(WebserverImageEnv)
		if image == "" {
			Skip(WebserverImageEnv + " names no image the node can run (make e2e-node sets it)")
		}
		ns := newNamespace(ctx, "workload")
		createTarget(ctx, ns, "cluster", clusterKubeconfig(ctx, ns))
		root := createInstallation(ctx, ns, installation("web", webItem(ns, image)))

		By("the item succeeds once its readiness check saw both pods ready")
		Eventually(installationJob(ctx, ns, root.Name)).WithContext(ctx).
			Should(Equal(lsv1alpha1.PhaseSucceeded), func() string { return describe(ctx, ns) })
		d := &appsv1.Deployment{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
		Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))

		By("another pod asks web." + ns + ".svc.cluster.local")
		clientPod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
			Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
				Containers: []corev1.Container{{
					Name: "client", Image: image,
					// kube-proxy programs the Service a moment after the pods are ready.
					Args: []string{"-get", "http://web." + ns + ".svc.cluster.local/", "-retry-for", "60s"},
				}},
			},
		}
		Expect(env.Client.Create(ctx, clientPod)).To(Succeed())
		Eventually(func(g Gomega) corev1.PodPhase {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(clientPod), clientPod)).To(Succeed())
			return clientPod.Status.Phase
		}).WithContext(ctx).Should(Equal(corev1.PodSucceeded), func() string { return podLog(ctx, ns, "client") })
		Expect(podLog(ctx, ns, "client")).To(HavePrefix("hello from web-"))
	})
})

// podLog returns what a pod's container printed (through the kubelet).
func podLog(ctx context.Context, ns, pod string) string {
	stream, err := env.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return "no log: " + err.Error()
	}
	defer func() { _ = stream.Close() }()
	data, err := io.ReadAll(io.LimitReader(stream, 64<<10))
	if err != nil {
		return "reading the log: " + err.Error()
	}
	return string(data)
}
