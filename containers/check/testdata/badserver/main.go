// Command badserver is a SageMaker-style container that breaks the contract
// in the way $MODE says, so the tests of mce check can see each rule fail.
// Without MODE it keeps the contract: it listens on $SAGEMAKER_BIND_TO_PORT
// (default 8080), answers /ping 200, and echoes text/plain bodies of up to
// 6 MiB from POST /invocations (413 beyond, 415 for other types).
//
//	MODE=extraport   also listens on port 9000
//	MODE=fixedport   ignores SAGEMAKER_BIND_TO_PORT and listens on 8080
//	MODE=noping      /ping always answers 503
//	MODE=crash       logs a line and exits with status 3 at start
//	MODE=servererr   answers 500 to an unsupported content type
//	MODE=fragile     exits when a body is over 6 MiB
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

const maxBody = 6 << 20

func main() {
	mode := os.Getenv("MODE")
	if len(os.Args) > 1 && os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "badserver: want the argument serve")
		os.Exit(2)
	}
	if mode == "crash" {
		fmt.Fprintln(os.Stderr, "badserver: cannot load the model: /opt/ml/model/weights.bin is missing")
		os.Exit(3)
	}
	port := os.Getenv("SAGEMAKER_BIND_TO_PORT")
	if port == "" || mode == "fixedport" {
		port = "8080"
	}
	if mode == "extraport" {
		l, err := net.Listen("tcp", ":9000")
		if err != nil {
			fmt.Fprintln(os.Stderr, "badserver:", err)
			os.Exit(1)
		}
		go http.Serve(l, http.NotFoundHandler())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		if mode == "noping" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("POST /invocations", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			if mode == "fragile" {
				os.Exit(1)
			}
			http.Error(w, "body over 6 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Header.Get("Content-Type") != "text/plain" {
			status := http.StatusUnsupportedMediaType
			if mode == "servererr" {
				status = http.StatusInternalServerError
			}
			http.Error(w, "unsupported content type", status)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(b)
	})
	fmt.Println("badserver listening on", port, "mode", mode)
	if err := http.ListenAndServe(":"+port, mux); err != nil {
		fmt.Fprintln(os.Stderr, "badserver:", err)
		os.Exit(1)
	}
}
