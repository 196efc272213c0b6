package host_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// TestDockerShadowVariant runs, on the real Docker engine and with
// aws-sdk-go-v2, the English sentiment model as the production variant and
// the probe as its shadow variant (weight 1: every call copied). The
// production answers are the sentiment model's, the same as those of an
// endpoint without a shadow, whether the shadow answers, fails (status=500,
// which the probe obeys and the sentiment model ignores) or never answers
// within the container time limit (sleep=10m); the production calls never
// wait for it. The shadow's calls have their own series; its container is
// labelled io.mce.shadow; a restarted mce adopts it and copies go on;
// deleting the endpoint removes it.
func TestDockerShadowVariant(t *testing.T) {
	cli := testenv.Docker(t)
	probe, sentiment := testenv.Image(t, "probe"), testenv.Image(t, "sentiment")
	models := testenv.Models(t)
	instance, stateDir := testenv.Instance(t), t.TempDir()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after both hosts' teardown
	start := func() *hostenv.Host {
		h := hostenv.New(t, hostenv.Options{Instance: instance, StateDir: stateDir, Store: st,
			ModelRoots: []string{models},
			Runtime:    func(o *docker.Options) { o.Adopt = true },
			Host:       func(c *host.Config) { c.ContainerTimeout = 3 * time.Second }})
		if err := h.Server.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := start()
	sm, rt, ctx := h.SageMakerClient(), h.RuntimeClient(), context.Background()

	for _, m := range []sagemaker.CreateModelInput{
		{ModelName: aws.String("english"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(sentiment),
			ModelDataUrl: aws.String("file://" + filepath.Join(models, "sentiment-en.tar.gz"))}},
		{ModelName: aws.String("challenger"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(probe),
			Environment: map[string]string{"PROBE_TAG": "-shadow"}}},
	} {
		if _, err := sm.CreateModel(ctx, &m); err != nil {
			t.Fatal(err)
		}
	}
	variant := func(name, model string) smtypes.ProductionVariant {
		return smtypes.ProductionVariant{VariantName: aws.String(name), ModelName: aws.String(model), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlC5Large, InitialVariantWeight: aws.Float32(1)}
	}
	for _, c := range []sagemaker.CreateEndpointConfigInput{
		{EndpointConfigName: aws.String("base"), ProductionVariants: []smtypes.ProductionVariant{variant("AllTraffic", "english")}},
		{EndpointConfigName: aws.String("shadowed"), ProductionVariants: []smtypes.ProductionVariant{variant("AllTraffic", "english")},
			ShadowProductionVariants: []smtypes.ProductionVariant{variant("Challenger", "challenger")}},
	} {
		if _, err := sm.CreateEndpointConfig(ctx, &c); err != nil {
			t.Fatal(err)
		}
		if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: c.EndpointConfigName, EndpointConfigName: c.EndpointConfigName}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"base", "shadowed"} {
		if err := h.Server.WaitEndpoint(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	shadowContainers := func() []string {
		t.Helper()
		f := client.Filters{}.Add("label", docker.LabelInstance+"="+instance).Add("label", docker.LabelShadow+"=true")
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range cs.Items {
			if c.Labels[docker.LabelVariant] != "Challenger" || c.Labels[docker.LabelEndpoint] != "shadowed" {
				t.Errorf("container %s labelled shadow belongs to %s/%s", c.ID, c.Labels[docker.LabelEndpoint], c.Labels[docker.LabelVariant])
			}
			ids = append(ids, c.ID)
		}
		return ids
	}
	before := shadowContainers()
	if len(before) != 1 {
		t.Fatalf("%d containers labelled %s=true, want the shadow variant's one", len(before), docker.LabelShadow)
	}

	call := func(rt *sagemakerruntime.Client, endpoint, text, attrs string) (string, time.Duration) {
		t.Helper()
		in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(endpoint), Body: []byte(text), ContentType: aws.String("text/plain")}
		if attrs != "" {
			in.CustomAttributes = aws.String(attrs)
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		t0 := time.Now()
		out, err := rt.InvokeEndpoint(cctx, in)
		if err != nil {
			t.Fatalf("%s with %q: %v", endpoint, attrs, err)
		}
		if v := aws.ToString(out.InvokedProductionVariant); v != "AllTraffic" {
			t.Fatalf("%s answered by %s", endpoint, v)
		}
		return string(out.Body), time.Since(t0)
	}
	texts := []string{"I love this wonderful film", "a terrible, boring day", "the weather"}
	n := 0
	var slowest time.Duration
	for _, attrs := range []string{"", "status=500", "sleep=10m"} {
		for _, text := range texts {
			want, _ := call(rt, "base", text, attrs)
			got, took := call(rt, "shadowed", text, attrs)
			n++
			slowest = max(slowest, took)
			if got != want || !strings.Contains(got, `"language":"en"`) {
				t.Errorf("with shadow behaviour %q, %q → %s; without a shadow %s", attrs, text, got, want)
			}
		}
	}
	if slowest > 2*time.Second { // the silent shadow takes 3 s (the container time limit) per copy
		t.Errorf("the slowest production call beside the shadow took %v", slowest)
	}
	metric := func(h *hostenv.Host, series string) int {
		t.Helper()
		resp, err := http.Get(h.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)$`).FindSubmatch(b)
		if m == nil {
			return -1
		}
		v, _ := strconv.Atoi(string(m[1]))
		return v
	}
	waitMetric := func(h *hostenv.Host, series string, want int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for got := metric(h, series); got != want; got = metric(h, series) {
			if time.Now().After(deadline) {
				t.Fatalf("%s = %d, want %d", series, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitMetric(h, `mce_invocations_total{endpoint="shadowed",variant="Challenger"}`, n)
	waitMetric(h, `mce_invocation_5xx_errors_total{endpoint="shadowed",variant="Challenger"}`, len(texts))
	// A failed copy (3 answered 500) and a timed-out one (3) are model errors.
	waitMetric(h, `mce_invocation_model_errors_total{endpoint="shadowed",variant="Challenger"}`, 2*len(texts))
	waitMetric(h, `mce_model_latency_seconds_count{endpoint="shadowed",variant="Challenger"}`, len(texts))
	waitMetric(h, `mce_invocations_total{endpoint="shadowed",variant="AllTraffic"}`, n)
	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("shadowed")})
	if err != nil || len(d.ShadowProductionVariants) != 1 || aws.ToString(d.ShadowProductionVariants[0].VariantName) != "Challenger" ||
		aws.ToInt32(d.ShadowProductionVariants[0].CurrentInstanceCount) != 1 {
		t.Fatalf("DescribeEndpoint: %+v %v", d, err)
	}

	// A restart adopts the shadow's container; copies go on to it.
	h.Crash()
	h2 := start()
	if err := h2.Server.WaitEndpoint(ctx, "shadowed"); err != nil {
		t.Fatal(err)
	}
	if after := shadowContainers(); len(after) != 1 || after[0] != before[0] {
		t.Errorf("after the restart the shadow's containers are %v, want the adopted %v", after, before)
	}
	rt2 := h2.RuntimeClient()
	for _, text := range texts {
		want, _ := call(rt2, "base", text, "")
		if got, _ := call(rt2, "shadowed", text, ""); got != want {
			t.Errorf("after the restart %q → %s, want %s", text, got, want)
		}
	}
	waitMetric(h2, `mce_model_latency_seconds_count{endpoint="shadowed",variant="Challenger"}`, len(texts))

	if _, err := h2.SageMakerClient().DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("shadowed")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for len(shadowContainers()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the shadow's container outlived its endpoint")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
