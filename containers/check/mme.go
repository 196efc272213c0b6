package check

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/mce-run/mce/internal/wire"
)

// Names of the multi-model checks (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html), in report order.
const (
	nameLoad          = "mme: load (200)"
	nameLoadAgain     = "mme: load again (409)"
	nameList          = "mme: list has the model"
	nameGet           = "mme: get the model (200)"
	nameMMEInvoke     = "mme: invoke answers the sample"
	nameUnload        = "mme: unload (200)"
	nameInvokeGone    = "mme: invoke after unload (404)"
	nameGetGone       = "mme: get after unload (404)"
	mmeListMaxPages   = 20
	targetModelHeader = wire.HeaderTargetModel
)

// mmeNames are the multi-model checks this run reports, or none.
func (r *run) mmeNames() []string {
	if !r.multi {
		return nil
	}
	return []string{nameLoad, nameLoadAgain, nameList, nameGet, nameMMEInvoke, nameUnload, nameInvokeGone, nameGetGone}
}

func (r *run) mmeHeaders() map[string]string {
	return map[string]string{"Content-Type": "application/json", "Accept": "application/json", targetModelHeader: r.target}
}

// modelPath is /models/<hash><suffix>.
func (r *run) modelPath(suffix string) string {
	return "/models/" + url.PathEscape(r.modelRef) + suffix
}

// mme loads the model and checks load, load again, list, get and invoke. It
// returns the model's invoke path for the misuse checks, or "" when the
// model did not load (the rest is then skipped).
func (r *run) mme(ctx context.Context) string {
	load, _ := json.Marshal(map[string]string{"model_name": r.modelRef, "url": "/opt/ml/models/" + r.modelRef + "/model"})
	a, err := r.call(ctx, http.MethodPost, r.url(firstPort, "/models"), load, r.mmeHeaders(), r.opts.Timeout)
	if err != nil || a.status != http.StatusOK {
		r.addDur(nameLoad, Fail, a.took, "want 200, got "+got(a, err)+r.diedNote(ctx))
		r.skip("the model did not load", nameLoadAgain, nameList, nameGet, nameMMEInvoke, nameUnload, nameInvokeGone, nameGetGone)
		return ""
	}
	r.addDur(nameLoad, Pass, a.took, fmt.Sprintf("%s as %s", r.target, r.modelRef))

	a, err = r.call(ctx, http.MethodPost, r.url(firstPort, "/models"), load, r.mmeHeaders(), r.opts.Timeout)
	r.expect(nameLoadAgain, http.StatusConflict, a, err)

	t := time.Now()
	r.listHas(ctx, t)

	a, err = r.call(ctx, http.MethodGet, r.url(firstPort, r.modelPath("")), nil, r.mmeHeaders(), r.opts.Timeout)
	if err == nil && a.status == http.StatusOK {
		var m struct {
			ModelName string `json:"modelName"`
		}
		if jerr := json.Unmarshal(a.body, &m); jerr != nil || m.ModelName != r.modelRef {
			r.addDur(nameGet, Fail, a.took, fmt.Sprintf(`want {"modelName":%q,"modelUrl":…}, got %s`, r.modelRef, a.summary()))
		} else {
			r.addDur(nameGet, Pass, a.took, a.summary())
		}
	} else {
		r.expect(nameGet, http.StatusOK, a, err)
	}

	r.invoke(ctx, nameMMEInvoke, r.url(firstPort, r.modelPath("/invoke")))
	return r.modelPath("/invoke")
}

// listHas pages through GET /models looking for the model.
func (r *run) listHas(ctx context.Context, t time.Time) {
	token := ""
	for range mmeListMaxPages {
		u := r.url(firstPort, "/models")
		if token != "" {
			u += "?next_page_token=" + url.QueryEscape(token)
		}
		a, err := r.call(ctx, http.MethodGet, u, nil, r.mmeHeaders(), r.opts.Timeout)
		if err != nil || a.status != http.StatusOK {
			r.add(nameList, Fail, t, "want 200, got "+got(a, err))
			return
		}
		var page struct {
			Models []struct {
				ModelName string `json:"modelName"`
				ModelURL  string `json:"modelUrl"`
			} `json:"models"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			r.add(nameList, Fail, t, `want {"models":[{"modelName":…,"modelUrl":…}]}, got `+a.summary())
			return
		}
		for _, m := range page.Models {
			if m.ModelName == r.modelRef {
				r.add(nameList, Pass, t, "modelUrl "+m.ModelURL)
				return
			}
		}
		if page.NextPageToken == "" || page.NextPageToken == token {
			r.add(nameList, Fail, t, fmt.Sprintf("%q is not listed: %s", r.modelRef, a.summary()))
			return
		}
		token = page.NextPageToken
	}
	r.add(nameList, Fail, t, fmt.Sprintf("%q not found in %d pages", r.modelRef, mmeListMaxPages))
}

// mmeUnload unloads the model and expects it gone.
func (r *run) mmeUnload(ctx context.Context) {
	if r.died {
		r.skip(skipDead, nameUnload, nameInvokeGone, nameGetGone)
		return
	}
	a, err := r.call(ctx, http.MethodDelete, r.url(firstPort, r.modelPath("")), nil, r.mmeHeaders(), r.opts.Timeout)
	r.expect(nameUnload, http.StatusOK, a, err)
	body := r.opts.Input
	hdr := r.sampleHeaders()
	if body == nil {
		body, hdr = []byte("{}"), r.mmeHeaders()
	}
	a, err = r.call(ctx, http.MethodPost, r.url(firstPort, r.modelPath("/invoke")), body, hdr, r.opts.Timeout)
	r.expect(nameInvokeGone, http.StatusNotFound, a, err)
	a, err = r.call(ctx, http.MethodGet, r.url(firstPort, r.modelPath("")), nil, r.mmeHeaders(), r.opts.Timeout)
	r.expect(nameGetGone, http.StatusNotFound, a, err)
}

// expect records pass when the call answered want.
func (r *run) expect(name string, want int, a answer, err error) {
	if err == nil && a.status == want {
		r.addDur(name, Pass, a.took, a.summary())
		return
	}
	r.addDur(name, Fail, a.took, fmt.Sprintf("want %d, got %s", want, got(a, err)))
}

func got(a answer, err error) string {
	if err != nil {
		return "no answer: " + err.Error()
	}
	return a.summary()
}
