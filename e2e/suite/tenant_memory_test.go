package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lsv1alpha1 "github.com/terrace-dev/terrace/apis/landscaper/v1alpha1"
)

// The installation controller's memory under attack: it runs with
// GOMEMLIMIT=256MiB, and the most memory it ever held (VmHWM) must stay
// below peakRSSLimit while tenants render large templates at once and
// import hundreds of large values.
const (
	tenantMemLimit = "256MiB"
	peakRSSLimit   = 320 << 20
)

// startInstallationController replaces the local environment's
// installation-controller with one started by the spec, with env added to
// its environment, and returns its process; the environment's own comes back
// when the spec ends.
func startInstallationController(ctx context.Context, extraEnv ...string) *os.Process {
	const name = "installation-controller"
	env.Kill(ctx, name)
	DeferCleanup(func(ctx SpecContext) { env.Restart(ctx) })
	cmd := exec.Command(filepath.Join(env.Root, "bin", name),
		"--kubeconfig", filepath.Join(env.LocalDir, "kubeconfigs", name+".kubeconfig"),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--log-format", "console")
	cmd.Env = append(os.Environ(), extraEnv...)
	log, err := os.Create(filepath.Join(env.LocalDir, "logs", name+"-tenant-spec.log"))
	Expect(err).NotTo(HaveOccurred())
	cmd.Stdout, cmd.Stderr = log, log
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		// Stopped before the environment's own starts again (cleanups run
		// last-in first-out).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
	})
	return cmd.Process
}

// peakRSS is the most resident memory the process pid has held (VmHWM).
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// largeRender is a root whose deploy execution builds about 200 MB of
// strings.
func largeRender(ns, name string) *lsv1alpha1.Installation {
	bp := `deployExecutions:
- name: large
  type: GoTemplate
  template: |
    {{- $s := repeat 1000000 "x" }}{{- $all := list }}
    {{- range until 200 }}{{- $all = append $all $s }}{{- end }}
    deployItems: {{ toJson $all }}
`
	return tenantInstallation(ns, name, bp)
}

func tenantInstallation(ns, name, bp string) *lsv1alpha1.Installation {
	return &lsv1alpha1.Installation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{lsv1alpha1.OperationAnnotation: string(lsv1alpha1.OperationReconcile)}},
		Spec: lsv1alpha1.InstallationSpec{Blueprint: lsv1alpha1.BlueprintDefinition{
			Inline: &lsv1alpha1.InlineBlueprint{Filesystem: map[string]string{"blueprint.yaml": bp}}}},
	}
}

// failedWith is the reason and message of a finished, failed job of
// installation ns/name ("" while it runs).
func failedWith(ctx context.Context, ns, name string) func(Gomega) string {
	return func(g Gomega) string {
		inst := &lsv1alpha1.Installation{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, inst)).To(Succeed())
		st := inst.Status
		if st.JobID == "" || st.JobID != st.JobIDFinished || st.Phase != lsv1alpha1.PhaseFailed || st.LastError == nil {
			return ""
		}
		return st.LastError.Reason + ": " + st.LastError.Message
	}
}

var _ = Describe("Installations of hostile tenants", Serial, func() {
	It("fail large renders and imports with their bounds, serve another tenant, and keep the controller's memory bounded", func(ctx SpecContext) {
		if !env.Local() {
			Skip("needs the local environment: the spec runs the installation controller as its own process")
		}
		proc := startInstallationController(ctx, "GOMEMLIMIT="+tenantMemLimit)
		attack := newNamespace(ctx, "tenant-attack")
		other := newNamespace(ctx, "tenant-other")

		big := &lsv1alpha1.DataObject{ObjectMeta: metav1.ObjectMeta{Namespace: attack, Name: "big"},
			Data: lsv1alpha1.NewAnyJSON([]byte(strconv.Quote(strings.Repeat("x", 1<<20))))}
		Expect(env.Client.Create(ctx, big)).To(Succeed())
		renders := []string{"render-0", "render-1", "render-2", "render-3"}
		for _, name := range renders {
			inst := largeRender(attack, name)
			Expect(env.Client.Create(ctx, inst)).To(Succeed())
			deleteAndWait(inst)
		}
		for name, n := range map[string]int{"many-imports": 250, "large-imports": 60} {
			inst := tenantInstallation(attack, name, "{}")
			for i := range n {
				inst.Spec.Imports.Data = append(inst.Spec.Imports.Data, lsv1alpha1.DataImport{Name: fmt.Sprintf("i%d", i), DataRef: "big"})
			}
			Expect(env.Client.Create(ctx, inst)).To(Succeed())
			deleteAndWait(inst)
		}
		innocent := tenantInstallation(other, "innocent", "deployExecutions:\n- name: default\n  type: GoTemplate\n  template: |\n    deployItems:\n"+
			indent(mockItem("item", ""), 4))
		Expect(env.Client.Create(ctx, innocent)).To(Succeed())
		deleteAndWait(innocent)

		for _, name := range renders {
			Eventually(failedWith(ctx, attack, name)).WithContext(ctx).Should(
				MatchRegexp(`^TemplateFailed: execution "large" .*(bytes|budget)`), "installation %s", name)
		}
		Eventually(failedWith(ctx, attack, "many-imports")).WithContext(ctx).Should(HavePrefix(
			"ImportLimitExceeded: the installation has 250 imports (data and targets), more than 100, the bound of one installation (--max-imports)"))
		Eventually(failedWith(ctx, attack, "large-imports")).WithContext(ctx).Should(HavePrefix(
			"ImportLimitExceeded: the imports hold more than 4194304 bytes, the bound of one installation's imports (--max-import-bytes)"))
		Eventually(installationJob(ctx, other, "innocent")).WithContext(ctx).Should(Equal(lsv1alpha1.PhaseSucceeded))

		peak, err := peakRSS(proc.Pid)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("installation-controller peak RSS (VmHWM)", fmt.Sprintf("%d MiB", peak>>20))
		Expect(peak).To(BeNumerically("<", peakRSSLimit), "peak RSS %d MiB", peak>>20)
	}, SpecTimeout(5*time.Minute))
})
