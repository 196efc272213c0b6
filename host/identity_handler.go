package host

import (
	"context"
	"errors"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/iam"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/host/sts"
	"github.com/mce-run/mce/internal/awsquery"
)

// STS's and IAM's front: their query-protocol forms come to POST / as
// CloudWatch's older ones do; serveCloudWatch reads the form once and hands
// a form of STS's or IAM's Version here, with the caller it authenticated.
// host/sts and host/iam answer.

// identity holds the STS and IAM services.
type identity struct {
	sts *sts.Service
	iam *iam.Service
}

func newIdentity(s *Server) identity {
	return identity{
		sts: sts.New(sts.Options{Account: s.cfg.Account}),
		iam: iam.New(iam.Options{Authorizer: s.cfg.Authz, Account: s.cfg.Account, Started: time.Now(),
			ExecutionRoles: func() (arns []string) {
				store.List(s.store, store.Models, func(r ModelRecord) error {
					if r.Input.ExecutionRoleARN != "" {
						arns = append(arns, r.Input.ExecutionRoleARN)
					}
					return nil
				})
				return arns
			}}),
	}
}

// serveIdentity answers form if its Version is STS's or IAM's (served
// true); p is the caller authenticated over the form's body.
func serveIdentity(s *Server, c echo.Context, form *awsquery.Form, p authz.Principal) (served bool) {
	r, w := c.Request(), c.Response()
	var service string
	switch form.Version() {
	case sts.APIVersion:
		service = "sts"
	case iam.APIVersion:
		service = "iam"
	default:
		return false
	}
	if e := accessOf(c); e != nil {
		e.Operation = service + ":" + form.Action()
	}
	id := w.Header().Get(hdrRequestID)
	if service == "sts" {
		s.identity.sts.Serve(w, form, sts.Caller{Local: !s.gate.enabled(), Principal: p}, id)
		return true
	}
	s.identity.iam.Serve(w, r, form, p, func(ctx context.Context, action, resource string) error {
		if api := s.gate.decide(ctx, r, p, action, resource, nil); api != nil {
			return errors.New(api.Message)
		}
		return nil
	}, id)
	return true
}
