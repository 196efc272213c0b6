package authz

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/mce-run/mce/internal/wire"
)

// StreamingEventsPayload is the X-Amz-Content-Sha256 of a request whose body
// is an event stream signed message by message (SigV4's event-stream
// signing, as InvokeEndpointWithBidirectionalStream's clients send it).
const StreamingEventsPayload = "STREAMING-AWS4-HMAC-SHA256-EVENTS"

// ErrEventSignature is what EventVerifier.Open returns for a message whose
// signature is missing, malformed, out of date or wrong.
var ErrEventSignature = errors.New("event signature")

// EventVerifier checks the chained signatures of one signed event stream:
// each message's :chunk-signature signs its :date and payload with the
// signature before it, starting from the request's own. It is used by one
// goroutine.
type EventVerifier struct {
	signer *v4.StreamSigner
	now    func() time.Time
	skew   time.Duration
}

// AuthenticateEventStream authenticates a request whose body is a signed
// event stream: the headers are verified as Authenticate verifies them, with
// StreamingEventsPayload as the payload hash, and the EventVerifier returned
// checks each message of the body after that. An unsigned request, or any
// request without a credentials file, gives an anonymous Principal and a nil
// verifier (Open then takes messages as they come). Failures are *AuthError.
func (a *Authorizer) AuthenticateEventStream(r *http.Request) (Principal, *EventVerifier, error) {
	st := a.st.Load()
	auth, p, done, err := a.unverified(r)
	if done {
		return p, nil, err
	}
	fail := func(aerr *AuthError) (Principal, *EventVerifier, error) {
		a.logAuthFailure(accessKeyFromHeader(auth[0]), r.RemoteAddr, aerr.Code, "authentication failed")
		return Principal{}, nil, aerr
	}
	if ph := r.Header.Values(wire.HeaderAmzContentSHA256); len(ph) != 1 || ph[0] != StreamingEventsPayload {
		return fail(authErr(r, CodeInvalidSignature, "A bidirectional stream must be signed event by event: X-Amz-Content-Sha256 must be "+StreamingEventsPayload+"."))
	}
	// The header checks without the payload hash, which is not a SHA-256;
	// then the signature over it.
	bare := r.Clone(r.Context())
	bare.Header.Del(wire.HeaderAmzContentSHA256)
	sv, aerr := verifySigV4Headers(bare, st.keys, a.now(), a.skew, a.cfg.Region)
	if aerr != nil {
		return fail(aerr)
	}
	if aerr := sv.verifySignature(r, StreamingEventsPayload); aerr != nil {
		return fail(aerr)
	}
	seed, err := hex.DecodeString(sv.auth.signature)
	if err != nil {
		return fail(authErr(r, CodeIncompleteSignature, "The request signature is not hexadecimal."))
	}
	creds := aws.Credentials{AccessKeyID: sv.auth.accessKeyID, SecretAccessKey: string(sv.cred.secret)}
	return sv.cred.principal, &EventVerifier{signer: v4.NewStreamSigner(creds, sv.auth.service, sv.auth.region, seed),
		now: a.now, skew: a.skew}, nil
}

// Open checks msg, one message of the stream as the client framed it, and
// returns the message it carries (its payload); end reports the empty
// message that ends the stream. With a nil v (an unsigned stream) a message
// with a :chunk-signature is unwrapped unchecked and any other is returned
// as it is. An error wraps ErrEventSignature.
func (v *EventVerifier) Open(ctx context.Context, msg eventstream.Message) (inner []byte, end bool, err error) {
	sig, date := msg.Headers.Get(eventstreamapi.ChunkSignatureHeader), msg.Headers.Get(eventstreamapi.DateHeader)
	if v == nil {
		if sig == nil {
			return nil, false, nil // the message itself is the event: the caller keeps it
		}
		return msg.Payload, len(msg.Payload) == 0, nil
	}
	sb, ok := sig.(eventstream.BytesValue)
	if !ok || len(sb) != 32 {
		return nil, false, fmt.Errorf("%w: every message must carry a 32-byte %s header", ErrEventSignature, eventstreamapi.ChunkSignatureHeader)
	}
	dt, ok := date.(eventstream.TimestampValue)
	if !ok {
		return nil, false, fmt.Errorf("%w: every message must carry a timestamp %s header", ErrEventSignature, eventstreamapi.DateHeader)
	}
	at := time.Time(dt)
	if now := v.now(); at.Before(now.Add(-v.skew)) || at.After(now.Add(v.skew)) {
		return nil, false, fmt.Errorf("%w: the message's %s %s is more than %s from now", ErrEventSignature, eventstreamapi.DateHeader, at.UTC().Format(time.RFC3339), skewText(v.skew))
	}
	var hb bytes.Buffer
	if err := eventstream.EncodeHeaders(&hb, eventstream.Headers{{Name: eventstreamapi.DateHeader, Value: dt}}); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrEventSignature, err)
	}
	want, err := v.signer.GetSignature(ctx, hb.Bytes(), msg.Payload, at)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrEventSignature, err)
	}
	if !hmac.Equal(want, sb) {
		return nil, false, fmt.Errorf("%w: the message's signature does not match (messages must be signed in order, each with the one before it)", ErrEventSignature)
	}
	return msg.Payload, len(msg.Payload) == 0, nil
}
